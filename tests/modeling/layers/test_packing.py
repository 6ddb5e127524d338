"""The packed encoder (`modeling.layers.packing`) against the padded one with the same weights: the
same numbers at real tokens, zeros at padding, dense layers on real tokens only, and under XLA a
bounded set of row counts."""
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.config import BertConfig
from modeling.layers.attention import SelfAttention
from modeling.layers import packing
from modeling import losses
from modeling.models.encoder import BertEncoder
from modeling.models.task_models import BertTokenClassifier

CONFIG = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=64, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0, type_vocab_size=3,
                    initializer_range=0.2)
# XLA's CPU dot products of small matrices round differently from those of larger ones, so that
# under XLA a token's numbers move by round-off with the row count (the padded encoder's too).
XLA_ATOL = 1e-5
RUNS = {
    "eager": lambda model: lambda x: model(x, training=False),
    "graph": lambda model: tf.function(lambda x: model(x, training=False)),
    "xla": lambda model: tf.function(lambda x: model(x, training=False), jit_compile=True),
}


def _encoders(config: BertConfig = CONFIG) -> tuple[BertEncoder, BertEncoder]:
    packed = BertEncoder(config)
    padded = BertEncoder(config, packed=False)
    padded.set_weights(packed.get_weights())
    return packed, padded


