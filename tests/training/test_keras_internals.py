"""The private Keras / TensorFlow APIs of training/keras_internals.py are all there, and used."""
import keras
import numpy as np
import tensorflow as tf

from training import keras_internals
from training.optimizer import AdamWeightDecay


def test_every_private_name_relied_on_exists_in_the_installed_versions():
    gone = keras_internals.missing()
    assert not gone, (
        f"keras {keras.__version__} / tensorflow {tf.__version__} lack {', '.join(gone)}, which "
        f"training/keras_internals.py relies on (written for {keras_internals.WRITTEN_FOR}); "
        "adapt that module and training/moment_optimizer.py's _backend_update_step")


def test_keras_calls_the_overridden_update_step_which_clips_the_gradient():
    """If Keras stopped calling `_backend_update_step`, gradients would go unclipped."""
    variable = keras.Variable(np.zeros(2, np.float32))
    # A large epsilon makes the update depend on the gradient's scale, so clipping shows.
    optimizer = AdamWeightDecay(learning_rate=1.0, weight_decay_rate=0.0, epsilon=0.1,
                                clip_norm=1.0)
    calls = []
    original = AdamWeightDecay._backend_update_step

    def spy(self, grads, variables, learning_rate):
        calls.append([np.asarray(g) for g in grads])
        return original(self, grads, variables, learning_rate)

    AdamWeightDecay._backend_update_step = spy
    try:
        optimizer.apply([tf.constant([30.0, 40.0])], [variable])
    finally:
        AdamWeightDecay._backend_update_step = original
    assert len(calls) == 1
    # Clipped to norm 1: g = (0.6, 0.8); m = 0.1 g, v = 0.001 g^2, update = m / (sqrt(v) + eps)
    # (unclipped, the update would be about 2.86 instead of about 0.5).
    g = np.array([0.6, 0.8])
    expected = -(0.1 * g) / (np.sqrt(0.001 * g * g) + 0.1)
    np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-5)


def test_one_device_and_mirrored_strategies_are_single_worker():
    assert not keras_internals.is_multi_worker(tf.distribute.get_strategy())
    assert not keras_internals.is_multi_worker(tf.distribute.OneDeviceStrategy("/cpu:0"))
