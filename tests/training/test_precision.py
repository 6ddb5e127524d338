"""Tests of training/precision.py: the global dtype policy and whether loss scaling is needed."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from training.optimizer import create_optimizer
from training.precision import DTYPE_POLICIES, set_dtype_policy


@pytest.fixture(autouse=True)
def restore_policy():
    """The policy is process-global: put float32 back for the other tests."""
    yield
    keras.mixed_precision.set_dtype_policy("float32")


@pytest.mark.parametrize("name,compute_dtype,needs_loss_scale", [
    ("float32", "float32", False),
    ("mixed_bfloat16", "bfloat16", False),
    ("mixed_float16", "float16", True),
])
def test_policy_sets_compute_dtype_and_keeps_float32_variables(name, compute_dtype,
                                                               needs_loss_scale):
    assert set_dtype_policy(name) is needs_loss_scale
    assert keras.config.dtype_policy().name == name
    layer = keras.layers.Dense(3)
    outputs = layer(np.ones((2, 4), np.float32))
    assert outputs.dtype == compute_dtype
    assert layer.kernel.dtype == "float32"


@pytest.mark.parametrize("name", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_training_step_updates_float32_variables(name):
    use_loss_scale = set_dtype_policy(name)
    layer = keras.layers.Dense(2)
    layer.build((None, 3))
    before = layer.kernel.numpy().copy()
    optimizer = create_optimizer(1e-2, 10, 0, use_loss_scale=use_loss_scale)
    # Small enough that loss-scaled float16 gradients stay finite and the first step applies.
    inputs = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3) * 0.01)

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.cast(layer(inputs), tf.float32) ** 2)
            scaled_loss = optimizer.scale_loss(loss)
        grads = tape.gradient(scaled_loss, layer.trainable_variables)
        optimizer.apply(grads, layer.trainable_variables)
        return grads

    grads = train_step()
    assert all(g.dtype == tf.float32 for g in grads)
    assert layer.kernel.dtype == "float32"
    assert not np.allclose(layer.kernel.numpy(), before)
    assert np.all(np.isfinite(layer.kernel.numpy()))


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match=r"'fp16'.*" + r".*".join(DTYPE_POLICIES)):
        set_dtype_policy("fp16")
