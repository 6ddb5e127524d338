"""The original BERT optimizer (AdamWeightDecay), a bias-corrected AdamW and LAMB, as Keras 3
optimizers.

All three clip the gradients to a global norm before the update, exclude variables whose path
matches one of `exclude_from_weight_decay` (`re.search`, as the original) from weight decay, and
keep two slots per variable (`adam_m`, `adam_v`) that `moment_slots()` returns by variable path,
so that a checkpoint writer can name them `<var>/adam_m` and `<var>/adam_v` as the original does
(the shared part: `training.moment_optimizer`). Each optimizer here is its update rule.
"""
from typing import Callable, Sequence

import keras
import tensorflow as tf

from training.moment_optimizer import MomentOptimizer
from training.schedule import WarmupLinearDecay

# The original `exclude_from_weight_decay` of run_pretraining.py / run_classifier.py.
EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")


@keras.saving.register_keras_serializable(package="bert")
class AdamWeightDecay(MomentOptimizer):
    """The original `AdamWeightDecayOptimizer` (google-research/bert `optimization.py`).

    Adam without bias correction, with weight decay added to the update (decoupled from the
    moments, Loshchilov & Hutter), per variable:
    `m = b1 m + (1 - b1) g`, `v = b2 v + (1 - b2) g^2`,
    `update = m / (sqrt(v) + epsilon) + weight_decay_rate * w` (decay only for variables no
    exclusion pattern matches), `w -= lr * update`; gradients clipped to global norm `clip_norm`
    first (None turns clipping off).
    """

    def __init__(self, learning_rate=0.001, weight_decay_rate: float = 0.01, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-6,
                 exclude_from_weight_decay: Sequence[str] | None = EXCLUDE_FROM_WEIGHT_DECAY,
                 clip_norm: float | None = 1.0, name: str = "AdamWeightDecay", **kwargs):
        super().__init__(learning_rate, weight_decay_rate, beta_1, beta_2, epsilon,
                         exclude_from_weight_decay, clip_norm, name, **kwargs)

    def _rule(self, index: int, dtype, learning_rate) -> tuple[Callable, tuple]:
        decay = self.weight_decay_rate if self._do_use_weight_decay(index) else 0.0
        return _adam_weight_decay_values, (tf.cast(learning_rate, dtype), self.beta_1,
                                           self.beta_2, self.epsilon, decay)

    def _elementwise(self, index: int) -> bool:
        return True


@keras.saving.register_keras_serializable(package="bert")
class BiasCorrectedAdamWeightDecay(MomentOptimizer):
    """Adam with bias correction and decoupled weight decay: Model Garden's `AdamWeightDecay`
    (tensorflow/models `official/nlp/optimization.py`, Keras's Adam with the decay added), with
    the original's clipping and exclusions.

    The original's optimizer leaves out Adam's bias correction, an oversight its author judged
    harmless under warm-up (google-research/bert#153); without it the first updates are several
    times larger, which makes fine-tuning on small sets unstable (Mosbach et al. 2021, Zhang et al.
    2021). Per variable, with `t` the 1-based update count (`iterations + 1`, saved and restored
    with the optimizer, so a resumed run corrects as an uninterrupted one):

        m = b1 m + (1 - b1) g,   v = b2 v + (1 - b2) g^2
        w -= lr * weight_decay_rate * w                  (the weights before this update; decay
                                                          only where no exclusion pattern matches)
        w -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + epsilon)

    Gradients are clipped to global norm `clip_norm` first, as the original's.

    Where epsilon goes: as Keras's and TensorFlow's Adam (the `ApplyAdam` kernel, Keras 3's
    `Adam.update_step`) put it, and so Model Garden's optimizer, and transformers' former `AdamW`
    too: added to `sqrt(v)` of the uncorrected `v` ("epsilon hat" in Kingma & Ba, section 2). In
    terms of the corrected moments that is `m_hat / (sqrt(v_hat) + epsilon / sqrt(1 - b2^t))`.
    `torch.optim.AdamW` adds epsilon to `sqrt(v_hat)` instead, `m_hat / (sqrt(v_hat) + epsilon)`:
    the two are the same update when PyTorch's epsilon at step t is `epsilon / sqrt(1 - b2^t)`
    (31.6 epsilon at t = 1, 3.2 at t = 100, 1.26 at t = 1000). With one epsilon on both sides an
    update here is `(sqrt(v_hat) + epsilon) / (sqrt(v_hat) + epsilon / sqrt(1 - b2^t))` of
    PyTorch's: at t = 1 and epsilon 1e-6, 0.3% smaller for a gradient of 1e-2, 23% smaller for
    1e-4. This is Model Garden's choice, kept: it is what a TensorFlow user of BERT gets.

    Where the others differ otherwise: PyTorch's default epsilon is 1e-8 (here and in Model Garden,
    1e-6); transformers' former `AdamW` decays the weights after the Adam step rather than before
    (the results differ by `lr * weight_decay_rate` times the Adam step).
    """

    def __init__(self, learning_rate=0.001, weight_decay_rate: float = 0.01, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-6,
                 exclude_from_weight_decay: Sequence[str] | None = EXCLUDE_FROM_WEIGHT_DECAY,
                 clip_norm: float | None = 1.0, name: str = "BiasCorrectedAdamWeightDecay",
                 **kwargs):
        super().__init__(learning_rate, weight_decay_rate, beta_1, beta_2, epsilon,
                         exclude_from_weight_decay, clip_norm, name, **kwargs)

    def _rule(self, index: int, dtype, learning_rate) -> tuple[Callable, tuple]:
        decay = self.weight_decay_rate if self._do_use_weight_decay(index) else 0.0
        return _bias_corrected_adam_weight_decay_values, (
            tf.cast(learning_rate, dtype), tf.cast(self.iterations + 1, dtype), self.beta_1,
            self.beta_2, self.epsilon, decay)

    def _elementwise(self, index: int) -> bool:
        return True


