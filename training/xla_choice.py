"""Whether to compile BERT with XLA (`jit_compile`), by compute dtype, device and call size.

Measured on a 2-core AVX-512 CPU without AMX (bench/RESULTS.md):
  * bfloat16: XLA is faster (1.4x on a BERT-Base forward pass): without AMX, oneDNN's bfloat16
    matmul (AVX512-BF16) runs at about 0.6x its float32 speed, and XLA computes bfloat16 dots in
    float32. A CPU with AMX turns this around: oneDNN's AMX kernels are several times faster than
    float32, and XLA would leave them out.
  * float32, large calls: the graph without XLA is 2-6% faster, because TensorFlow's oneDNN path
    fuses each dense layer's matmul, bias and GELU and XLA's CPU backend does not use those kernels.
  * float32, small calls: XLA is faster, because the fixed cost of each of the graph's ~40
    kernels per layer outweighs their work: 1.37x for L-2/H-128 at batch 1 x 128, 1.30x for
    L-4/H-256 at 1 x 128, 1.25x for L-4/H-512 at 1 x 128, 1.10x for L-4/H-256 at 8 x 128, 1.12x
    for L-2/H-128 at 32 x 128; against 0.98x for BERT-Base at 1 x 128 and 0.95x for L-4/H-512 at
    32 x 128. The work of a layer's matmuls, tokens x hidden_size^2, separates the two: XLA up to
    2^26 (8 x 128 tokens at H-256), not above.
On GPUs and TPUs XLA is the usual choice (not measured here).
"""
import functools

import tensorflow as tf

# tokens per call x hidden_size^2 up to which float32 on CPU is faster with XLA.
SMALL_FLOAT32_WORK = 2 ** 26


@functools.cache
def _cpu_has_amx() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return any(line.startswith("flags") and " amx_bf16" in line for line in f)
    except OSError:
        return False


def prefers_xla(compute_dtype: str, tokens_per_call: int | None = None,
                hidden_size: int | None = None) -> bool:
    """True where `jit_compile=True` makes BERT faster for `compute_dtype` on this machine.

    Args:
        compute_dtype: the dtype layers compute in ("float32", "bfloat16", "float16"), e.g.
            `keras.config.dtype_policy().compute_dtype`.
        tokens_per_call: batch size x sequence length of each call, where the caller knows it.
        hidden_size: the model's hidden size, with `tokens_per_call`. Without the two, float32 on
            CPU is taken to be large (no XLA).
    """
    if tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"):
        return True
    if compute_dtype == "bfloat16":
        return not _cpu_has_amx()
    if compute_dtype == "float32" and tokens_per_call and hidden_size:
        return tokens_per_call * hidden_size ** 2 <= SMALL_FLOAT32_WORK
    return False
