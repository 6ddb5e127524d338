"""The original BERT optimizer (AdamWeightDecay), a bias-corrected AdamW and LAMB, as Keras 3
optimizers.

All three clip the gradients to a global norm before the update, exclude variables whose path
matches one of `exclude_from_weight_decay` (`re.search`, as the original) from weight decay, and
keep two slots per variable (`adam_m`, `adam_v`) that `moment_slots()` returns by variable path,
so that a checkpoint writer can name them `<var>/adam_m` and `<var>/adam_v` as the original does.

Clipping acts on the gradient the update uses: under a `tf.distribute` strategy the per-replica
gradients are summed across replicas first, then clipped, so N replicas that each pass a share of
the gradient take the same step as one device given the whole gradient.
"""
import re
from typing import Any, Callable, Sequence

import keras
import tensorflow as tf

from training import keras_internals
from training.schedule import WarmupLinearDecay

# The original `exclude_from_weight_decay` of run_pretraining.py / run_classifier.py.
EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
# Keras clipping and weight-decay options that would act a second time on top of this file's own.
_CONFLICTING_KERAS_OPTIONS = ("weight_decay", "clipnorm", "clipvalue", "global_clipnorm")


class _MomentOptimizer(keras.optimizers.Optimizer):
    """What the three optimizers share: moments, clipping, weight-decay exclusion."""

    def __init__(self, learning_rate, weight_decay_rate: float, beta_1: float, beta_2: float,
                 epsilon: float, exclude_from_weight_decay: Sequence[str] | None,
                 clip_norm: float | None, name: str, **kwargs):
        for option in _CONFLICTING_KERAS_OPTIONS:
            if kwargs.pop(option, None) is not None:
                raise ValueError(f"{option} is not supported by {type(self).__name__}; use "
                                 "weight_decay_rate and clip_norm instead")
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        if clip_norm is not None and clip_norm <= 0:
            raise ValueError(f"clip_norm must be positive or None, got clip_norm={clip_norm}")
        self.weight_decay_rate = float(weight_decay_rate)
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        self.exclude_from_weight_decay = tuple(exclude_from_weight_decay or ())
        self.clip_norm = None if clip_norm is None else float(clip_norm)

    def build(self, var_list: list[keras.Variable]) -> None:
        if self.built:
            return
        super().build(var_list)
        self._adam_m, self._adam_v = self.add_optimizer_variables(var_list, ["adam_m", "adam_v"])
        self._paths = [variable.path for variable in var_list]
        self._excluded = [
            any(re.search(pattern, path) for pattern in self.exclude_from_weight_decay)
            for path in self._paths]

    def _do_use_weight_decay(self, index: int) -> bool:
        """The original rule: decay unless the rate is 0 or a pattern matches the variable name."""
        return bool(self.weight_decay_rate) and not self._excluded[index]

    def moment_slots(self) -> dict[str, tuple[keras.Variable, keras.Variable]]:
        """{variable path: (adam_m, adam_v)}: the slot variables themselves, to read or assign."""
        if not self.built:
            raise ValueError(f"{self.name} has no slots before it is built; call build(variables) "
                             "or apply gradients first")
        return {path: (m, v) for path, m, v in zip(self._paths, self._adam_m, self._adam_v)}

    def weight_decay_applied(self) -> dict[str, bool]:
        """{variable path: whether the update adds weight decay}."""
        if not self.built:
            raise ValueError(f"{self.name} is not built yet; call build(variables) first")
        return {path: self._do_use_weight_decay(i) for i, path in enumerate(self._paths)}

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        # Keras's TF backend sums the gradients across replicas here and then updates each
        # variable; clipping goes between the two, on the summed gradient (private API:
        # training/keras_internals.py).
        variables = [v.value if isinstance(v, keras.Variable) else v for v in trainable_variables]
        grads_and_vars = self._all_reduce_sum_gradients(list(zip(grads, variables)))
        grads = [grad for grad, _ in grads_and_vars]
        if self.clip_norm is not None:
            grads, _ = tf.clip_by_global_norm(grads, self.clip_norm)
        keras_internals.merge_call(self._distributed_tf_update_step, self._distribution_strategy,
                                   list(zip(grads, variables)), learning_rate)

    def _rule(self, index: int, dtype, learning_rate) -> tuple[Callable, tuple]:
        """Variable `index`'s update: `values_fn` and its arguments after the gradient."""
        raise NotImplementedError

    def _elementwise(self, index: int) -> bool:
        """Whether variable `index`'s update acts element by element (no norm of the variable)."""
        raise NotImplementedError

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        values_fn, args = self._rule(index, variable.dtype, learning_rate)
        self._update(values_fn, variable, index, gradient, *args)

    def _update(self, values_fn, variable, index: int, gradient, *args) -> None:
        """Sets (variable, m, v) to `values_fn(variable, m, v, gradient, *args)`."""
        m, v = self._adam_m[index], self._adam_v[index]
        # Sparse (embedding) gradients update every row, as in the original's dense arithmetic.
        gradient = tf.cast(tf.convert_to_tensor(gradient), variable.dtype)
        if variable.shape.num_elements() >= _XLA_UPDATE_MIN_ELEMENTS:
            slots = _on_device_of(variable, m, v)
            if slots is not None:
                _XLA_IN_PLACE[values_fn](variable, *slots, gradient, *args)
                return
        values = values_fn(*(tf.convert_to_tensor(t) for t in (variable, m, v)), gradient, *args)
        for target, value in zip((variable, m, v), values):
            self.assign(target, value)

    def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate):
        # Small variables whose updates act element by element with the same arguments (biases,
        # LayerNorm parameters: two thirds of BERT's variables) take one update over their
        # concatenation, the same arithmetic for every element, in a few dozen ops of the
        # step's graph instead of a few dozen per variable; the others, one update each.
        groups, singles = {}, []
        for gradient, variable in grads_and_vars:
            index = self._get_variable_index(variable)
            if variable.shape.num_elements() < _XLA_UPDATE_MIN_ELEMENTS and \
                    self._elementwise(index):
                key = variable.dtype, self._do_use_weight_decay(index)
                groups.setdefault(key, []).append((gradient, variable, index))
            else:
                singles.append((gradient, variable))
        for members in groups.values():
            anchor = members[0][1]
            if len(members) > 1 and all(
                    self._group_targets(copy, members) is not None
                    for copy in distribution.experimental_local_results(anchor)):
                distribution.extended.update(anchor, self._update_group,
                                             args=(members, learning_rate), group=False)
            else:
                singles += [(gradient, variable) for gradient, variable, _ in members]
        super()._distributed_tf_update_step(distribution, singles, learning_rate)

    def _group_targets(self, anchor: tf.Variable, members) -> list[list[tf.Variable]] | None:
        """Each member's (variable, m, v) on `anchor`'s device; None where one has no copy there."""
        targets = [_on_device_of(anchor, variable, self._adam_m[index], self._adam_v[index])
                   for _, variable, index in members]
        return None if None in targets else targets

    def _update_group(self, anchor: tf.Variable, members, learning_rate) -> None:
        """`_update` of every member [(gradient, variable, index)] at once, on `anchor`'s device."""
        targets = self._group_targets(anchor, members)
        values_fn, args = self._rule(members[0][2], anchor.dtype, learning_rate)
        gradients = [tf.cast(tf.convert_to_tensor(gradient), anchor.dtype)
                     for gradient, _, _ in members]
        columns = [*zip(*targets)]  # variables, m, v
        inputs = [tf.concat([_flat(t) for t in column], 0) for column in (*columns, gradients)]
        sizes = [variable.shape.num_elements() for variable in columns[0]]
        for column, value in zip(columns, values_fn(*inputs, *args)):
            for target, piece in zip(column, tf.split(value, sizes)):
                target.assign(piece if target.shape.rank == 1 else
                              tf.reshape(piece, target.shape))

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        for option in _CONFLICTING_KERAS_OPTIONS:
            config.pop(option)
        config.update({
            "weight_decay_rate": self.weight_decay_rate,
            "beta_1": self.beta_1,
            "beta_2": self.beta_2,
            "epsilon": self.epsilon,
            "exclude_from_weight_decay": list(self.exclude_from_weight_decay),
            "clip_norm": self.clip_norm,
        })
        return config


