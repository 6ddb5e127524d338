"""`BertEmbeddings`: word + segment + position embeddings, then LayerNorm, computed by hand."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.layers.embeddings import BertEmbeddings
from tests.support.layer_reference import randomize

V, H, TYPES, POSITIONS = 12, 4, 3, 8


def _embeddings(dropout_rate=0.0, seed=0, **kwargs):
    layer = BertEmbeddings(V, H, TYPES, POSITIONS, dropout_rate, 0.02, **kwargs)
    layer.build(None)
    randomize(layer, seed, scale=1.0)
    return layer


def test_hand_computed_sum_and_layer_norm():
    layer = BertEmbeddings(4, 2, 2, 4, 0.0, 0.02)
    layer.build(None)
    layer.word_embeddings.assign([[0.0, 0.0], [1.0, 3.0], [2.0, 0.0], [0.0, 5.0]])
    layer.token_type_embeddings.assign([[0.0, 0.0], [1.0, -1.0]])
    layer.position_embeddings.assign([[0.0, 1.0], [2.0, 0.0], [9.0, 9.0], [9.0, 9.0]])
    layer.layer_norm.gamma.assign([2.0, 1.0])
    layer.layer_norm.beta.assign([0.5, -0.5])
    output = layer(np.array([[1, 3]], np.int32), np.array([[0, 1]], np.int32)).numpy()
    # Position 0: [1, 3] + [0, 0] + [0, 1] = [1, 4] -> normalised [-1, 1] -> [-1.5, 0.5].
    # Position 1: [0, 5] + [1, -1] + [2, 0] = [3, 4] -> normalised [-1, 1] -> [-1.5, 0.5].
    np.testing.assert_allclose(output, [[[-1.5, 0.5], [-1.5, 0.5]]], atol=1e-6)
    output = layer(np.array([[2]], np.int32), np.array([[1]], np.int32)).numpy()
    # [2, 0] + [1, -1] + [0, 1] = [3, 0] -> [1, -1] -> [2.5, -1.5].
    np.testing.assert_allclose(output, [[[2.5, -1.5]]], atol=1e-6)


def test_matches_numpy_with_random_tables():
    layer = _embeddings(seed=1)
    rng = np.random.default_rng(2)
    ids = rng.integers(0, V, size=(3, 6)).astype(np.int32)
    segments = rng.integers(0, TYPES, size=(3, 6)).astype(np.int32)
    words, types, positions, gamma, beta = layer.get_weights()
    summed = words[ids] + types[segments] + positions[None, :6]
    centered = summed - summed.mean(-1, keepdims=True)
    expected = centered / np.sqrt((centered ** 2).mean(-1, keepdims=True) + 1e-12) * gamma + beta
    output = layer(ids, segments, training=False).numpy()
    assert output.shape == (3, 6, H)
    np.testing.assert_allclose(output, expected, atol=1e-5)


def test_position_and_segment_change_the_embedding_of_the_same_token():
    layer = _embeddings(seed=3)
    ids = np.full((1, 3), 5, np.int32)
    output = layer(ids, np.array([[0, 0, 1]], np.int32)).numpy()[0]
    assert np.abs(output[0] - output[1]).max() > 1e-3  # positions 0 and 1
    # Token at position 2 under segment 1 differs from the same token at position 2 under 0.
    other = layer(ids, np.zeros((1, 3), np.int32)).numpy()[0]
    np.testing.assert_array_equal(other[:2], output[:2])
    assert np.abs(other[2] - output[2]).max() > 1e-3


def test_a_token_depends_only_on_its_own_id_segment_and_position():
    layer = _embeddings(seed=4)
    ids = np.array([[3, 7, 1, 2]], np.int32)
    segments = np.array([[0, 1, 1, 2]], np.int32)
    full = layer(ids, segments).numpy()
    prefix = layer(ids[:, :2], segments[:, :2]).numpy()
    np.testing.assert_allclose(full[:, :2], prefix, atol=1e-6)
    changed = ids.copy()
    changed[0, 3] = 9
    np.testing.assert_allclose(layer(changed, segments).numpy()[:, :3], full[:, :3], atol=1e-6)


def test_dropout_in_training_only():
    keras.utils.set_random_seed(0)
    layer = _embeddings(dropout_rate=0.5, seed=5)
    ids = np.arange(8, dtype=np.int32).reshape(2, 4)
    segments = np.zeros_like(ids)
    inference = layer(ids, segments, training=False).numpy()
    np.testing.assert_array_equal(inference, layer(ids, segments).numpy())
    dropped = layer(ids, segments, training=True).numpy()
    kept = dropped != 0
    assert 0 < kept.sum() < kept.size
    np.testing.assert_allclose(dropped[kept], 2 * inference[kept], rtol=1e-6)


def test_tables_and_their_names():
    layer = BertEmbeddings(V, H, TYPES, POSITIONS, 0.1, 0.02, name="embeddings")
    layer.build(None)
    assert {w.path: tuple(w.shape) for w in layer.weights} == {
        "embeddings/word_embeddings": (V, H), "embeddings/token_type_embeddings": (TYPES, H),
        "embeddings/position_embeddings": (POSITIONS, H), "embeddings/layer_norm/gamma": (H,),
        "embeddings/layer_norm/beta": (H,)}
    # Truncated normal at two standard deviations.
    assert np.abs(layer.word_embeddings.numpy()).max() <= 2 * 0.02


def test_longer_than_the_position_table_is_an_error():
    layer = _embeddings(seed=6)
    ids = np.zeros((1, POSITIONS + 1), np.int32)
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
        layer(ids, ids)


def test_per_layer_mixed_bfloat16_policy():
    layer = _embeddings(dropout_rate=0.1, seed=7, dtype="mixed_bfloat16")
    ids = np.array([[1, 2, 3]], np.int32)
    reference = _embeddings(dropout_rate=0.1, seed=7)
    for training in (False, True):
        assert layer(ids, 0 * ids, training=training).dtype == tf.bfloat16
    assert layer.word_embeddings.dtype == "float32"
    output = tf.cast(layer(ids, 0 * ids), tf.float32).numpy()
    np.testing.assert_allclose(output, reference(ids, 0 * ids).numpy(), atol=2 ** -8 * 4)
