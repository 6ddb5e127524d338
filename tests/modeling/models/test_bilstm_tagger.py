"""Tests of the feature-based tagger: shapes, masking, both directions, size and checkpoints."""
import keras
import numpy as np
import pytest

from modeling.checkpoints import CheckpointMismatchError, load_checkpoint
from modeling.checkpoints.formats import KERAS
from modeling.checkpoints.keras_format.checkpoint import save_keras_checkpoint
from modeling.models.bilstm_tagger import BiLstmTagger

_D, _U, _K = 12, 8, 5


def _inputs(seed=0, batch=3, width=7, lengths=(7, 4, 1)):
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(batch, width, _D)).astype(np.float32)
    word_mask = (np.arange(width)[None, :] < np.asarray(lengths)[:, None]).astype(np.int32)
    return {"features": features, "word_mask": word_mask}


def _tagger(seed=0, **kwargs):
    keras.utils.set_random_seed(seed)
    return BiLstmTagger(_D, _K, lstm_units=_U, **kwargs)


def test_logits_shape_and_dtype():
    logits = _tagger()(_inputs(), training=False)["logits"]
    assert logits.shape == (3, 7, _K)
    assert logits.dtype == "float32"


def test_size_is_two_bilstm_layers_and_a_classifier():
    tagger = _tagger()
    # Per LSTM direction: kernel [in, 4U], recurrent kernel [U, 4U], bias [4U].
    first = 2 * (_D * 4 * _U + _U * 4 * _U + 4 * _U)
    second = 2 * (2 * _U * 4 * _U + _U * 4 * _U + 4 * _U)
    classifier = _K * 2 * _U + _K
    assert tagger.count_params() == first + second + classifier == 3029
    shapes = {v.path: tuple(v.shape) for v in tagger.weights}
    assert shapes["token_classifier/output_weights"] == (_K, 2 * _U)
    assert shapes["bilstm_0/forward_lstm/lstm_cell/kernel"] == (_D, 4 * _U)
    assert shapes["bilstm_1/backward_lstm/lstm_cell/kernel"] == (2 * _U, 4 * _U)


def test_padding_does_not_reach_real_words():
    tagger = _tagger()
    inputs = _inputs()
    changed = {**inputs, "features": inputs["features"].copy()}
    changed["features"][1, 4:] = 100.0
    changed["features"][2, 1:] = -50.0
    before = tagger(inputs, training=False)["logits"].numpy()
    after = tagger(changed, training=False)["logits"].numpy()
    np.testing.assert_allclose(after[1, :4], before[1, :4], atol=1e-6)
    np.testing.assert_allclose(after[2, :1], before[2, :1], atol=1e-6)
    np.testing.assert_array_equal(after[0], before[0])


def test_each_word_sees_both_sides():
    tagger = _tagger()
    inputs = _inputs()
    before = tagger(inputs, training=False)["logits"].numpy()
    for position, other in ((0, 6), (6, 0)):
        changed = {**inputs, "features": inputs["features"].copy()}
        changed["features"][0, other] += 1.0
        after = tagger(changed, training=False)["logits"].numpy()
        assert np.max(np.abs(after[0, position] - before[0, position])) > 1e-6


def test_dropout_only_in_training():
    tagger = _tagger(dropout_rate=0.5)
    inputs = _inputs()
    first = tagger(inputs, training=False)["logits"].numpy()
    np.testing.assert_array_equal(first, tagger(inputs, training=False)["logits"].numpy())
    assert not np.allclose(first, tagger(inputs, training=True)["logits"].numpy())


def test_project_checkpoint_round_trip_is_strict(tmp_path):
    tagger = _tagger(seed=1)
    prefix = save_keras_checkpoint(tagger, str(tmp_path / "tagger"))
    restored = _tagger(seed=2)
    assert load_checkpoint(restored, prefix) == KERAS
    inputs = _inputs()
    np.testing.assert_array_equal(restored(inputs, training=False)["logits"],
                                  tagger(inputs, training=False)["logits"])
    wider = BiLstmTagger(_D, _K, lstm_units=2 * _U)
    with pytest.raises(CheckpointMismatchError):
        load_checkpoint(wider, prefix)