@keras.saving.register_keras_serializable(package="bert")
class AdamWeightDecay(_MomentOptimizer):
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
class BiasCorrectedAdamWeightDecay(_MomentOptimizer):
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
class Lamb(_MomentOptimizer):
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


# A large variable's update is one XLA computation that overwrites the variable and its two slots
# in place (XLA aliases each with its new value), a single pass over their memory. Written as
# separate TensorFlow ops, an update leaves a dozen temporaries of the variable's size, which the
# graph's executor keeps alive across variables, updating them side by side: at BERT-Base size
# the update phase raised a training step's peak memory by 2.2 GB that way (bench/README.md, "Training
# memory"). The arithmetic is the same, op for op. Small variables (biases, LayerNorm) take the
# plain ops: their temporaries do not matter, and compiling each of their shapes would cost more
# than it saves.
_XLA_UPDATE_MIN_ELEMENTS = 1 << 16


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


def _in_place(values_fn):
    """`values_fn` as one XLA computation that assigns its (variable, m, v) to the three."""
    def update(variable, m, v, *args):
        for target, value in zip((variable, m, v), values_fn(variable, m, v, *args)):
            target.assign(value)
    return tf.function(update, jit_compile=True)


_XLA_IN_PLACE = {fn: _in_place(fn) for fn in (_adam_weight_decay_values,
                                               _bias_corrected_adam_weight_decay_values,
                                               _lamb_values)}


