"""The paper's selection over a grid: selection/grid.py, selection/report.py and the
select_fine_tuning.py command (bad grids refused, a tiny grid run, resumed and skipped)."""
import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

from data.classifier.glue_tasks import get_task
from selection import grid as selection, report as selection_report
from tests.support.paths import REPO_ROOT
from tests.support.script_errors import assert_user_error
from tests.support.tiny_task_model import write_tiny_model

RTE = get_task("rte")


def _write_results(folder: pathlib.Path, values: dict, name: str = "eval_results.txt") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(f"{k} = {v}\n" for k, v in sorted(values.items())))


# ----------------------------------------------------------------------------- grid

def test_grid_names_each_run_after_its_setting_and_gives_its_flags():
    grid = selection.parse_grid(["5e-5", " 2e-5"], ["32"], ["3", "2.5"], ["1", "2"])
    runs = grid.runs()
    assert len(runs) == 8
    assert [run.name for run in runs[:4]] == [
        "lr5e-05_bs32_ep3_seed1", "lr5e-05_bs32_ep2.5_seed1", "lr2e-05_bs32_ep3_seed1",
        "lr2e-05_bs32_ep2.5_seed1"]
    assert {run.seed for run in runs[4:]} == {2}  # every setting's first seed comes first
    assert runs[0].flags() == ["--learning_rate=5e-05", "--train_batch_size=32",
                               "--num_train_epochs=3.0", "--seed=1"]


@pytest.mark.parametrize("values,message", [
    ((["5e-5", "fast"], ["32"], ["3"], ["1"]), "--learning_rates: 'fast' is not a number"),
    ((["-1e-5"], ["32"], ["3"], ["1"]), "--learning_rates: '-1e-5' is not a positive number"),
    ((["0"], ["32"], ["3"], ["1"]), "--learning_rates: '0' is not a positive number"),
    (([], ["32"], ["3"], ["1"]), "--learning_rates is empty: give at least one value"),
    ((["5e-5"], ["0"], ["3"], ["1"]), "--batch_sizes: '0' is less than 1"),
    ((["5e-5"], ["32.5"], ["3"], ["1"]), "--batch_sizes: '32.5' is not an integer"),
    ((["5e-5"], ["32"], ["nan"], ["1"]), "--epochs: 'nan' is not a positive number"),
    ((["5e-5"], ["32"], ["3"], ["one"]), "--seeds: 'one' is not an integer"),
    ((["5e-5"], ["32"], ["3"], ["1", ""]), "--seeds: '' is not an integer"),
    ((["5e-5", "5e-05"], ["32"], ["3"], ["1"]), "--learning_rates: '5e-05' is listed twice"),
])
def test_bad_grids_name_the_flag_and_the_value(values, message):
    with pytest.raises(ValueError) as raised:
        selection.parse_grid(*values)
    assert str(raised.value) == message


