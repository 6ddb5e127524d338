"""`prefers_xla`: the measured rule for a machine without accelerators (CPU only)."""
import pytest
import tensorflow as tf

from running import xla_choice


@pytest.fixture(autouse=True)
def _cpu_only(monkeypatch):
    # The same answers on a machine with a GPU or TPU: the rule is asked as if it had none.
    monkeypatch.setattr(tf.config, "list_logical_devices", lambda device_type=None: [])


def test_float32_uses_xla_only_for_small_calls():
    assert not xla_choice.prefers_xla("float32")  # size unknown: taken to be large
    assert xla_choice.prefers_xla("float32", 1 * 128, 256)  # small BERT, batch 1
    assert xla_choice.prefers_xla("float32", 8 * 128, 256)  # 2^26 exactly
    assert not xla_choice.prefers_xla("float32", 32 * 128, 256)
    assert not xla_choice.prefers_xla("float32", 1 * 128, 768)  # BERT-Base, batch 1
    assert not xla_choice.prefers_xla("float16", 1, 128)


@pytest.mark.parametrize("avx512", [False, True])
def test_float32_forward_passes_use_xla_on_cpus_without_avx512(monkeypatch, avx512):
    monkeypatch.setattr(xla_choice, "_cpu_has_avx512", lambda: avx512)
    assert xla_choice.prefers_xla("float32", 64 * 384, 384, forward_only=True) is not avx512
    assert xla_choice.prefers_xla("float32", 1 * 128, 256, forward_only=True)  # small: always
    # ... unless the prediction as a whole is too little work to repay compiling.
    assert not xla_choice.prefers_xla("float32", 1 * 128, 256, forward_only=True,
                                      total_work=2 ** 33 - 1)
    assert xla_choice.prefers_xla("float32", 1 * 128, 256, forward_only=True, total_work=2 ** 33)
    # Training steps keep the size rule on every CPU.
    assert not xla_choice.prefers_xla("float32", 32 * 128, 768)
    assert not xla_choice.prefers_xla("float32")
    assert not xla_choice.prefers_xla("float16", 64 * 384, 384, forward_only=True)


@pytest.mark.parametrize("vendor, flags, fast_bfloat16", [
    ("GenuineIntel", {"avx512f", "avx512_bf16", "amx_bf16"}, True),  # AMX
    ("GenuineIntel", {"avx512f", "avx512_bf16", "avx512_fp16"}, False),  # measured: 0.6x float32
    ("AuthenticAMD", {"avx512f", "avx512_bf16"}, True),  # Zen 4, measured: 1.7-2x float32
    ("AuthenticAMD", {"avx2", "fma"}, False),  # no bfloat16 instructions
    ("", frozenset(), False),  # unknown
])
def test_bfloat16_forward_passes_use_xla_unless_onednn_has_fast_bfloat16_matmuls(
        monkeypatch, vendor, flags, fast_bfloat16):
    monkeypatch.setattr(xla_choice, "_cpu_info", lambda: (vendor, frozenset(flags)))
    assert xla_choice._cpu_has_fast_bfloat16_matmuls() is fast_bfloat16
    assert xla_choice.prefers_xla("bfloat16", forward_only=True) is not fast_bfloat16
    assert xla_choice.prefers_xla("bfloat16", 32 * 128, 768, forward_only=True) is not \
        fast_bfloat16
    assert xla_choice.prefers_xla("bfloat16", 1 * 128, 768, forward_only=True) is not \
        fast_bfloat16
    # Training steps keep their activations in bfloat16 without XLA: never on CPU.
    assert not xla_choice.prefers_xla("bfloat16")
    assert not xla_choice.prefers_xla("bfloat16", 1 * 128, 256)


def test_this_machines_cpu_is_read():
    vendor, flags = xla_choice._cpu_info()
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        text = f.read()
    assert vendor in text and all(flag in text for flag in flags)
