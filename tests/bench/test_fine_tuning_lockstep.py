"""Fine-tuning here and in the real transformers, in lockstep (bench/fine_tuning/lockstep.py): with
the random draws taken out, this project's bias-corrected fine-tuning run is transformers' run."""
import numpy as np
import pytest

from bench.fine_tuning import lockstep
from data.classifier import glue_tasks
from tests.support.dependencies import require

NUM_EXAMPLES, SEQ_LENGTH, BATCH, STEPS = 12, 16, 4, 6
WARMUP = 0.34  # two steps of warm-up, then decay over four


def test_batch_rows_take_a_fresh_permutation_every_epoch():
    rows = lockstep.batch_rows(10, 4, 7, seed=3)
    assert rows.shape == (7, 4)
    flat = rows.reshape(-1)
    for epoch in (flat[:10], flat[10:20]):
        assert sorted(epoch) == list(range(10))
    assert len(set(flat[20:])) == 8
    assert not np.array_equal(flat[:10], flat[10:20])


@pytest.fixture(scope="module")
def tiny_hf_classifier(tmp_path_factory):
    transformers = require("transformers")
    torch = require("torch")
    folder = tmp_path_factory.mktemp("hf")
    config = transformers.BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, hidden_act="gelu")
    torch.manual_seed(0)
    transformers.BertForSequenceClassification(config).save_pretrained(folder)
    return str(folder)


def _train_arrays(rng):
    lengths = rng.integers(5, SEQ_LENGTH + 1, NUM_EXAMPLES)
    mask = (np.arange(SEQ_LENGTH)[None] < lengths[:, None]).astype(np.int32)
    ids = rng.integers(5, 99, (NUM_EXAMPLES, SEQ_LENGTH)).astype(np.int32) * mask
    segments = ((np.arange(SEQ_LENGTH)[None] >= lengths[:, None] // 2) * mask).astype(np.int32)
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments,
            "label_ids": (ids[:, 1] > 50).astype(np.int32)}


@pytest.mark.slow
def test_training_steps_are_transformers_steps_once_epsilon_sits_where_pytorch_puts_it(
        tiny_hf_classifier, tmp_path):
    """Two epochs of batches padded to different lengths, two steps of warm-up, a rate at which
    Adam's updates are large: with PyTorch's epsilon at step t matched to this project's
    (`epsilon / sqrt(1 - b2^t)`), every step's loss agrees to float32 round-off, and the logits
    after the last update to 1e-4. With PyTorch's epsilon as PyTorch places it, the losses part
    by more than ten times as much: the comparison sees a difference in the formula as small as
    where epsilon goes."""
    rng = np.random.default_rng(0)
    train = _train_arrays(rng)
    head = (rng.normal(0.0, 0.02, (2, 32)).astype(np.float32), np.zeros(2, np.float32))
    rows = lockstep.batch_rows(NUM_EXAMPLES, BATCH, STEPS, seed=1)
    model, ours = lockstep.train_ours(
        tiny_hf_classifier, glue_tasks.get_task("rte"), head, train, rows, 3e-3, str(tmp_path),
        WARMUP)
    assert len(ours) == STEPS and ours[-1] < ours[0]  # it trained
    our_logits = lockstep.logits_ours(model, train)
    gaps = {}
    for matched in (True, False):
        theirs_model, theirs = lockstep.train_theirs(
            tiny_hf_classifier, head, train, rows, 3e-3, matched, WARMUP)
        gaps[matched] = (np.abs(ours - theirs).max(), np.abs(
            our_logits - lockstep.logits_theirs(theirs_model, train)).max())
    assert gaps[True][0] < 5e-6 and gaps[True][1] < 1e-4, gaps
    assert gaps[False][0] > 10 * gaps[True][0], gaps
