"""The speed benchmark's arithmetic and report on made-up timings; its contenders, tiny."""
import math

import pytest

from bench.speed.cases import Case, ModelSize, benchmark_cases, case_flops, encoder_forward_flops
from bench.speed.contenders import synthetic_batch
from bench.speed.report import case_summary, markdown, plot
from bench.speed.worker import _Matmul, _peak_rss_mb, _reset_peak_rss
from tests.support.dependencies import require

BASE = ModelSize("bert_base", 12, 768)


def test_forward_flops_of_bert_base():
    # 2 x 85M encoder matmul weights per token, plus scores and context, plus the pooler.
    per_token = 12 * (8 * 768 ** 2 + 4 * 768 * 3072 + 4 * 128 * 768)
    assert encoder_forward_flops(BASE, 1, 128) == 128 * per_token + 2 * 768 ** 2
    assert 2 * 85e6 < per_token < 2 * 90e6


def test_training_step_counts_three_passes_and_the_heads():
    forward = case_flops(Case(BASE, "float32", "forward", 32, 128))
    train = case_flops(Case(BASE, "float32", "train", 32, 128))
    assert 3 * forward < train < 3.5 * forward


def test_case_list():
    cases = benchmark_cases(False, ["bert_base", "small_L4_H256"], ["float32", "bfloat16"])
    assert len(cases) == 2 * 2 * 5
    assert {(c.batch_size, c.seq_length) for c in cases if c.mode == "forward"} == {
        (1, 128), (1, 384), (32, 128), (32, 384)}
    assert all((c.batch_size, c.seq_length) == (32, 128) for c in cases if c.mode == "train")
    quick = benchmark_cases(True, ["small_L4_H256"], ["float32"], shapes=["8x64"])
    assert [(c.mode, c.batch_size, c.seq_length) for c in quick] == [
        ("forward", 8, 64), ("train", 32, 128)]
    for bad in ("32", "32x", "x128", "0x128", "1x513", "1x1"):
        with pytest.raises(ValueError, match="--shapes"):
            benchmark_cases(True, ["small_L4_H256"], ["float32"], shapes=[bad])


def test_synthetic_batch_of_a_short_sequence():
    batch = synthetic_batch(Case(BASE, "float32", "forward", 2, 8))
    assert batch["masked_lm_positions"].shape == (2, 7)
    assert all(len(set(row)) == 7 and 1 <= min(row) and max(row) < 8
               for row in batch["masked_lm_positions"])


def _results():
    case = Case(BASE, "float32", "forward", 32, 128)
    timings = {"this_project": [1.0, 1.1, 0.9], "transformers": [2.0, 2.4, 1.8],
               "keras_hub": [1.5, 1.1, 1.8]}
    contenders = {k: {"first_s": 5.0, "warmup_s": v[0], "wall_s": v, "cpu_s": [2 * t for t in v]}
                  for k, v in timings.items()}
    return {
        "command": "python -m bench.speed.run_benchmarks", "total_seconds": 60.0,
        "machine": {"cpu": "test CPU", "cores": 2, "memory_gib": 24, "isa": ["avx512f"],
                    "versions": {"tensorflow": "x"}, "load_average_start": (1.0, 1.0, 1.0),
                    "load_average_end": (1.0, 1.0, 1.0)},
        "peak": [{"framework": "tensorflow", "dtype": "float32", "shape": [8, 8, 8],
                  "gflops": 800.0, "best_gflops": 900.0}],
        "cases": [{"case": case.to_dict(), "rounds": 3, "contenders": contenders,
                   "ours_paired": {k: timings["this_project"] for k in timings}}],
    }


def test_ratios_are_paired_round_by_round():
    summary = case_summary(_results()["cases"][0], {"float32": 800.0})
    median, low, high = summary["ratios"]["transformers"]
    assert (median, low, high) == pytest.approx((2.0, 2.0, 2.4 / 1.1))
    assert summary["ratios"]["keras_hub"][1] == pytest.approx(1.0)
    assert summary["contenders"]["this_project"]["seq_per_s"] == pytest.approx(32.0)
    flops = case_flops(Case(BASE, "float32", "forward", 32, 128))
    assert summary["contenders"]["this_project"]["mfu"] == pytest.approx(flops / 1e9 / 800.0)