@keras.saving.register_keras_serializable(package="bert")
class Lamb(MomentOptimizer):
    """LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning", Algorithm 2).

    Adam moments with bias correction, `update = m_hat / (sqrt(v_hat) + epsilon)
    + weight_decay_rate * w` and a per-variable trust ratio `||w|| / ||update||` (1 when either
    norm is 0): `w -= lr * ratio * update`. Variables matching `exclude_from_weight_decay` get
    neither weight decay nor the trust ratio. The paper's scaling function phi is the identity.
    """

    def __init__(self, learning_rate=0.001, weight_decay_rate: float = 0.01, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-6,
                 exclude_from_weight_decay: Sequence[str] | None = EXCLUDE_FROM_WEIGHT_DECAY,
                 clip_norm: float | None = 1.0, name: str = "Lamb", **kwargs):
        super().__init__(learning_rate, weight_decay_rate, beta_1, beta_2, epsilon,
                         exclude_from_weight_decay, clip_norm, name, **kwargs)

    def _rule(self, index: int, dtype, learning_rate) -> tuple[Callable, tuple]:
        decay = self.weight_decay_rate if self._do_use_weight_decay(index) else 0.0
        return _lamb_values, (tf.cast(learning_rate, dtype), tf.cast(self.iterations + 1, dtype),
                              self.beta_1, self.beta_2, self.epsilon, decay,
                              not self._excluded[index])

    def _elementwise(self, index: int) -> bool:
        return self._excluded[index]  # no trust ratio


def _adam_weight_decay_values(variable, m, v, gradient, learning_rate, beta_1: float,
                              beta_2: float, epsilon: float, weight_decay_rate: float):
    """AdamWeightDecay's new (variable, m, v)."""
    next_m = beta_1 * m + (1.0 - beta_1) * gradient
    next_v = beta_2 * v + (1.0 - beta_2) * tf.square(gradient)
    update = next_m / (tf.sqrt(next_v) + epsilon)
    if weight_decay_rate:
        update += weight_decay_rate * variable
    return variable - learning_rate * update, next_m, next_v


def _bias_corrected_adam_weight_decay_values(variable, m, v, gradient, learning_rate, local_step,
                                             beta_1: float, beta_2: float, epsilon: float,
                                             weight_decay_rate: float):
    """BiasCorrectedAdamWeightDecay's new (variable, m, v); `local_step` is the update's 1-based
    count."""
    next_m = beta_1 * m + (1.0 - beta_1) * gradient
    next_v = beta_2 * v + (1.0 - beta_2) * tf.square(gradient)
    beta_1_power = tf.pow(tf.cast(beta_1, variable.dtype), local_step)
    beta_2_power = tf.pow(tf.cast(beta_2, variable.dtype), local_step)
    alpha = learning_rate * tf.sqrt(1.0 - beta_2_power) / (1.0 - beta_1_power)
    decayed = variable
    if weight_decay_rate:
        decayed = variable - learning_rate * weight_decay_rate * variable
    return decayed - next_m * alpha / (tf.sqrt(next_v) + epsilon), next_m, next_v