def _batch(lengths: list[int], width: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Random ids and segments (padding too: it must not matter), real tokens a prefix."""
    rng = np.random.default_rng(seed)
    shape = (len(lengths), width)
    input_mask = (np.arange(width)[None] < np.array(lengths)[:, None]).astype(np.int32)
    return {"input_ids": rng.integers(1, CONFIG.vocab_size, shape).astype(np.int32),
            "input_mask": input_mask,
            "segment_ids": rng.integers(0, CONFIG.type_vocab_size, shape).astype(np.int32)}


def _mixed_batch() -> dict[str, np.ndarray]:
    """Full, short, one-token and empty rows, and one whose real tokens are no prefix."""
    batch = _batch([16, 9, 1, 0, 16], 16, seed=1)
    batch["input_mask"][4] = [1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 0, 1, 0]
    return batch


def _assert_packed_matches_padded(packed: dict, padded: dict, input_mask: np.ndarray,
                                  atol: float = 1e-6):
    real = input_mask != 0
    pairs = [(packed["embedding_output"], padded["embedding_output"])]
    pairs += list(zip(packed["encoder_outputs"], padded["encoder_outputs"]))
    for packed_states, padded_states in pairs:
        packed_states, padded_states = np.asarray(packed_states), np.asarray(padded_states)
        assert packed_states.shape == padded_states.shape == input_mask.shape + (32,)
        np.testing.assert_allclose(packed_states[real], padded_states[real], atol=atol)
        assert not packed_states[~real].any()
    np.testing.assert_array_equal(packed["sequence_output"], packed["encoder_outputs"][-1])
    pooled = np.asarray(packed["pooled_output"])
    assert np.isfinite(pooled).all()
    np.testing.assert_allclose(pooled[real[:, 0]], np.asarray(padded["pooled_output"])[real[:, 0]],
                               atol=atol)


@pytest.mark.parametrize("run", list(RUNS))
def test_real_tokens_as_padded_and_padding_zero(run):
    packed, padded = _encoders()
    batch = _mixed_batch()
    # The last row's real tokens are no prefix: packed, its sums run over 7 tokens, padded over
    # 16 with zeros between, and round off in another order (up to about 1e-6 at values ~0.4).
    _assert_packed_matches_padded(RUNS[run](packed)(batch), RUNS[run](padded)(batch),
                                  batch["input_mask"], atol=XLA_ATOL if run == "xla" else 2e-6)


# Widths whose B * T is a multiple of 16: the padded computation's own numbers move by round-off
# with B * T otherwise (`packing.ROW_MULTIPLE`), the packed encoder's do not (next test).
@pytest.mark.parametrize("lengths,width", [([512], 512), ([512, 300], 512), ([7], 16),
                                           ([16], 16), ([0], 16), ([0, 0], 8)])
def test_full_length_rows_batches_of_one_and_empty_batches(lengths, width):
    packed, padded = _encoders()
    batch = _batch(lengths, width, seed=2)
    # Packed, a row attends over its group's length (300), padded over the batch's (512): sums
    # of another length, rounded otherwise.
    _assert_packed_matches_padded(packed(batch), padded(batch), batch["input_mask"], atol=2e-6)


@pytest.mark.parametrize("run", ["eager", "graph"])
def test_a_tokens_numbers_do_not_depend_on_its_batch(run):
    """Bit for bit, without XLA: alone and unpadded, padded, or among other rows."""
    packed, _ = _encoders()
    encode = RUNS[run](packed)
    batch = _batch([7, 30, 12], 32, seed=4)
    together = encode(batch)["sequence_output"][0, :7]
    alone = encode({k: v[:1, :7] for k, v in batch.items()})["sequence_output"][0]
    padded = encode({k: v[:1, :16] for k, v in batch.items()})["sequence_output"][0, :7]
    np.testing.assert_array_equal(alone, together)
    np.testing.assert_array_equal(padded, together)


def _gradients(model: BertEncoder, batch: dict, jit_compile: bool) -> list:
    """Gradients of a loss on every output at real tokens, for every weight (IndexedSlices
    for the embedding tables that are gathered from)."""
    rng = np.random.default_rng(3)
    real = batch["input_mask"][..., None].astype(np.float32)
    token_weights = [rng.normal(size=real.shape[:2] + (32,)).astype(np.float32) * real
                     for _ in range(CONFIG.num_hidden_layers + 1)]
    pooled_weights = rng.normal(size=(len(real), 32)).astype(np.float32)

    def step(batch):
        with tf.GradientTape() as tape:
            outputs = model(batch, training=False)
            states = [outputs["embedding_output"]] + outputs["encoder_outputs"]
            loss = tf.add_n([tf.reduce_sum(w * tf.square(s))
                             for w, s in zip(token_weights, states)])
            loss += tf.reduce_sum(pooled_weights * outputs["pooled_output"])
        return tape.gradient(loss, model.trainable_variables)
    return tf.function(step, jit_compile=jit_compile)(batch)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_gradients_of_every_weight_as_padded(jit_compile):
    packed, padded = _encoders()
    batch = _mixed_batch()
    batch["input_mask"][3, 0] = 1  # the pooler reads position 0 of every row
    # The batch's last position real: the rows that round the token count up to ROW_MULTIPLE read
    # it, and must give it no gradient.
    batch["input_mask"][4, -1] = 1
    assert batch["input_mask"].sum() % packing.ROW_MULTIPLE
    _assert_gradients_as_padded(packed.trainable_variables, _gradients(packed, batch, jit_compile),
                                _gradients(padded, batch, jit_compile))


def _assert_gradients_as_padded(variables, packed_grads, padded_grads,
                                zero_allowed: str | None = None):
    """Each variable's packed gradient is the padded one's, of one kind, to round-off; none is
    zero but those whose path ends with `zero_allowed`."""
    for variable, packed_grad, padded_grad in zip(variables, packed_grads, padded_grads):
        # Of one kind: the global norm gradients are clipped to is not the dense one's for
        # IndexedSlices (position embeddings are dense in both).
        assert type(packed_grad) is type(padded_grad), variable.path
        packed_grad, padded_grad = (np.asarray(tf.convert_to_tensor(g))
                                    for g in (packed_grad, padded_grad))
        # Round-off of sums over the batch's tokens, taken in another order: relative to the
        # largest entry (an embedding row's gradient sums over every token that uses it), and
        # absolute for the keys' bias, whose gradient is zero but for round-off.
        scale = np.abs(padded_grad).max()
        assert scale > 0 or (zero_allowed and variable.path.endswith(zero_allowed)), \
            variable.path
        np.testing.assert_allclose(packed_grad, padded_grad, rtol=0, atol=2e-6 * scale + 1e-5,
                                   err_msg=variable.path)


def _count_dense_rows(monkeypatch) -> list[tuple[str, int]]:
    """The (name, row count) of each dense product from now on, the attention's projections
    taken together named by theirs joined with "+"."""
    rows = []
    dense_call, projections = keras.layers.Dense.call, SelfAttention._projections

    def counting_call(self, inputs, *args, **kwargs):
        rows.append((self.name, int(inputs.shape[0])))
        return dense_call(self, inputs, *args, **kwargs)

    def counting_projections(self, inputs, dense_layers):
        rows.append(("+".join(d.name for d in dense_layers), int(inputs.shape[0])))
        return projections(self, inputs, dense_layers)
    monkeypatch.setattr(keras.layers.Dense, "call", counting_call)
    monkeypatch.setattr(SelfAttention, "_projections", counting_projections)
    return rows


def test_dense_layers_see_the_real_tokens_only(monkeypatch):
    packed, _ = _encoders()
    batch = _batch([32, 5, 1, 0], 32)  # 38 real tokens of 128
    rows = _count_dense_rows(monkeypatch)
    packed(batch, training=False)
    # 38 real tokens, rounded up to a multiple of ROW_MULTIPLE (16): 48 rows.
    names = {"query+key+value", "attention_output", "intermediate", "output"}
    encoder_rows = [count for name, count in rows if name in names]
    assert len(encoder_rows) == 4 * CONFIG.num_hidden_layers
    assert set(encoder_rows) == {48}
    assert ("dense", 4) in rows  # the pooler: one row per example


@pytest.mark.parametrize("run", list(RUNS))
def test_outputs_at_some_positions_as_the_full_pass(run):
    """`pooled_output` and `sequence_output_at`, whose last layer computes the positions asked
    for only: the full pass's numbers there, zeros at padding positions (the empty row's, the
    row whose position 0 is padding), repeats allowed."""
    packed, _ = _encoders()
    batch = _mixed_batch()
    batch["input_mask"][4, 0] = 0
    positions = np.array([[0, 3, 15], [8, 1, 8], [0, 0, 5], [0, 2, 2], [0, 1, 14]], np.int32)
    full = RUNS[run](packed)(batch)
    at = tf.function(packed.sequence_output_at, jit_compile=run == "xla")
    if run == "eager":
        at = packed.sequence_output_at
    outputs_at = np.asarray(at(batch, positions, training=False))
    expected = np.take_along_axis(np.asarray(full["sequence_output"]), positions[..., None], 1)
    atol = XLA_ATOL if run == "xla" else 1e-6
    np.testing.assert_allclose(outputs_at, expected, atol=atol)
    real = np.take_along_axis(batch["input_mask"], positions, 1) != 0
    assert (real == [[1, 1, 1], [1, 1, 1], [1, 1, 0], [0, 0, 0], [0, 1, 1]]).all()
    assert not outputs_at[~real].any() and outputs_at[real].any(axis=-1).all()
    pooled = RUNS[run](lambda x, training: packed.pooled_output(x, training=training))(batch)
    np.testing.assert_allclose(pooled, full["pooled_output"], atol=atol)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_pooled_outputs_gradients_of_every_weight_as_padded(jit_compile):
    packed, padded = _encoders()
    batch = _mixed_batch()
    batch["input_mask"][3, 0] = 1
    pooled_weights = np.random.default_rng(6).normal(size=(5, 32)).astype(np.float32)

    def gradients(model, pooled_output):
        def step(batch):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(pooled_weights * tf.square(pooled_output(batch)))
            return tape.gradient(loss, model.trainable_variables)
        return tf.function(step, jit_compile=jit_compile)(batch)
    # The keys' bias adds one number to each query's scores: zero but for round-off.
    _assert_gradients_as_padded(
        packed.trainable_variables,
        gradients(packed, lambda b: packed.pooled_output(b, training=False)),
        gradients(padded, lambda b: padded(b, training=False)["pooled_output"]),
        zero_allowed="key/bias")


def test_the_last_layer_computes_the_pooled_position_only(monkeypatch):
    packed, _ = _encoders()
    batch = _batch([32, 5, 1, 0], 32)  # 38 real tokens of 128, rounded up to 48 rows
    rows = _count_dense_rows(monkeypatch)
    packed.pooled_output(batch, training=False)
    assert rows == [("query+key+value", 48), ("attention_output", 48), ("intermediate", 48),
                    ("output", 48),
                    ("key+value", 48), ("query", 4), ("attention_output", 4),
                    ("intermediate", 4), ("output", 4), ("dense", 4)]


def test_the_tagger_trains_on_its_labelled_pieces_only(monkeypatch):
    """In training (`labelled_pieces_only`, as with `run_ner.py --document_context`), the
    tagger's last layer computes the labelled pieces only; there its logits,
    and its loss and every gradient, are the full pass's (dropout off); elsewhere 0."""
    tagger = BertTokenClassifier(CONFIG, num_labels=5, labelled_pieces_only=True)
    batch = _batch([16, 9, 1, 12], 16, seed=3)  # 38 real tokens, rounded up to 48 rows
    rng = np.random.default_rng(3)
    labels = np.where(rng.random((4, 16)) < 0.5, rng.integers(0, 5, (4, 16)), -1)
    labels = np.where(batch["input_mask"] != 0, labels, -1).astype(np.int32)
    labels[1] = -1  # a row without a label
    labelled = labels >= 0
    most = int(labelled.sum(1).max())
    assert 0 < most < 16

    @tf.function(autograph=False)
    def step(inputs):
        with tf.GradientTape() as tape:
            logits = tagger(inputs, training=True)["logits"]
            loss = losses.token_cross_entropy(logits, labels)
        return logits, loss, tape.gradient(loss, tagger.trainable_variables)
    rows = _count_dense_rows(monkeypatch)
    tagger({**batch, "label_ids": labels}, training=True)
    assert rows == [("query+key+value", 48), ("attention_output", 48), ("intermediate", 48),
                    ("output", 48), ("key+value", 48), ("query", 4 * most),
                    ("attention_output", 4 * most), ("intermediate", 4 * most),
                    ("output", 4 * most)]
    monkeypatch.undo()  # (the count reads static shapes; the step below runs as a graph)
    logits, loss, grads = step({**batch, "label_ids": labels})
    full_logits, full_loss, full_grads = step(batch)  # no labels given: every piece
    np.testing.assert_allclose(logits.numpy()[labelled], full_logits.numpy()[labelled],
                               rtol=0, atol=1e-6)
    assert not logits.numpy()[~labelled].any()
    np.testing.assert_allclose(float(loss), float(full_loss), rtol=1e-6)
    used = [i for i, grad in enumerate(full_grads) if grad is not None]  # not the pooler's
    assert [i for i, grad in enumerate(grads) if grad is not None] == used
    _assert_gradients_as_padded([tagger.trainable_variables[i] for i in used],
                                [grads[i] for i in used], [full_grads[i] for i in used],
                                zero_allowed="key/bias")