def _on_device_of(variable: tf.Variable, *others: keras.Variable | tf.Variable
                  ) -> list[tf.Variable] | None:
    """Each of `others` (slots, variables) as its tf.Variable on `variable`'s device (under a
    strategy's update, `variable` is one replica's copy and the others hold one per replica); None
    where one has none there (a strategy that updates distributed variables whole), and the update
    takes the plain ops."""
    found = []
    for other in others:
        other = other.value if isinstance(other, keras.Variable) else other
        copies = tf.distribute.get_strategy().experimental_local_results(other)
        found += [copy for copy in copies if copy.device == variable.device][:1]
    return found if len(found) == len(others) else None


def _flat(tensor) -> tf.Tensor:
    """`tensor` read as a vector."""
    tensor = tf.convert_to_tensor(tensor)
    return tensor if tensor.shape.rank == 1 else tf.reshape(tensor, [-1])


_OPTIMIZER_CLASSES = {"adamw": AdamWeightDecay,
                      "adamw_bias_corrected": BiasCorrectedAdamWeightDecay, "lamb": Lamb}
OPTIMIZER_TYPES = tuple(_OPTIMIZER_CLASSES)


def create_optimizer(init_lr: float, num_train_steps: int, num_warmup_steps: int,
                     optimizer_type: str = "adamw", weight_decay_rate: float = 0.01,
                     clip_norm: float | None = 1.0,
                     exclude_from_weight_decay: Sequence[str] = EXCLUDE_FROM_WEIGHT_DECAY,
                     use_loss_scale: bool = False,
                     learning_rate_step_offset: int = 0) -> keras.optimizers.Optimizer:
    """The original `optimization.create_optimizer`: schedule plus optimizer.

    Args:
        init_lr: Peak learning rate.
        num_train_steps: Steps over which the rate decays linearly to 0.
        num_warmup_steps: Steps of linear warm-up from 0 (0 for none).
        optimizer_type: "adamw" (the original AdamWeightDecay, no bias correction),
            "adamw_bias_corrected" (`BiasCorrectedAdamWeightDecay`) or "lamb".
        weight_decay_rate: Decoupled weight-decay rate.
        clip_norm: Global-norm clipping threshold, None for no clipping.
        exclude_from_weight_decay: Patterns (`re.search` on the variable path) of variables that
            get no weight decay (and, for LAMB, no trust ratio).
        use_loss_scale: Wrap in a dynamic `keras.optimizers.LossScaleOptimizer` (float16).
        learning_rate_step_offset: 1 to give update t the rate of step t + 1, as the original's
            runs did (`WarmupLinearDecay`'s `step_offset`).

    Returns:
        The optimizer, wrapped for loss scaling when `use_loss_scale`.
    """
    if optimizer_type not in OPTIMIZER_TYPES:
        raise ValueError(f"optimizer_type={optimizer_type!r} is not one of {OPTIMIZER_TYPES}")
    schedule = WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps,
                                 learning_rate_step_offset)
    optimizer = _OPTIMIZER_CLASSES[optimizer_type](
        learning_rate=schedule, weight_decay_rate=weight_decay_rate, clip_norm=clip_norm,
        exclude_from_weight_decay=exclude_from_weight_decay)
    if use_loss_scale:
        return keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def optimizer_moments(optimizer: keras.optimizers.Optimizer
                      ) -> dict[str, tuple[keras.Variable, keras.Variable]]:
    """`moment_slots()` of one of this module's optimizers, loss-scaled or not."""
    return getattr(optimizer, "inner_optimizer", optimizer).moment_slots()