def test_a_task_needs_train_and_dev_files(tmp_path):
    with pytest.raises(ValueError, match="Unknown task 'glue'"):
        selection.check_task("glue", str(tmp_path))
    with pytest.raises(ValueError, match="task 'ax' has no train split"):
        selection.check_task("ax", str(tmp_path))
    (tmp_path / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n")
    with pytest.raises(FileNotFoundError, match=f"No rte dev file: {tmp_path}/dev.tsv"):
        selection.check_task("RTE", str(tmp_path))
    (tmp_path / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n")
    assert selection.check_task("RTE", str(tmp_path)) is RTE
    assert selection.prediction_splits(RTE, str(tmp_path)) == (
        [], f"{tmp_path}/test.tsv does not exist: no test predictions")
    assert selection.prediction_splits(get_task("xnli"), str(tmp_path))[1] == \
        "task xnli has no test split: no test predictions"


def test_flags_after_the_separator_leave_the_grid_to_the_selection():
    extra = ["--max_seq_length=64", "--vocab_file", "/v/vocab.txt", "--nodo_lower_case"]
    selection.check_extra_flags(extra)
    assert selection.extra_flag_value(extra, "vocab_file") == "/v/vocab.txt"
    assert selection.extra_flag_value(extra, "max_seq_length") == "64"
    assert selection.extra_flag_value(extra, "bert_config_file") is None
    for arg, flag in (("--learning_rate=1e-5", "learning_rate"), ("--nodo_eval", "do_eval"),
                      ("--seed=3", "seed"), ("--output_dir=/x", "output_dir")):
        with pytest.raises(ValueError, match=f"sets run_classifier.py's --{flag} itself"):
            selection.check_extra_flags([arg])
    with pytest.raises(ValueError, match="'stray' after --"):
        selection.check_extra_flags(["--max_seq_length=64", "stray"])


# ----------------------------------------------------------------------------- runs and report

def test_a_run_folder_is_new_started_finished_or_refused(tmp_path):
    run = selection.parse_grid(["5e-5"], ["32"], ["3"], ["1"]).runs()[0]
    record = selection.run_record(run, RTE, "glue/RTE", "bert/bert_model.ckpt", ["--x=1"])
    folder = tmp_path / run.name
    assert selection.run_state(str(folder), record, RTE) == "new"
    folder.mkdir()
    (folder / selection.RECORD_FILE).write_text(json.dumps(record))
    assert selection.run_state(str(folder), record, RTE) == "started"
    _write_results(folder, {"eval_accuracy": 0.5, "global_step": 3})
    assert selection.run_state(str(folder), record, RTE) == "finished"
    other = {**record, "extra_flags": ["--x=2"], "seed": 2}
    with pytest.raises(ValueError, match=r"holds a run of other settings \(its extra_flags, seed"):
        selection.run_state(str(folder), other, RTE)
    (folder / selection.RECORD_FILE).unlink()
    with pytest.raises(ValueError, match=f"{folder} holds files but no selection_run.json"):
        selection.run_state(str(folder), record, RTE)


# Dev accuracies by (learning rate, seed): 5e-5 has the best single run (0.72) and the worse mean.
_ACCURACIES = {("5e-5", 1): 0.55, ("5e-5", 2): 0.72, ("5e-5", 3): 0.62,
               ("2e-5", 1): 0.66, ("2e-5", 2): 0.67, ("2e-5", 3): 0.68}


def test_report_and_choice_from_hand_made_eval_results(tmp_path):
    grid = selection.parse_grid(["5e-5", "2e-5"], ["32"], ["3"], ["1", "2", "3"])
    run_dirs = {}
    for run in grid.runs():
        lr = "5e-5" if run.setting.learning_rate == 5e-5 else "2e-5"
        accuracy = _ACCURACIES[(lr, run.seed)]
        run_dirs[run.name] = str(tmp_path / run.name)
        _write_results(tmp_path / run.name, {"eval_accuracy": accuracy, "eval_loss": 1 - accuracy,
                                             "global_step": 7, "loss": 1 - accuracy})
    results = [(run, selection.read_dev_results(RTE, run_dirs[run.name])) for run in grid.runs()]
    chosen = selection.choose(results, "eval_accuracy")
    assert chosen[0].name == "lr5e-05_bs32_ep3_seed2"
    predictions = {"output_dir": str(tmp_path / "chosen"), "files": ["RTE.tsv", "test_results.tsv"]}
    report = selection_report.build_report("rte", "eval_accuracy", grid, results, chosen, run_dirs,
                                           predictions)
    json.dumps(report, allow_nan=False)
    first, second = report["settings"]
    # 5e-5: mean (0.55 + 0.72 + 0.62) / 3 = 0.63; deviations -0.08, 0.09, -0.01:
    # sd = sqrt((0.0064 + 0.0081 + 0.0001) / 2) = sqrt(0.0073) = 0.08544.
    assert (first["learning_rate"], first["runs"]) == (5e-5, 3)
    assert first["mean"]["eval_accuracy"] == pytest.approx(0.63)
    assert first["sd"]["eval_accuracy"] == pytest.approx(math.sqrt(0.0073))
    assert first["best_eval_accuracy"] == pytest.approx(0.72)
    # 2e-5: mean 0.67, deviations -0.01, 0, 0.01: sd = sqrt(0.0002 / 2) = 0.01.
    assert second["mean"]["eval_accuracy"] == pytest.approx(0.67)
    assert second["sd"]["eval_accuracy"] == pytest.approx(0.01)
    assert second["mean"]["eval_loss"] == pytest.approx(0.33)
    assert report["chosen"] == {"run": "lr5e-05_bs32_ep3_seed2", "learning_rate": 5e-5,
                                "batch_size": 32, "epochs": 3.0, "seed": 2,
                                "eval_accuracy": pytest.approx(0.72),
                                "model": f"{tmp_path}/lr5e-05_bs32_ep3_seed2/model.ckpt"}
    assert (report["runs_finished"], report["runs_in_grid"]) == (6, 6)
    markdown = selection_report.report_markdown(report)
    assert "the best single run over all seeds and settings is kept, not the best mean" in markdown
    assert ("Chosen: learning rate 5e-05, batch size 32, epochs 3: run `lr5e-05_bs32_ep3_seed2` "
            "(seed 2), dev eval_accuracy 0.7200.") in markdown
    assert "| 5e-05 | 32 | 3 | 3 | 0.6300 ± 0.0854 | 0.3700 ± 0.0854 | 0.7200 |" in markdown
    assert "| 2e-05 | 32 | 3 | 3 | 0.6700 ± 0.0100 | 0.3300 ± 0.0100 | 0.6800 |" in markdown
    assert "| `lr2e-05_bs32_ep3_seed3` | 2e-05 | 32 | 3 | 3 | 0.6800 | 0.3200 | 7 |" in markdown
    assert f"`{tmp_path}/chosen/RTE.tsv`" in markdown


def test_mismatched_dev_results_join_and_a_metric_that_is_not_a_number_is_never_chosen(tmp_path):
    mnli, stsb = get_task("mnli"), get_task("stsb")
    _write_results(tmp_path / "m", {"eval_accuracy": 0.8})
    _write_results(tmp_path / "m", {"eval_accuracy": 0.7}, "eval_results_mismatched.txt")
    assert selection.read_dev_results(mnli, str(tmp_path / "m")) == {
        "eval_accuracy": 0.8, "eval_accuracy_mismatched": 0.7}
    assert selection.read_dev_results(mnli, str(tmp_path / "none")) is None
    assert selection.main_metric(stsb) == "eval_spearman"
    runs = selection.parse_grid(["1e-5", "2e-5"], ["8"], ["1"], ["1"]).runs()
    results = [(runs[0], {"eval_spearman": math.nan}), (runs[1], {"eval_spearman": 0.1})]
    assert selection.choose(results, "eval_spearman")[0] is runs[1]
    assert selection.choose(results[:1], "eval_spearman") is None
    report = selection_report.build_report("stsb", "eval_spearman", selection.Grid(
        (1e-5, 2e-5), (8,), (1.0,), (1,)), results[:1], None, {r.name: "x" for r in runs}, None)
    assert report["runs"][0]["results"] == {"eval_spearman": None}
    markdown = selection_report.report_markdown(report)
    assert "Runs finished: 1 of 2 (the choice is among those so far)." in markdown
    assert "Chosen: none yet" in markdown


# ----------------------------------------------------------------------------- the command

def _select(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, str(REPO_ROOT / "select_fine_tuning.py"), *args],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=900)


@pytest.fixture(scope="module")
def tiny_rte(tmp_path_factory) -> dict:
    """A tiny random BERT and an RTE folder of 8 train, 7 dev and 5 test examples."""
    from tests.support.classifier_runs import write_glue_task
    folder = tmp_path_factory.mktemp("tiny_rte")
    model = write_tiny_model(folder / "model")
    test_rows = write_glue_task(folder / "RTE", "rte")
    return {"init_checkpoint": str(model["init_checkpoint"]), "data_dir": str(folder / "RTE"),
            "test_rows": test_rows["test"]}


@pytest.mark.slow
@pytest.mark.parametrize("flag,message", [
    ("--task_name=glue", "Unknown task 'glue'"),
    ("--learning_rates=5e-5,x", "--learning_rates: 'x' is not a number"),
    ("--seeds=1.5", "--seeds: '1.5' is not an integer"),
    ("--data_dir=/nonexistent/RTE", "No rte train file: /nonexistent/RTE/train.tsv"),
])
def test_a_bad_grid_is_refused_before_any_run(tiny_rte, tmp_path, flag, message):
    output_dir = tmp_path / "out"
    result = _select("--task_name=RTE", f"--data_dir={tiny_rte['data_dir']}",
                     f"--init_checkpoint={tiny_rte['init_checkpoint']}",
                     f"--output_dir={output_dir}", flag)
    assert result.returncode == 1
    assert_user_error(result.stderr, message)
    assert not output_dir.exists()


def _log_sizes(output_dir: pathlib.Path) -> dict[str, int]:
    return {path.parent.name: path.stat().st_size
            for path in output_dir.glob("*/run_classifier.log")}


@pytest.mark.slow
def test_a_tiny_grid_is_run_resumed_and_skipped_and_its_choice_predicts_test(tiny_rte, tmp_path):
    output_dir = tmp_path / "selection"
    args = ["--task_name=RTE", f"--data_dir={tiny_rte['data_dir']}",
            f"--init_checkpoint={tiny_rte['init_checkpoint']}", f"--output_dir={output_dir}",
            "--learning_rates=1e-3,2e-3", "--batch_sizes=8", "--epochs=1", "--seeds=3",
            "--", "--max_seq_length=32", "--eval_batch_size=8", "--predict_batch_size=8",
            "--optimizer=adamw_bias_corrected"]
    first = _select(*args[:-5], "--processes=2", *args[-5:])
    assert first.returncode == 0, first.stderr[-3000:]
    report = json.loads((output_dir / "selection.json").read_text())
    names = ["lr0.001_bs8_ep1_seed3", "lr0.002_bs8_ep1_seed3"]
    assert [run["name"] for run in report["runs"]] == names
    for run in report["runs"]:
        assert run["results"]["global_step"] == 1  # 8 examples, batch 8, one epoch
        assert 0 <= run["results"]["eval_accuracy"] <= 1
    assert report["chosen"]["run"] in names
    best = max(run["results"]["eval_accuracy"] for run in report["runs"])
    assert report["chosen"]["eval_accuracy"] == best
    for number, name in enumerate(names, start=1):
        assert f"run {number}/2 (learning rate " in first.stderr
        assert "runs done, elapsed" in first.stderr and "ETA" in first.stderr
        assert "--optimizer=adamw_bias_corrected" in \
            (output_dir / name / selection.RECORD_FILE).read_text()
    submission = (output_dir / "chosen" / "RTE.tsv").read_text().splitlines()
    assert submission[0] == "index\tprediction"
    assert [line.split("\t")[0] for line in submission[1:]] == \
        [row[0] for row in tiny_rte["test_rows"]]
    assert report["predictions"]["files"] == ["RTE.tsv", "test_results.tsv"]
    assert "Its test predictions (the GLUE server" in (output_dir / "selection.md").read_text()

    # Rerun: every run and the predictions are skipped; an interrupted run (its dev results not
    # written yet) is resumed, the others left alone.
    logs = _log_sizes(output_dir)
    again = _select(*args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr.count("finished before") == 2 and "made before" in again.stderr
    assert _log_sizes(output_dir) == logs
    assert json.loads((output_dir / "selection.json").read_text()) == report
    (output_dir / names[1] / "eval_results.txt").unlink()
    resumed = _select(*args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "run 1/2" in resumed.stderr and "finished before" in resumed.stderr
    assert "run 2/2 (learning rate 0.002" in resumed.stderr
    sizes = _log_sizes(output_dir)
    assert sizes[names[0]] == logs[names[0]] and sizes[names[1]] > logs[names[1]]
    assert json.loads((output_dir / "selection.json").read_text())["runs"] == report["runs"]