def test_bucket_sizes_are_few_and_hold_every_token_count():
    for flat_size in (1, 5, 64, 4 * 128, 32 * 512):
        sizes = packing.bucket_sizes(flat_size)
        assert len(set(sizes)) <= packing.XLA_BUCKETS
        assert sizes == sorted(sizes) and sizes[-1] == flat_size


def test_under_xla_one_trace_and_only_the_bucket_row_counts(monkeypatch):
    """As on a GPU or TPU."""
    monkeypatch.setattr(packing, "buckets_on_this_device", lambda: True)
    packed, padded = _encoders()
    run, run_padded = RUNS["xla"](packed), RUNS["xla"](padded)
    for lengths in ([16, 16, 16, 16], [3, 0, 0, 0], [16, 9, 5, 0], [12, 12, 12, 1]):
        batch = _batch(lengths, 16, seed=sum(lengths))
        _assert_packed_matches_padded(run(batch), run_padded(batch), batch["input_mask"],
                                      atol=XLA_ATOL)
    assert run.experimental_get_tracing_count() == 1
    hlo = run.experimental_get_compiler_ir(batch)(stage="hlo")
    dot_rows = {int(rows) for rows in re.findall(r"= f32\[(\d+),\d+\]\{1,0\} dot\(", hlo)}
    # The packed rows of each bucket, and the pooler's 4 (one per example).
    assert dot_rows == set(packing.bucket_sizes(4 * 16)) | {4}
    assert hlo.count(" conditional(") == 1


