"""What the optimizers of `training.optimizer` share: Adam's two moment slots per variable, the
gradients clipped after they are summed across replicas, weight-decay exclusion by variable path,
and where each update runs.

A subclass gives each variable's update rule: a function of (variable, m, v, gradient, ...) that
returns the new (variable, m, v). Large variables take it as one XLA computation in place; small
ones whose rule acts element by element (biases, LayerNorm) take it together, over their
concatenation.

Clipping acts on the gradient the update uses: under a `tf.distribute` strategy the per-replica
gradients are summed across replicas first, then clipped, so N replicas that each pass a share of
the gradient take the same step as one device given the whole gradient.
"""
import functools
import re
from typing import Any, Callable, Sequence

import keras
import tensorflow as tf

from training import keras_internals

# Keras clipping and weight-decay options that would act a second time on top of this file's own.
_CONFLICTING_KERAS_OPTIONS = ("weight_decay", "clipnorm", "clipvalue", "global_clipnorm")


class MomentOptimizer(keras.optimizers.Optimizer):
    """Adam-style optimizers' shared part: two moment slots per variable, clipping of the summed
    gradient, weight-decay exclusion. A subclass gives each variable's update rule (`_rule`)."""

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
        if not epsilon > 0:
            raise ValueError(f"epsilon must be positive, got epsilon={epsilon}")
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
        scale = None
        if self.clip_norm is not None:
            scale = _clip_scale(grads, self.clip_norm)
        keras_internals.merge_call(self._distributed_tf_update_step, self._distribution_strategy,
                                   list(zip(grads, variables)), learning_rate, scale)

    def _rule(self, index: int, dtype, learning_rate) -> tuple[Callable, tuple]:
        """Variable `index`'s update: `values_fn` and its arguments after the gradient."""
        raise NotImplementedError

    def _elementwise(self, index: int) -> bool:
        """Whether variable `index`'s update acts element by element (no norm of the variable)."""
        raise NotImplementedError

    def update_step(self, gradient, variable, learning_rate, scale=None):
        index = self._get_variable_index(variable)
        values_fn, args = self._rule(index, variable.dtype, learning_rate)
        self._update(values_fn, variable, index, gradient, scale, *args)

    def _update(self, values_fn, variable, index: int, gradient, scale, *args) -> None:
        """Sets (variable, m, v) to `values_fn(variable, m, v, gradient * scale, *args)`
        (`scale` None: the gradient as it is)."""
        m, v = self._adam_m[index], self._adam_v[index]
        gradient, scale = _dense(gradient, scale, variable.dtype)
        if variable.shape.num_elements() >= _XLA_UPDATE_MIN_ELEMENTS:
            slots = _on_device_of(variable, m, v)
            if slots is not None:
                _in_place(values_fn)(variable, *slots, gradient, scale, *args)
                return
        values = values_fn(*(tf.convert_to_tensor(t) for t in (variable, m, v)),
                           _scaled(gradient, scale), *args)
        for target, value in zip((variable, m, v), values):
            self.assign(target, value)

    def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate,
                                    scale=None):
        # Small variables whose updates act element by element with the same arguments and whose
        # gradients are dense (biases, LayerNorm parameters: two thirds of BERT's variables) take
        # one update over their concatenation, the same arithmetic for every element, in a few
        # dozen ops of the step's graph instead of a few dozen per variable; the others, one
        # update each.
        groups, singles = {}, []
        for gradient, variable in grads_and_vars:
            index = self._get_variable_index(variable)
            sparse = isinstance(distribution.experimental_local_results(gradient)[0],
                                tf.IndexedSlices)
            if variable.shape.num_elements() < _XLA_UPDATE_MIN_ELEMENTS and \
                    self._elementwise(index) and not sparse:
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
                                             args=(members, learning_rate, scale), group=False)
            else:
                singles += [(gradient, variable) for gradient, variable, _ in members]
        for gradient, variable in singles:
            distribution.extended.update(
                variable, lambda var, grad, *args: self.update_step(grad, var, *args),
                args=(gradient, learning_rate, scale), group=False)

    def _group_targets(self, anchor: tf.Variable, members) -> list[list[tf.Variable]] | None:
        """Each member's (variable, m, v) on `anchor`'s device; None where one has no copy there."""
        targets = [_on_device_of(anchor, variable, self._adam_m[index], self._adam_v[index])
                   for _, variable, index in members]
        return None if None in targets else targets

    def _update_group(self, anchor: tf.Variable, members, learning_rate, scale) -> None:
        """`_update` of every member [(gradient, variable, index)] at once, on `anchor`'s device."""
        targets = self._group_targets(anchor, members)
        values_fn, args = self._rule(members[0][2], anchor.dtype, learning_rate)
        gradients = [tf.cast(tf.convert_to_tensor(gradient), anchor.dtype)
                     for gradient, _, _ in members]
        columns = [*zip(*targets)]  # variables, m, v
        inputs = [tf.concat([_flat(t) for t in column], 0) for column in (*columns, gradients)]
        inputs[-1] = _scaled(inputs[-1], _cast(scale, anchor.dtype))
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


