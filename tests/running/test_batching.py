"""How examples become batches: every row once per epoch, replicas splitting the same shuffle,
prediction in order, batches cut to their own length (the same rows as fixed padding), grouped by
length on request, and host-gathered batches padded to their own width."""
import numpy as np
import pytest
import tensorflow as tf

from running.batching import (FIXED, XLA_LENGTHS, ArrayExamples, Batching, HostExamples,
                              sequence_lengths)


def _arrays(num_examples: int = 10) -> dict[str, np.ndarray]:
    rows = np.arange(num_examples, dtype=np.int32)
    return {"input_ids": np.stack([rows, rows + 100], axis=1), "label_ids": rows}


def _take(dataset: tf.data.Dataset, count: int) -> list[dict[str, np.ndarray]]:
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(count)]


def test_each_epoch_holds_every_row_once_and_rows_stay_whole():
    dataset = ArrayExamples(_arrays()).training_dataset_fn(5, seed=3)(
        tf.distribute.InputContext())
    batches = _take(dataset, 4)
    for epoch in (batches[:2], batches[2:]):
        labels = np.concatenate([batch["label_ids"] for batch in epoch])
        assert sorted(labels) == list(range(10))
    for batch in batches:
        np.testing.assert_array_equal(batch["input_ids"][:, 0], batch["label_ids"])
        np.testing.assert_array_equal(batch["input_ids"][:, 1], batch["label_ids"] + 100)
    epochs = [np.concatenate([b["label_ids"] for b in batches[i:i + 2]]) for i in (0, 2)]
    assert list(epochs[0]) != list(epochs[1]), "each epoch is shuffled anew"


def test_two_input_pipelines_split_the_global_batches_of_one():
    examples = ArrayExamples(_arrays(12))
    one = _take(examples.training_dataset_fn(4, seed=1)(tf.distribute.InputContext()), 3)
    halves = [_take(examples.training_dataset_fn(4, seed=1)(
        tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i,
                                   num_replicas_in_sync=2)), 3) for i in (0, 1)]
    for step in range(3):
        together = np.concatenate([halves[0][step]["label_ids"], halves[1][step]["label_ids"]])
        assert sorted(together) == sorted(one[step]["label_ids"])


def test_prediction_batches_every_row_in_order_and_selected_keys_only():
    examples = ArrayExamples(_arrays(7), keys=("input_ids",))
    batches = _take(examples.prediction_dataset(3), 10)
    assert [len(batch["input_ids"]) for batch in batches] == [3, 3, 1]
    assert all(set(batch) == {"input_ids"} for batch in batches)
    np.testing.assert_array_equal(np.concatenate([b["input_ids"] for b in batches])[:, 0],
                                  np.arange(7))


def test_host_examples_pad_each_batch_to_its_own_width():
    lengths = [1, 3, 2, 2]

    def batch_fn(rows):
        width = max(lengths[row] for row in rows)
        values = np.zeros((len(rows), width), np.float32)
        for i, row in enumerate(rows):
            values[i, :lengths[row]] = row + 1
        return {"values": values}

    examples = HostExamples(4, batch_fn, {"values": (np.float32, (None,))})
    batches = _take(examples.prediction_dataset(2), 5)
    assert [batch["values"].shape for batch in batches] == [(2, 3), (2, 2)]
    np.testing.assert_array_equal(batches[0]["values"], [[1, 0, 0], [2, 2, 2]])
    assert examples.prediction_dataset(2).element_spec["values"].shape.as_list() == [None, None]


def test_padded_lengths_are_multiples_up_to_max_length_and_few_under_xla():
    assert Batching(multiple=8).padded_lengths(40) == (8, 16, 24, 32, 40)
    assert Batching(multiple=8).padded_lengths(36) == (8, 16, 24, 32, 36)
    assert Batching(multiple=1).padded_lengths(3) == (1, 2, 3)
    assert FIXED.padded_lengths(128) == (128,)
    # Under XLA few shapes: XLA_LENGTHS steps of max_length / 8 rounded up to the multiple, and
    # below the first step, powers of two from 8 (rounded up to the multiple).
    assert Batching(multiple=8).padded_lengths(128, xla=True) == (8, *range(16, 129, 16))
    assert Batching(multiple=8).padded_lengths(384, xla=True) == (8, 16, 32,
                                                                  *range(48, 385, 48))
    assert Batching(multiple=8).padded_lengths(100, xla=True) == (8, 16, 32, 48, 64, 80, 96,
                                                                  100)
    assert Batching(multiple=8).padded_lengths(64, xla=True) == tuple(range(8, 65, 8))
    assert Batching(multiple=24).padded_lengths(512, xla=True) == (24, 48, *range(72, 505, 72),
                                                                   512)
    assert Batching(multiple=1).padded_lengths(512, xla=True) == (8, 16, 32,
                                                                  *range(64, 513, 64))
    assert len(Batching(multiple=1).padded_lengths(512, xla=True)) == XLA_LENGTHS + 3
    with pytest.raises(ValueError, match="at least 1"):
        Batching(multiple=0)


def test_sequence_lengths_reach_the_last_real_token_of_any_choice():
    mask = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]])
    np.testing.assert_array_equal(sequence_lengths(mask), [2, 4, 0])
    choices = np.array([[[1, 0, 0, 0], [1, 1, 1, 0]], [[1, 1, 0, 0], [1, 0, 0, 0]]])
    np.testing.assert_array_equal(sequence_lengths(choices), [3, 2])


