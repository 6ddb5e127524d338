"""Whether to compile BERT with XLA (`jit_compile`), by compute dtype and device.

Measured on a 2-core AVX-512 CPU without AMX (bench/RESULTS.md): in float32 the graph without XLA is
faster, because TensorFlow's oneDNN path fuses each dense layer's matmul, bias and GELU and XLA's CPU
backend does not use those kernels; in bfloat16 XLA is faster (1.4x on a BERT-Base forward pass),
because without AMX oneDNN's bfloat16 matmul (AVX512-BF16) runs at about 0.6x its float32 speed and
XLA computes bfloat16 dots in float32. A CPU with AMX turns the bfloat16 case around: oneDNN's AMX
kernels are several times faster than float32 and XLA would leave them out. On GPUs and TPUs XLA is
the usual choice (not measured here).
"""
import functools

import tensorflow as tf


@functools.cache
def _cpu_has_amx() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return any(line.startswith("flags") and " amx_bf16" in line for line in f)
    except OSError:
        return False


def prefers_xla(compute_dtype: str) -> bool:
    """True where `jit_compile=True` makes BERT faster for `compute_dtype` on this machine.

    Args:
        compute_dtype: the dtype layers compute in ("float32", "bfloat16", "float16"), e.g.
            `keras.config.dtype_policy().compute_dtype`.
    """
    if tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"):
        return True
    return compute_dtype == "bfloat16" and not _cpu_has_amx()
