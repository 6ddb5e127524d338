"""Tests of bench/support.py: results files, worker processes, and the benchmarks' one command-line
convention (flags defined only where a benchmark runs, absl through the scripts' entry point)."""
import importlib
import os
import pathlib
import pkgutil
import subprocess
import sys

from absl import flags
import pytest

import bench
from bench import support


def test_results_files_round_trip_into_a_new_folder(tmp_path):
    stem = str(tmp_path / "new" / "report")
    assert support.read_json(stem + ".json", {"runs": {}}) == {"runs": {}}
    support.write_report(stem, {"b": 1, "a": [2]}, "# report\n", sort_keys=True)
    assert support.read_json(stem + ".json", None) == {"a": [2], "b": 1}
    assert pathlib.Path(stem + ".json").read_text() == '{\n "a": [\n  2\n ],\n "b": 1\n}\n'
    assert pathlib.Path(stem + ".md").read_text() == "# report\n"
    assert sorted(os.listdir(tmp_path / "new")) == ["report.json", "report.md"]


def test_results_go_under_bench_results():
    assert support.results_dir("model_speed") == str(
        support.REPO_ROOT / "bench" / "results" / "model_speed")


def _answer(connection, offset):
    """A process's end for `SpawnedProcess`: adds `offset`, fails on anything else."""
    while True:
        message = connection.recv()
        if message[0] == "stop":
            break
        if message[0] == "add":
            connection.send({"sum": message[1] + offset})
        else:
            connection.send({"error": f"unknown message {message!r}"})


def test_spawned_process_answers_and_reports_its_errors():
    process = support.SpawnedProcess("adder", _answer, (10,))
    try:
        assert process.ask("add", 5) == {"sum": 15}
        with pytest.raises(RuntimeError, match="adder failed on multiply"):
            process.ask("multiply", 2)
    finally:
        process.stop()
    assert not process.process.is_alive()


def test_importing_every_benchmark_defines_no_flag():
    # Benchmarks import each other's functions: a flag defined at import would clash.
    names = [module.name for module in pkgutil.walk_packages(bench.__path__, "bench.")]
    for name in names:
        importlib.import_module(name)
    assert "bench.speed.run_benchmarks" in names and "bench.data.original_pretraining" in names
    defined_by = flags.FLAGS.flags_by_module_dict()
    bench_folder = str(support.REPO_ROOT / "bench")
    assert not [module for module in defined_by
                if module.startswith("bench.") or module.startswith(bench_folder)]


def _run_module(*args):
    return subprocess.run([sys.executable, "-m", *args], cwd=support.REPO_ROOT,
                          capture_output=True, text=True, timeout=300)


def test_a_benchmark_runs_as_a_module_with_its_own_and_the_shared_flags():
    result = _run_module("bench.speed.host_check", "--help")
    assert "--host:" in result.stdout and "--[no]report_only:" in result.stdout, result.stderr
    result = _run_module("bench.speed.host_check", "--rounds=1")
    assert result.returncode == 1
    assert "--host is required to measure" in result.stdout + result.stderr
