"""The private Keras and TensorFlow APIs the training code relies on, all in this one module.

Written against keras 3.10-3.15 and tensorflow 2.20-2.21 (the bounds of requirements.txt). Each
gives a behaviour no public API offers:

- The TF backend's optimizer step, `Optimizer._backend_update_step(grads, variables,
  learning_rate)`, sums the gradients across replicas (`_all_reduce_sum_gradients`) and then
  updates each variable (`_distributed_tf_update_step`, run through
  `tf.__internal__.distribute.interim.maybe_merge_call` with `_distribution_strategy`).
  `training.moment_optimizer` overrides it to clip the summed gradient between the two, as the
  original clips the gradient its update uses, and overrides `_distributed_tf_update_step(
  distribution, grads_and_vars, learning_rate)` to update small variables together (the others
  through Keras's, one `distribution.extended.update` each); `_get_variable_index` finds a
  variable's slots.
- `strategy.extended._in_multi_worker_mode()` tells a strategy that spans several workers.

`missing()` names whatever of these an installed version lacks; tests/training/test_keras_internals.py
fails with those names after an upgrade, rather than a training run failing (or an override
silently never being called) somewhere deep inside Keras.
"""
from __future__ import annotations

from typing import Callable

import keras
import tensorflow as tf

WRITTEN_FOR = "keras 3.10-3.15, tensorflow 2.20-2.21"
OPTIMIZER_METHODS = ("_backend_update_step", "_all_reduce_sum_gradients",
                     "_distributed_tf_update_step", "_get_variable_index")


def merge_call(update: Callable, strategy: tf.distribute.Strategy, *args):
    """Runs `update(strategy, *args)` in cross-replica context under `strategy` (Keras's way)."""
    return tf.__internal__.distribute.interim.maybe_merge_call(update, strategy, *args)


def is_multi_worker(strategy: tf.distribute.Strategy) -> bool:
    """Whether `strategy` spans several workers (MultiWorkerMirroredStrategy on a cluster)."""
    return strategy.extended._in_multi_worker_mode()  # pylint: disable=protected-access


def missing() -> list[str]:
    """The private names this module relies on that the installed Keras / TensorFlow lack."""
    gone = [f"keras.optimizers.Optimizer.{name}" for name in OPTIMIZER_METHODS
            if not callable(getattr(keras.optimizers.Optimizer, name, None))]
    if not hasattr(keras.optimizers.SGD(), "_distribution_strategy"):
        gone.append("keras.optimizers.Optimizer._distribution_strategy")
    interim = getattr(getattr(getattr(tf, "__internal__", None), "distribute", None), "interim",
                      None)
    if not callable(getattr(interim, "maybe_merge_call", None)):
        gone.append("tf.__internal__.distribute.interim.maybe_merge_call")
    if not callable(getattr(tf.distribute.get_strategy().extended, "_in_multi_worker_mode",
                            None)):
        gone.append("tf.distribute.StrategyExtended._in_multi_worker_mode")
    return gone
