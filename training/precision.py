"""The global Keras dtype policy from the dtype flag value.

Under the mixed policies layers compute in 16 bits while their variables, the optimizer's slots
and the updates stay in float32. float16 has a narrow exponent range, so its gradients need loss
scaling (`keras.optimizers.LossScaleOptimizer`); bfloat16 has float32's range and needs none.
"""
import keras

DTYPE_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


def needs_loss_scaling(name: str) -> bool:
    """Whether training under dtype policy `name` needs loss scaling ("mixed_float16" only)."""
    return name == "mixed_float16"


def set_dtype_policy(name: str) -> bool:
    """Sets the global Keras dtype policy; call it before building the model.

    Args:
        name: One of `DTYPE_POLICIES`.

    Returns:
        Whether the policy needs loss scaling (True for "mixed_float16" only).
    """
    if name not in DTYPE_POLICIES:
        raise ValueError(f"dtype policy {name!r} is not one of {DTYPE_POLICIES}")
    keras.mixed_precision.set_dtype_policy(name)
    return needs_loss_scaling(name)