def test_report_writes_a_table_and_a_plot(tmp_path):
    text = markdown(_results())
    assert "| bert_base forward float32 B32 T128 | 3 | 32.0 / 16.0 / 21.3 |" in text
    assert "**2.00x** (2.00-2.18)" in text
    require("matplotlib")  # requirements-dev.txt and bench/requirements.txt
    plot(_results(), str(tmp_path / "results.png"))
    assert (tmp_path / "results.png").stat().st_size > 1000


def test_peak_memory_column():
    results = _results()
    contenders = results["cases"][0]["contenders"]
    contenders["this_project"]["peak_rss_mb"] = 6963.2
    contenders["transformers"]["peak_rss_mb"] = 10547.2
    row = next(line for line in markdown(results).splitlines() if line.startswith("| bert_base"))
    # Results measured before the column existed show a dash.
    assert "| 6.8 / 10.3 / - |" in row


def test_peak_resident_memory_follows_an_allocation_and_resets():
    _reset_peak_rss()
    before = _peak_rss_mb()
    block = bytearray(256 * 2 ** 20)
    block[::4096] = b"x" * len(block[::4096])  # touch every page: resident, not just reserved
    assert _peak_rss_mb() >= before + 250
    del block
    _reset_peak_rss()
    assert _peak_rss_mb() < before + 128


def test_small_products_table():
    results = _results()
    results["small_products"] = [
        {"framework": "tensorflow", "dtype": "float32", "shape": [128, 256, 256], "xla": True,
         "us_per_product": 184.2},
        {"framework": "tensorflow", "dtype": "float32", "shape": [128, 256, 256], "xla": False,
         "us_per_product": 271.6},
        {"framework": "torch", "dtype": "float32", "shape": [128, 256, 256], "xla": None,
         "us_per_product": 79.4},
        {"framework": "torch", "dtype": "bfloat16", "shape": [128, 256, 1024], "xla": None,
         "us_per_product": 466.0}]
    text = markdown(results)
    assert "| float32 | 128 x 256 x 256 | 184 | 272 | 79 |" in text
    assert "| bfloat16 | 128 x 256 x 1024 | - | - | 466 |" in text


@pytest.mark.parametrize("framework, jit_compile",
                         [("tensorflow", False), ("tensorflow", True), ("torch", False)])
def test_product_chain_alternates_the_weight_shapes(framework, jit_compile):
    # x [2, 3] -> [2, 5] -> [2, 3] -> [2, 5]: three dependent products, the last [m, n].
    assert tuple(_Matmul(framework, "float32", 2, 3, 5, 3, jit_compile).call().shape) == (2, 5)
    assert tuple(_Matmul(framework, "float32", 2, 3, 5, 2, jit_compile).call().shape) == (2, 3)


def test_the_peak_table_shows_the_rate_from_cpu_time_where_measured():
    results = _results()
    results["peak"].append({"framework": "torch", "dtype": "float32", "shape": [8, 8, 8],
                            "gflops": 700.0, "best_gflops": 750.0, "cpu_gflops": 990.0})
    text = markdown(results)
    assert "| tensorflow | float32 | 8 x 8 x 8 | 800 | 900 | - |" in text
    assert "| torch | float32 | 8 x 8 x 8 | 700 | 750 | 990 |" in text


@pytest.mark.parametrize("key", ["this_project_xla", "this_project_no_xla"])
def test_the_contenders_that_force_xla_on_or_off_run(key, tmp_path):
    from bench.speed.contenders import CONTENDERS
    contender = CONTENDERS[key]()
    assert contender.framework == "tensorflow"
    assert contender.jit_compile is (key == "this_project_xla")
    run = contender.build(Case(ModelSize("tiny", 1, 64), "float32", "forward", 2, 16),
                          str(tmp_path))
    assert math.isfinite(run())
