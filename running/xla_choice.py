"""Whether to compile BERT with XLA (`jit_compile`), by compute dtype, device and call size.

Measured on a 2-core Intel Xeon with AVX-512 and AVX512-BF16, without AMX
(bench/results/model_speed/RESULTS.md):
  * bfloat16 forward passes: XLA is faster (1.4x on BERT-Base): there oneDNN's bfloat16 matmul
    (AVX512-BF16) runs at about 0.6x its float32 speed (160 against 285-310 GFLOP/s), and XLA
    computes bfloat16 dots in float32. A CPU with AMX turns this around: oneDNN's AMX kernels
    are several times faster than float32, and XLA would leave them out.
  * On a 2-core AMD EPYC (Zen 4) with AVX512-BF16, no AMX (bench/README.md, bfloat16 on CPUs
    without AMX), oneDNN's bfloat16 matmul runs at 1.7-2x its float32 speed (78-86 against
    46-47 GFLOP/s, the machine busy), and BERT-Base's bfloat16 forward pass without XLA is
    2.8x as fast as with it at 32 x 128 and 3.1x at 1 x 128: like AMX, AMD's AVX512-BF16 gets
    no XLA.
  * bfloat16 training steps: no XLA. XLA's float32 dots take float32 copies of their bfloat16
    operands, and the forward pass's copies are the ones the backward pass's dots reuse: the
    step keeps its activations in float32 beside their bfloat16 originals, and a BERT-Base step
    at 32 x 128 peaks at 10.3 GB against 5.1 GB without XLA (transformers: 5.5 GB), for 1.17x
    its speed (both slower than float32 on such a CPU).
  * float32, large calls: the graph without XLA is 2-6% faster, because TensorFlow's oneDNN path
    fuses each dense layer's matmul, bias and GELU and XLA's CPU backend does not use those kernels.
  * float32, small calls: XLA is faster, because the fixed cost of each of the graph's ~40
    kernels per layer outweighs their work: 1.37x for L-2/H-128 at batch 1 x 128, 1.30x for
    L-4/H-256 at 1 x 128, 1.25x for L-4/H-512 at 1 x 128, 1.10x for L-4/H-256 at 8 x 128, 1.12x
    for L-2/H-128 at 32 x 128; against 0.98x for BERT-Base at 1 x 128 and 0.95x for L-4/H-512 at
    32 x 128. The work of a layer's matmuls, tokens x hidden_size^2, separates the two: XLA up to
    2^26 (8 x 128 tokens at H-256), not above.
Measured on a 2-core AVX2 CPU without AVX-512 (bench/README.md, fine-tuning speed):
  * float32 forward passes (prediction): XLA is faster at every size measured, 1.02x for
    BERT-Base at 32 x 128, 1.12x for MiniLM (L-6/H-384) at 64 x 88, 1.15x for BERT-Base at
    8 x 384 and 1.51x for MiniLM at 64 x 384 (SQuAD's prediction batches), where attention's
    [B, N, T, T] products and softmax, which XLA fuses, weigh most.
  * float32 training: XLA is slower (MiniLM at 32 x 88: 3.47 against 2.67 s a step).
XLA compiles each shape a prediction meets before running it, which takes seconds on 2 CPU
cores even for a model of 2 layers of width 32. Where the prediction's whole work, tokens x
hidden_size^2 x layers, is below 2^33 (about 2 x 10^11 FLOPs: 2-4 s of the graph's own time on
2 cores), the graph finishes before XLA's at most 1.5x speed-up could repay a single compilation:
such predictions (a few dozen texts, or a tiny model) run as a graph. The tests' tiny models
predict about 3x faster in CPU time so (tests/tasks/test_text_tasks.py: 252 against 85 s).
On GPUs and TPUs XLA is the usual choice (not measured here).
"""
import functools

import tensorflow as tf

# tokens per call x hidden_size^2 up to which float32 on CPU is faster with XLA.
SMALL_FLOAT32_WORK = 2 ** 26
# tokens x hidden_size^2 x layers of a whole prediction below which compiling does not pay on CPU.
UNPAID_COMPILE_WORK = 2 ** 33


@functools.cache
def _cpu_info() -> tuple[str, frozenset[str]]:
    """The first CPU's vendor ("GenuineIntel", "AuthenticAMD"; "" if unknown) and ISA flags."""
    vendor = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    vendor = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    return vendor, frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return vendor, frozenset()


def _cpu_flags() -> frozenset[str]:
    return _cpu_info()[1]


def _cpu_has_fast_bfloat16_matmuls() -> bool:
    """Whether oneDNN's bfloat16 matmuls outrun float32 ones on this CPU: with AMX, or with
    AVX512-BF16 on AMD (Zen 4 on: 1.7-2x float32). Intel's AVX512-BF16 without AMX measured
    0.6x float32."""
    vendor, flags = _cpu_info()
    return "amx_bf16" in flags or ("avx512_bf16" in flags and vendor == "AuthenticAMD")


def _cpu_has_avx512() -> bool:
    return "avx512f" in _cpu_flags()


def prefers_xla(compute_dtype: str, tokens_per_call: int | None = None,
                hidden_size: int | None = None, forward_only: bool = False,
                total_work: int | None = None) -> bool:
    """True where `jit_compile=True` makes BERT faster for `compute_dtype` on this machine.

    Args:
        compute_dtype: the dtype layers compute in ("float32", "bfloat16", "float16"), e.g.
            `keras.config.dtype_policy().compute_dtype`.
        tokens_per_call: batch size x sequence length of each call, where the caller knows it.
        hidden_size: the model's hidden size, with `tokens_per_call`. Without the two, float32 on
            CPU is taken to be large (no XLA).
        forward_only: the call is a forward pass (prediction), not a training step.
        total_work: tokens x hidden_size^2 x layers of every call together, where the caller
            knows it: on CPU, below `UNPAID_COMPILE_WORK` compiling costs more than it saves.
    """
    if tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"):
        return True
    if total_work is not None and total_work < UNPAID_COMPILE_WORK:
        return False
    if compute_dtype == "bfloat16":
        return forward_only and not _cpu_has_fast_bfloat16_matmuls()
    if compute_dtype != "float32":
        return False
    if forward_only and not _cpu_has_avx512():
        return True
    if tokens_per_call and hidden_size:
        return tokens_per_call * hidden_size ** 2 <= SMALL_FLOAT32_WORK
    return False