def _varied(num_examples: int, width: int = 16, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.geometric(4 / width, num_examples), width)  # mostly short
    mask = (np.arange(width)[None] < lengths[:, None]).astype(np.int32)
    ids = rng.integers(1, 50, (num_examples, width)).astype(np.int32) * mask
    return {"input_ids": ids, "input_mask": mask, "label_ids": np.where(mask > 0, ids, -1),
            "row": np.arange(num_examples, dtype=np.int32)}


def test_training_batches_are_the_fixed_ones_cut_to_their_longest_row_rounded_up():
    arrays = _varied(40)
    fixed = _take(ArrayExamples(arrays).training_dataset_fn(8, seed=5)(
        tf.distribute.InputContext()), 10)
    cut = _take(ArrayExamples(arrays, batching=Batching(multiple=4)).training_dataset_fn(
        8, seed=5)(tf.distribute.InputContext()), 10)
    widths = []
    for full, short in zip(fixed, cut):
        np.testing.assert_array_equal(full["row"], short["row"])   # the same rows, same order
        longest = int(arrays["input_mask"][full["row"]].sum(-1).max())
        width = short["input_ids"].shape[1]
        assert width == min(16, -(-longest // 4) * 4)
        for key in ("input_ids", "input_mask", "label_ids"):  # every array shaped as the mask
            np.testing.assert_array_equal(short[key], full[key][:, :width])
            assert not full[key][:, width:].any() if key != "label_ids" else \
                (full[key][:, width:] == -1).all()
        widths.append(width)
    assert min(widths) < 16, "some batch is shorter than max_seq_length"


def test_group_by_length_sorts_each_group_of_the_same_shuffle_longest_first():
    arrays = _varied(64)
    plain = _take(ArrayExamples(arrays).training_dataset_fn(4, seed=2)(
        tf.distribute.InputContext()), 8)
    examples = ArrayExamples(arrays, batching=Batching(group_by_length=True))
    grouped = _take(examples.training_dataset_fn(4, seed=2)(tf.distribute.InputContext()), 8)
    # 64 rows in batches of 4: groups of 4 batches, so that there are four groups.
    for group in range(2):
        rows_plain = np.concatenate([b["row"] for b in plain[4 * group:4 * group + 4]])
        rows_grouped = np.concatenate([b["row"] for b in grouped[4 * group:4 * group + 4]])
        assert sorted(rows_plain) == sorted(rows_grouped)
        lengths = examples.lengths[rows_grouped]
        assert list(lengths) == sorted(lengths, reverse=True)
        np.testing.assert_array_equal(
            rows_grouped, rows_plain[np.argsort(-examples.lengths[rows_plain], kind="stable")])


def test_group_by_length_groups_each_epoch_on_its_own():
    """70 rows in batches of 4 (groups of 16 rows): each epoch's last group is what is left of
    that epoch, so the stream holds every row once per epoch, as the plain shuffle does."""
    arrays = _varied(70)
    examples = ArrayExamples(arrays, batching=Batching(group_by_length=True))
    batches = _take(examples.training_dataset_fn(4, seed=3)(tf.distribute.InputContext()), 35)
    rows = np.concatenate([b["row"] for b in batches])
    for epoch in range(2):
        assert sorted(rows[70 * epoch:70 * (epoch + 1)]) == list(range(70))
    tail = examples.lengths[rows[64:70]]     # epoch 1's last group, six rows
    assert list(tail) == sorted(tail, reverse=True)


def test_group_by_length_on_two_replicas_gives_one_devices_batches():
    arrays = _varied(64)
    examples = ArrayExamples(arrays, batching=Batching(group_by_length=True))
    one = _take(examples.training_dataset_fn(8, seed=4)(tf.distribute.InputContext()), 8)
    replicas = [_take(examples.training_dataset_fn(8, seed=4)(tf.distribute.InputContext(
        num_input_pipelines=2, input_pipeline_id=i, num_replicas_in_sync=2)), 8)
        for i in range(2)]
    for step, batch in enumerate(one):
        shares = [r[step]["row"] for r in replicas]
        assert sorted(np.concatenate(shares)) == sorted(batch["row"])
        for share in shares:       # each replica's rows of a group are sorted longest first
            assert list(examples.lengths[share]) == sorted(examples.lengths[share],
                                                           reverse=True)


def test_xla_batches_take_only_the_bucket_lengths():
    examples = ArrayExamples(_varied(200, width=64), batching=Batching(multiple=8))
    widths = {batch["input_ids"].shape[1] for batch in
              _take(examples.prediction_dataset(3, xla=True), 100)}
    assert widths <= set(Batching(multiple=8).padded_lengths(64, xla=True))
    assert len(widths) > 1


@pytest.mark.parametrize("batching, xla", [(FIXED, False), (Batching(), False),
                                           (Batching(multiple=4), False), (Batching(), True)])
def test_host_batches_are_the_pipelines_gathers(batching, xla):
    """Prediction cuts in-memory batches in numpy: exactly as the input pipeline's gather."""
    examples = ArrayExamples(_varied(40), batching=batching)
    gather = examples.gather_fn(xla)
    rng = np.random.default_rng(3)
    for size in (1, 5, 8):
        rows = rng.choice(40, size, replace=False)
        expected = {k: v.numpy() for k, v in gather(tf.constant(rows, tf.int64)).items()}
        actual = examples.host_batch(rows, xla)
        assert actual.keys() == expected.keys()
        for key in expected:
            np.testing.assert_array_equal(actual[key], expected[key], err_msg=key)