def _lamb_values(variable, m, v, gradient, learning_rate, local_step, beta_1: float,
                 beta_2: float, epsilon: float, weight_decay_rate: float, trust_ratio: bool):
    """LAMB's new (variable, m, v); `local_step` is the update's 1-based count."""
    next_m = beta_1 * m + (1.0 - beta_1) * gradient
    next_v = beta_2 * v + (1.0 - beta_2) * tf.square(gradient)
    m_hat = next_m / (1.0 - tf.pow(tf.cast(beta_1, variable.dtype), local_step))
    v_hat = next_v / (1.0 - tf.pow(tf.cast(beta_2, variable.dtype), local_step))
    update = m_hat / (tf.sqrt(v_hat) + epsilon)
    if weight_decay_rate:
        update += weight_decay_rate * variable
    ratio = tf.constant(1.0, variable.dtype)
    if trust_ratio:
        w_norm = tf.norm(variable)
        update_norm = tf.norm(update)
        both_positive = tf.logical_and(w_norm > 0.0, update_norm > 0.0)
        ratio = tf.where(both_positive, w_norm / update_norm, 1.0)
    return variable - learning_rate * ratio * update, next_m, next_v


_OPTIMIZER_CLASSES = {"adamw": AdamWeightDecay,
                      "adamw_bias_corrected": BiasCorrectedAdamWeightDecay, "lamb": Lamb}
OPTIMIZER_TYPES = tuple(_OPTIMIZER_CLASSES)


def create_optimizer(init_lr: float, num_train_steps: int, num_warmup_steps: int,
                     optimizer_type: str = "adamw", weight_decay_rate: float = 0.01,
                     epsilon: float = 1e-6, clip_norm: float | None = 1.0,
                     exclude_from_weight_decay: Sequence[str] = EXCLUDE_FROM_WEIGHT_DECAY,
                     use_loss_scale: bool = False,
                     learning_rate_step_offset: int = 0,
                     decay_from_peak: bool = False) -> keras.optimizers.Optimizer:
    """The original `optimization.create_optimizer`: schedule plus optimizer.

    Args:
        init_lr: Peak learning rate.
        num_train_steps: Steps over which the rate decays linearly to 0.
        num_warmup_steps: Steps of linear warm-up from 0 (0 for none).
        optimizer_type: "adamw" (the original AdamWeightDecay, no bias correction),
            "adamw_bias_corrected" (`BiasCorrectedAdamWeightDecay`) or "lamb".
        weight_decay_rate: Decoupled weight-decay rate.
        epsilon: Added to `sqrt(v)` of the second moment (the original's 1e-6).
        clip_norm: Global-norm clipping threshold, None for no clipping.
        exclude_from_weight_decay: Patterns (`re.search` on the variable path) of variables that
            get no weight decay (and, for LAMB, no trust ratio).
        use_loss_scale: Wrap in a dynamic `keras.optimizers.LossScaleOptimizer` (float16).
        learning_rate_step_offset: 1 to give update t the rate of step t + 1, as the original's
            runs did (`WarmupLinearDecay`'s `step_offset`).
        decay_from_peak: Decay from `init_lr` at the end of warm-up (transformers' linear
            schedule) instead of from step 0 (the original's).

    Returns:
        The optimizer, wrapped for loss scaling when `use_loss_scale`.
    """
    if optimizer_type not in OPTIMIZER_TYPES:
        raise ValueError(f"optimizer_type={optimizer_type!r} is not one of {OPTIMIZER_TYPES}")
    schedule = WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps,
                                 learning_rate_step_offset, decay_from_peak)
    optimizer = _OPTIMIZER_CLASSES[optimizer_type](
        learning_rate=schedule, weight_decay_rate=weight_decay_rate, epsilon=epsilon,
        clip_norm=clip_norm,
        exclude_from_weight_decay=exclude_from_weight_decay)
    if use_loss_scale:
        return keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def optimizer_moments(optimizer: keras.optimizers.Optimizer
                      ) -> dict[str, tuple[keras.Variable, keras.Variable]]:
    """`moment_slots()` of one of this module's optimizers, loss-scaled or not."""
    return getattr(optimizer, "inner_optimizer", optimizer).moment_slots()
