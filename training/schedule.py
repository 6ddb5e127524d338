"""The learning-rate schedule of the original `optimization.create_optimizer`.

Linear decay from `init_lr` at step 0 to 0 at `num_train_steps` (the original's
`tf.train.polynomial_decay` with power 1.0, end 0.0 and no cycling), replaced by a linear warm-up
`init_lr * step / num_warmup_steps` while `step < num_warmup_steps`. The decay is not shifted by
the warm-up: at the end of warm-up the rate is `init_lr * (1 - num_warmup_steps / num_train_steps)`,
not `init_lr`, exactly as in the original.

With `decay_from_peak`, the decay starts at the end of warm-up instead, from `init_lr` to 0 at
`num_train_steps`, as transformers' `get_linear_schedule_with_warmup`: 1 / (1 - warm-up fraction)
times the original's rate after warm-up (1.11x with the usual 10%), the same rates during it.

The arithmetic follows the original's graph as TensorFlow runs it: its constant folding turns
`step / num_train_steps` into `step * float32(1 / num_train_steps)` and
`init_lr * (step / num_warmup_steps)` into `step * float32(init_lr * float32(1 / warmup))`,
which changes the last bit of some rates. Written out as products, eager and `tf.function` rates
equal the original's bit for bit (XLA's fused multiply-add may differ by one rounding).
"""
from typing import Any

import keras
import numpy as np
import tensorflow as tf


@keras.saving.register_keras_serializable(package="bert")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Warm-up then linear decay to zero, computed in float32 as the original computes it.

    Args:
        init_lr: Peak learning rate, `--learning_rate` of the original scripts.
        num_train_steps: Step at which the rate reaches 0 and stays there; positive.
        num_warmup_steps: Length of the linear warm-up; 0 turns warm-up off.
        step_offset: Added to the step: 1 gives update t the rate of step t + 1, as the original
            code's runs on CPU did (its step increment and its update are not ordered; the
            fixture `optimizer/as_run`). 0, the default, follows the schedule as written.
        decay_from_peak: Start the decay at the end of warm-up, from `init_lr` (transformers'
            linear schedule); False, the default, is the original's decay from step 0.
    """

    def __init__(self, init_lr: float, num_train_steps: int, num_warmup_steps: int = 0,
                 step_offset: int = 0, decay_from_peak: bool = False):
        if init_lr < 0:
            raise ValueError(f"init_lr must be >= 0, got init_lr={init_lr}")
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be a positive integer, "
                             f"got num_train_steps={num_train_steps}")
        if num_warmup_steps < 0:
            raise ValueError(f"num_warmup_steps must be >= 0, "
                             f"got num_warmup_steps={num_warmup_steps}")
        self.init_lr = float(init_lr)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.step_offset = int(step_offset)
        self.decay_from_peak = bool(decay_from_peak)

    def __call__(self, step: tf.Tensor) -> tf.Tensor:
        """The learning rate for the update of global step `step` (0 for the first update).

        Args:
            step: Integer or float tensor of any shape, usually the optimizer's iteration count
                before the update.

        Returns:
            float32 tensor, the shape of `step`.
        """
        init_lr = np.float32(self.init_lr)
        step = tf.cast(step, tf.float32) + np.float32(self.step_offset)
        decay_steps = np.float32(self.num_train_steps)
        if self.decay_from_peak:
            # init_lr * (decay_steps - step) / (decay_steps - warm-up) after warm-up, as
            # transformers computes it (in float32 here), 0 from decay_steps on.
            left = (decay_steps - tf.minimum(step, decay_steps)) * (
                np.float32(1.0) / max(decay_steps - np.float32(self.num_warmup_steps), 1.0))
        else:
            # polynomial_decay, power 1, end 0: init_lr * (1 - min(step, decay_steps) / decay_steps).
            decay_fraction = tf.minimum(step, decay_steps) * (np.float32(1.0) / decay_steps)
            # XLA may fuse `1 - fraction` into one rounding, below 0 once step >= decay_steps.
            left = tf.maximum(1.0 - decay_fraction, 0.0)
        learning_rate = left * init_lr
        if not self.num_warmup_steps:
            return learning_rate
        warmup_steps = np.float32(self.num_warmup_steps)
        warmup_learning_rate = step * (init_lr * (np.float32(1.0) / warmup_steps))
        return tf.where(step < warmup_steps, warmup_learning_rate, learning_rate)

    def get_config(self) -> dict[str, Any]:
        return {
            "init_lr": self.init_lr,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "step_offset": self.step_offset,
            "decay_from_peak": self.decay_from_peak,
        }