def test_under_xla_a_gradient_tape_runs_every_row_without_the_switch(monkeypatch):
    """XLA would recompile the switch at every call under a tape (its branches keep
    intermediates of different shapes)."""
    monkeypatch.setattr(packing, "buckets_on_this_device", lambda: True)
    packed, _ = _encoders()
    batch = _batch([16, 3], 16)

    def forward(batch):
        return packed(batch, training=False)["sequence_output"]

    def gradients(batch):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(forward(batch))
        return tape.gradient(loss, packed.trainable_variables)

    def op_types(fn):
        graph = tf.function(fn, jit_compile=True).get_concrete_function(batch).graph
        return {op.type for op in graph.get_operations()}
    assert "Case" in op_types(forward)
    assert "Case" not in op_types(gradients)


def test_under_xla_on_a_cpu_the_forward_pass_runs_every_row_without_the_switch():
    assert not packing.buckets_on_this_device()  # the tests run on CPUs
    packed, padded = _encoders()
    run, run_padded = RUNS["xla"](packed), RUNS["xla"](padded)
    batch = _batch([16, 9, 5, 0], 16, seed=3)
    _assert_packed_matches_padded(run(batch), run_padded(batch), batch["input_mask"],
                                  atol=XLA_ATOL)
    hlo = run.experimental_get_compiler_ir(batch)(stage="hlo")
    dot_rows = {int(rows) for rows in re.findall(r"= f32\[(\d+),\d+\]\{1,0\} dot\(", hlo)}
    assert dot_rows == {4 * 16, 4}  # every position, and the pooler's one row per example
    assert " conditional(" not in hlo


