"""The losses of `modeling/losses.py` against NumPy on small arrays."""
import numpy as np
import pytest
import tensorflow as tf

from modeling import losses


def _nll(logits, labels):
    """-log softmax(logits)[label] in float64, with the log-sum-exp shift."""
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return -np.take_along_axis(log_probs, np.asarray(labels)[..., None], axis=-1)[..., 0]


def test_per_example_cross_entropy_hand_computed():
    # Uniform over 4 classes: log 4. Logits [ln 3, 0, 0, 0]: p = 3 / 6 for class 0, 1 / 6 else.
    logits = tf.constant([[0.0, 0.0, 0.0, 0.0], [np.log(3.0), 0.0, 0.0, 0.0],
                          [np.log(3.0), 0.0, 0.0, 0.0]])
    result = losses.per_example_cross_entropy(logits, tf.constant([2, 0, 3])).numpy()
    np.testing.assert_allclose(result, [np.log(4.0), np.log(2.0), np.log(6.0)], rtol=1e-6)


def test_per_example_cross_entropy_any_leading_shape_and_large_logits():
    rng = np.random.default_rng(0)
    logits = rng.normal(0.0, 3.0, size=(2, 3, 5)).astype(np.float32)
    labels = rng.integers(0, 5, size=(2, 3))
    logits[0, 0, 0] += 1000.0  # exp would overflow: only a shifted formula stays finite
    labels[0, 0] = 1
    result = losses.per_example_cross_entropy(tf.constant(logits), tf.constant(labels)).numpy()
    assert result.shape == (2, 3)
    np.testing.assert_allclose(result, _nll(logits, labels), rtol=1e-5, atol=1e-5)


def test_masked_lm_loss_weights_and_padding_slots():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2, 3, 7)).astype(np.float32)
    ids = np.array([[1, 4, 0], [6, 0, 0]])
    weights = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]], np.float32)
    nll = _nll(logits, ids)
    expected = (nll[0, 0] + nll[0, 1] + nll[1, 0]) / (3.0 + 1e-5)
    loss = losses.masked_lm_loss(tf.constant(logits), tf.constant(ids), tf.constant(weights))
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-6)
    # Whatever a padding slot holds changes nothing.
    noisy = logits.copy()
    noisy[0, 2] = 100.0 * rng.normal(size=7)
    noisy[1, 1:] = -50.0
    noisy_ids = ids.copy()
    noisy_ids[1, 1:] = 5
    np.testing.assert_allclose(
        losses.masked_lm_loss(tf.constant(noisy), tf.constant(noisy_ids),
                              tf.constant(weights)).numpy(), expected, rtol=1e-6)


def test_masked_lm_loss_fractional_weights_and_global_weight_sum():
    logits = np.log(np.array([[[1.0, 3.0], [1.0, 1.0]]], np.float32))
    ids = np.array([[1, 0]])
    weights = np.array([[0.5, 2.0]], np.float32)
    # nll = -log(3/4) and log 2; (0.5 * -log(3/4) + 2 * log 2) / (2.5 + 1e-5).
    numerator = 0.5 * -np.log(0.75) + 2.0 * np.log(2.0)
    np.testing.assert_allclose(losses.masked_lm_loss(logits, ids, weights).numpy(),
                               numerator / (2.5 + 1e-5), rtol=1e-6)
    np.testing.assert_allclose(losses.masked_lm_loss(logits, ids, weights, tf.constant(10.0)),
                               numerator / (10.0 + 1e-5), rtol=1e-6)


def test_masked_lm_loss_of_no_predictions_is_zero():
    loss = losses.masked_lm_loss(tf.ones([1, 2, 3]), tf.zeros([1, 2], tf.int32), tf.zeros([1, 2]))
    assert loss.numpy() == 0.0