# A large variable's update is one XLA computation that overwrites the variable and its two slots
# in place (XLA aliases each with its new value), in three loop fusions (m, v, then the variable)
# and no temporary of the variable's size. Written as separate TensorFlow ops, an update leaves a
# dozen such temporaries, which the graph's executor keeps alive across variables, updating them
# side by side: at BERT-Base size the update phase raised a training step's peak memory by 2.2 GB
# that way (bench/README.md, "Training memory"). The arithmetic is the same, op for op, but for
# XLA contracting a multiply and an add into one rounding (float32 round-off). Small variables
# (biases, LayerNorm) take the plain ops: their temporaries do not matter, and compiling each of
# their shapes would cost more than it saves.
_XLA_UPDATE_MIN_ELEMENTS = 1 << 16


@functools.cache
def _in_place(values_fn: Callable) -> Callable:
    """`values_fn` as one XLA computation that assigns its (variable, m, v) to the three, the
    gradient multiplied by `scale` (None: as it is) in the same pass; one per update rule,
    compiled per shape on first use. Without AutoGraph: the rules branch on Python values only,
    and converting them took 0.1 s of a training run's first trace (MiniLM, 1.44 against 1.32 s)."""
    def update(variable, m, v, gradient, scale, *args):
        values = values_fn(variable, m, v, _scaled(gradient, scale), *args)
        for target, value in zip((variable, m, v), values):
            target.assign(value)
    return tf.function(update, jit_compile=True, autograph=False)


def _clip_scale(grads: list, clip_norm: float) -> tf.Tensor:
    """The factor `tf.clip_by_global_norm(grads, clip_norm)` multiplies `grads` by (NaN or
    infinite where their norm is), for the update to apply (`_dense`)."""
    norm = tf.linalg.global_norm(grads)
    scale = clip_norm * tf.minimum(1.0 / norm, tf.constant(1.0, norm.dtype) / clip_norm)
    return scale + (norm - norm)


def _dense(gradient, scale: tf.Tensor | None, dtype) -> tuple[tf.Tensor, tf.Tensor | None]:
    """The gradient as a dense tensor of `dtype`, and the clipping scale its update applies.

    A dense gradient takes the scale in its update, in the same pass over its memory as the rest
    (the same product as `tf.clip_by_global_norm`'s, one multiplication an element). A sparse
    (embedding) gradient's values take it first, each row as often as it occurs, and are then
    summed into every row of the dense gradient: the clipping and arithmetic of the original.
    """
    if isinstance(gradient, tf.IndexedSlices):
        values = _scaled(gradient.values, _cast(scale, gradient.values.dtype))
        dense = tf.convert_to_tensor(tf.IndexedSlices(values, gradient.indices,
                                                      gradient.dense_shape))
        return tf.cast(dense, dtype), None
    return tf.cast(gradient, dtype), _cast(scale, dtype)


def _cast(scale: tf.Tensor | None, dtype) -> tf.Tensor | None:
    """`scale` in `dtype`; None stays None."""
    return None if scale is None else tf.cast(scale, dtype)


def _scaled(gradient: tf.Tensor, scale: tf.Tensor | None) -> tf.Tensor:
    """gradient * scale; the gradient itself where `scale` is None."""
    return gradient if scale is None else gradient * scale


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