def test_compiled_with_xla_is_true_only_under_jit_compile():
    seen = []

    def probe(x):
        seen.append(packing.compiled_with_xla())
        return x
    probe(tf.constant(1))
    tf.function(probe)(tf.constant(1))
    tf.function(probe, jit_compile=True)(tf.constant(1))
    assert seen == [False, False, True]


def test_packed_and_padded_have_the_same_weights_and_paths():
    packed, padded = _encoders()
    assert [w.path for w in packed.weights] == [w.path for w in padded.weights]
    assert packed.count_params() == padded.count_params()
    assert BertEncoder.from_config(packed.get_config()).packed
    assert not BertEncoder.from_config(padded.get_config()).packed


@pytest.mark.parametrize("lengths", [[5, 16, 0, 9, 16, 1, 12], [3], [0, 0], [16, 16, 16, 16, 2]])
def test_attention_groups_hold_every_row_once_sorted_by_extent(lengths):
    batch = _batch(lengths, 16, seed=5)
    batch["input_mask"][0] = [0, 1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]  # no prefix
    input_mask = batch["input_mask"]
    token_index = packing.pack(tf.constant(input_mask))
    layout = packing.attention_layout(tf.constant(input_mask), token_index)
    sizes, group_lengths = layout["group_sizes"].numpy(), layout["group_lengths"].numpy()
    assert len(sizes) == packing.ATTENTION_GROUPS
    # Equal counts; no group empty (fewer rows than groups: one slot each).
    assert sizes.sum() == max(len(lengths), packing.ATTENTION_GROUPS)
    assert sizes.min() >= 1 and sizes.max() - sizes.min() <= 1
    # Each packed token's flat position b * 16 + t, placed where attention places it; the rows
    # that round the count up go one past the groups' slots.
    slots = np.full(int((sizes * group_lengths).sum()) + 1, -1)
    slots[layout["slot_index"].numpy()] = token_index.numpy()
    assert slots[-1] == (input_mask.size if token_index.shape[0] > input_mask.sum() else -1)
    slot_mask = layout["slot_mask"].numpy()
    assert slot_mask.shape == (slots.size - 1,)
    np.testing.assert_array_equal(slot_mask, np.where(slots[:-1] >= 0, 0.0, -10000.0))
    extent = [int(np.flatnonzero(row).max()) + 1 if row.any() else 0 for row in input_mask]
    # Group by group, a [rows, length] block of whole batch rows at their own positions, in
    # order of extent, the group as long as its longest row.
    rows_seen, extents_seen, start = [], [], 0
    for size, length in zip(sizes, group_lengths):
        block = slots[start:start + size * length].reshape(size, length)
        start += size * length
        for block_row in block:
            real = np.flatnonzero(block_row >= 0)
            row = block_row[real[0]] // 16 if real.size else None
            if row is not None:
                np.testing.assert_array_equal(real, np.flatnonzero(input_mask[row]))
                np.testing.assert_array_equal(block_row[real], row * 16 + real)
            rows_seen.append(row)
            extents_seen.append(extent[row] if row is not None else 0)
        assert length == max(extents_seen[len(extents_seen) - size:] + [1])
    assert sorted(r for r in rows_seen if r is not None) == [b for b in range(len(lengths))
                                                              if extent[b]]
    assert extents_seen == sorted(extents_seen) and len(rows_seen) == sizes.sum()