def test_replica_losses_with_global_normalisers_sum_to_the_full_batch_loss():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(4, 3, 5)).astype(np.float32)
    ids = rng.integers(0, 5, size=(4, 3))
    weights = (rng.random(size=(4, 3)) < 0.7).astype(np.float32)
    weights[0, 0] = 1.0
    full = losses.masked_lm_loss(logits, ids, weights).numpy()
    total = weights.sum()
    halves = [losses.masked_lm_loss(logits[part], ids[part], weights[part], total).numpy()
              for part in (slice(0, 2), slice(2, 4))]
    np.testing.assert_allclose(sum(halves), full, rtol=1e-5)
    labels = rng.integers(0, 5, size=4)
    full = losses.mean_cross_entropy(logits[:, 0], labels).numpy()
    halves = [losses.mean_cross_entropy(logits[part, 0], labels[part], 4).numpy()
              for part in (slice(0, 1), slice(1, 4))]
    np.testing.assert_allclose(sum(halves), full, rtol=1e-5)


def test_mean_cross_entropy():
    logits = np.array([[2.0, 0.0], [0.0, 0.0], [-1.0, 1.0]], np.float32)
    labels = np.array([0, 1, 0])
    nll = [-np.log(np.exp(2) / (np.exp(2) + 1)), np.log(2.0), -np.log(np.exp(-1) /
                                                                     (np.exp(-1) + np.exp(1)))]
    np.testing.assert_allclose(losses.mean_cross_entropy(logits, labels).numpy(), np.mean(nll),
                               rtol=1e-6)
    np.testing.assert_allclose(losses.mean_cross_entropy(logits, labels, 6).numpy(),
                               np.sum(nll) / 6, rtol=1e-6)


@pytest.mark.parametrize("shape", [(3,), (3, 1)])
def test_mean_squared_error(shape):
    predictions = np.array([1.0, 2.5, -1.0], np.float32).reshape(shape)
    labels = np.array([0.0, 3.0, 1.0])
    # Squared errors 1, 0.25, 4.
    np.testing.assert_allclose(losses.mean_squared_error(predictions, labels).numpy(), 5.25 / 3,
                               rtol=1e-6)
    np.testing.assert_allclose(losses.mean_squared_error(predictions, labels, 7).numpy(),
                               5.25 / 7, rtol=1e-6)


def test_span_loss_with_global_batch_size():
    rng = np.random.default_rng(3)
    start, end = rng.normal(size=(2, 2, 6)).astype(np.float32)
    starts, ends = np.array([1, 0]), np.array([4, 0])
    expected = (_nll(start, starts).sum() + _nll(end, ends).sum()) / 2
    np.testing.assert_allclose(losses.span_loss(start, end, starts, ends).numpy(), expected / 2,
                               rtol=1e-6)
    np.testing.assert_allclose(losses.span_loss(start, end, starts, ends, 8).numpy(),
                               expected / 8, rtol=1e-6)


def test_token_cross_entropy_ignores_label_minus_one():
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(2, 4, 3)).astype(np.float32)
    labels = np.array([[0, -1, 2, -1], [1, -1, -1, -1]])
    nll = _nll(logits, np.maximum(labels, 0))
    expected = (nll[0, 0] + nll[0, 2] + nll[1, 0]) / 3
    np.testing.assert_allclose(losses.token_cross_entropy(logits, labels).numpy(), expected,
                               rtol=1e-6)
    np.testing.assert_allclose(losses.token_cross_entropy(logits, labels, 12).numpy(),
                               expected * 3 / 12, rtol=1e-6)
    ignored = logits.copy()
    ignored[labels < 0] = 1000.0
    np.testing.assert_allclose(losses.token_cross_entropy(ignored, labels).numpy(), expected,
                               rtol=1e-6)


def test_token_cross_entropy_of_no_labels_is_zero():
    loss = losses.token_cross_entropy(tf.ones([1, 3, 2]), tf.constant([[-1, -1, -1]]))
    assert loss.numpy() == 0.0
