"""Tests of the script-throughput benchmark's pieces: the script's rate from its step log, the table."""
import json

import pytest

from bench.speed import script_throughput
from bench.speed.script_throughput import markdown, script_rate


def test_script_rate_leaves_out_the_warm_up_steps():
    # Step 1 (tracing) took 30 s, step 2 10 s, then 2 s a step: the rate counts steps 3-6 only,
    # from the end of step 2 to the end of step 6.
    ends = [30.0, 40.0, 42.0, 44.0, 46.0, 48.0]
    log = [{"step": i + 1, "wall_time": 1e9 + t} for i, t in enumerate(ends)]
    rate = script_rate(log, batch_size=32)
    assert rate["steps"] == 4
    assert rate["seconds"] == pytest.approx(8.0)
    assert rate["examples_per_second"] == pytest.approx(4 * 32 / 8.0)


def test_script_rate_needs_timed_steps():
    with pytest.raises(ValueError, match="too few"):
        script_rate([{"step": 1, "wall_time": 0.0}, {"step": 2, "wall_time": 1.0}], 32)


def test_table_gives_the_median_ratio_and_its_range():
    rounds = [{"script": {"examples_per_second": s, "steps": 10},
               "step": {"examples_per_second": 4.0}} for s in (3.8, 4.0, 3.9)]
    case = {"command": "python -m bench.speed.script_throughput --rounds=3", "rounds": rounds}
    results = {"machines": {"EPYC, 2 cores, avx2": {"cases": {"bert_base train float32": case}}}}
    table = markdown(results)
    assert "## EPYC, 2 cores, avx2" in table
    row = next(line for line in table.splitlines() if line.startswith("| bert_base"))
    assert row == "| bert_base train float32 | 3 | 10 | 3.90 | 4.00 | 0.975 (0.950-1.000) |"
    assert "- bert_base train float32: `python -m bench.speed.script_throughput --rounds=3`" in table


def test_config_file_is_the_benchmarks_model(tmp_path):
    from bench.speed.cases import MODEL_SIZES, ModelSize
    from modeling.config import BertConfig
    model = ModelSize("small_L4_H256", *MODEL_SIZES["small_L4_H256"])
    config = BertConfig.from_json_file(script_throughput.bert_config_file(model, str(tmp_path)))
    assert (config.num_hidden_layers, config.hidden_size) == MODEL_SIZES["small_L4_H256"]
    assert config.intermediate_size == 4 * config.hidden_size
    assert json.loads((tmp_path / "bert_config_small_L4_H256.json").read_text())["vocab_size"] \
        == 30522
