"""Speed of this project's BERT against Hugging Face transformers (PyTorch) and KerasHub, on CPU.

For each case (model size, dtype, forward pass or pretraining step, batch and sequence length) every
contender builds its model in its own worker process and runs a first call and a warm-up call;
then the timed calls alternate between the contenders, one call each per round, the order rotating
every round, so that the load of a shared machine falls on all of them alike. It reports medians
over the rounds, each contender's model-FLOPs utilisation against the matmul peak measured the
same way, and the ratios this project / peer taken round by round (median, min-max). It also
times alone, in each framework, the matrix products on which the small model's batch-1 latency
depends.

    pip install -r bench/requirements.txt && pip install --no-deps keras-hub==0.32.0
    python -m bench.speed.run_benchmarks            # full run: bench/results/model_speed/
    python -m bench.speed.run_benchmarks --quick    # smoke run of the small model, into /tmp
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from absl import app
from absl import flags
from absl import logging

from bench.speed import report
from bench.speed.cases import MODEL_SIZES, Case, benchmark_cases
from bench.speed.contenders import CONTENDERS
from bench.speed.worker import worker_main
from bench.support import (SpawnedProcess, define_list_flag, machine_description, results_dir,
                           write_json)
from utils import entry_point

FLAGS = flags.FLAGS


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    flags.DEFINE_bool("quick", False, "Smoke run: the small model at sequence 128, 3 rounds.")
    define_list_flag("models", None, list(MODEL_SIZES), "Model sizes (default: all; --quick: the "
                     "small one).")
    define_list_flag("dtypes", ["float32", "bfloat16"], ["float32", "bfloat16"],
                     "float32 and/or bfloat16 (mixed).")
    define_list_flag("modes", ["forward", "train"], ["forward", "train"],
                     "forward and/or train (the pretraining step).")
    flags.DEFINE_list("shapes", None, "Forward shapes as BxT, e.g. 32x128 (default: 1x128, "
                      "1x384, 32x128, 32x384; --quick: 1x128, 32x128).")
    define_list_flag("contenders", list(CONTENDERS), list(CONTENDERS), "The sides; the first one "
                     "is the numerator of the ratios.")
    flags.DEFINE_integer("rounds", 20, "Most timed calls per contender and case, fewer where they "
                         "would exceed --case_seconds (--quick: 3).")
    flags.DEFINE_integer("min_rounds", 3, "Rounds kept even when a case exceeds --case_seconds.")
    flags.DEFINE_float("case_seconds", 60.0, "Time budget of the timed rounds of one case.")
    flags.DEFINE_bool("update", False, "Measure only the selected cases and put them in place of "
                      "the same cases in the output folder's results.json, keeping the others.")
    flags.DEFINE_string("output_dir", None, "Where RESULTS.md, results.png and results.json go "
                        "(default: bench/results/model_speed/, --quick: /tmp/bert_speed_quick).")


# The matmul shapes of the peak: a BERT-Base feed-forward product at batch 32 x 128 tokens, and a
# square one.
PEAK_SHAPES = ((4096, 768, 3072), (2048, 2048, 2048))
PEAK_ROUNDS = 7
# The products of the small model's batch-1 x 128 forward pass (the attention projections, the
# feed-forward pair), timed as chains of SMALL_PRODUCTS_LENGTH dependent products per call.
SMALL_MODEL = "small_L4_H256"
_SMALL_HIDDEN = MODEL_SIZES[SMALL_MODEL][1]
SMALL_PRODUCT_SHAPES = ((128, _SMALL_HIDDEN, _SMALL_HIDDEN), (128, _SMALL_HIDDEN, 4 * _SMALL_HIDDEN))
SMALL_PRODUCTS_LENGTH = 16


class Worker(SpawnedProcess):
    """The driver's end of one contender's worker process (`bench.speed.worker`)."""

    def __init__(self, key: str, scratch_dir: str):
        self.key = key
        super().__init__(key, worker_main, (key, scratch_dir))

    def restart(self) -> None:
        """A fresh process: the only sure way to hand a large model's memory back to the OS."""
        if self.process.is_alive():
            self.process.terminate()
        self.process.join(timeout=60)
        self.start()


def _alternate(workers: list[Worker], rounds: int, message: tuple) -> dict[str, list[dict]]:
    """`rounds` rounds of one call per worker, the order rotated each round."""
    samples = {w.key: [] for w in workers}
    for r in range(rounds):
        for w in workers[r % len(workers):] + workers[:r % len(workers)]:
            samples[w.key].append(w.ask(*message))
    return samples


def _one_worker_per_framework(workers: list[Worker]) -> dict[str, Worker]:
    frameworks = {}
    for w in workers:
        frameworks.setdefault(CONTENDERS[w.key].framework, w)
    return frameworks


def measure_peak(workers: list[Worker], dtypes: list[str]) -> list[dict]:
    """Matmul GFLOP/s of each framework (one worker per framework), alternated like the cases."""
    frameworks = _one_worker_per_framework(workers)
    rows = []
    for dtype in dtypes:
        for m, k, n in PEAK_SHAPES:
            samples = _alternate(list(frameworks.values()), PEAK_ROUNDS, ("peak", dtype, m, k, n))
            for framework, w in frameworks.items():
                times = [s["wall_s"] for s in samples[w.key][1:]]
                cpu = [s["cpu_s"] for s in samples[w.key][1:]]
                rows.append({"framework": framework, "dtype": dtype, "shape": [m, k, n],
                             "gflops": 2 * m * k * n / statistics.median(times) / 1e9,
                             "best_gflops": 2 * m * k * n / min(times) / 1e9,
                             # The rate with every core to itself, from the CPU time: an
                             # estimate of the peak where other work shares the machine.
                             "cpu_gflops": 2 * m * k * n * os.cpu_count()
                             / statistics.median(cpu) / 1e9})
    return rows


def measure_small_products(workers: list[Worker], dtypes: list[str]) -> list[dict]:
    """Microseconds per product of each framework on the small model's batch-1 products, chained
    (`SMALL_PRODUCT_SHAPES`); TensorFlow's with XLA and as a graph, each alternated with the
    others like the cases."""
    frameworks = _one_worker_per_framework(workers)
    rows = []
    for dtype in dtypes:
        for m, k, n in SMALL_PRODUCT_SHAPES:
            for jit_compile in (True, False):
                message = ("products", dtype, m, k, n, SMALL_PRODUCTS_LENGTH, jit_compile)
                samples = _alternate(list(frameworks.values()), PEAK_ROUNDS, message)
                for framework, w in frameworks.items():
                    if framework != "tensorflow" and not jit_compile:
                        continue  # no XLA switch: its figure comes from the first set of rounds
                    wall = statistics.median(s["wall_s"] for s in samples[w.key][1:])
                    rows.append({"framework": framework, "dtype": dtype, "shape": [m, k, n],
                                 "xla": jit_compile if framework == "tensorflow" else None,
                                 "us_per_product": 1e6 * wall / SMALL_PRODUCTS_LENGTH})
    return rows


def measure_case(workers: list[Worker], case: Case) -> dict:
    """Builds the case on the workers, runs the alternating rounds, frees the models.

    A training step holds 7-10 GB per contender at BERT-Base size, more than three fit in 24 GiB,
    so training cases alternate this project with one peer at a time (the ratios are paired within
    each pair of workers) and restart each worker once its model is done with; forward cases
    alternate all contenders together.
    """
    ours = workers[0]
    groups = [workers] if case.mode == "forward" else [[ours, w] for w in workers[1:]]
    result = {"case": case.to_dict(), "rounds": 0, "contenders": {}, "ours_paired": {}}
    for group in groups:
        for w in group:
            if w.key not in result["contenders"]:
                logging.info("%s: building %s", case.key, w.key)
                result["contenders"][w.key] = {**w.ask("build", case.to_dict()),
                                               "wall_s": [], "cpu_s": []}
        per_round = sum(result["contenders"][w.key]["warmup_s"] for w in group)
        rounds = max(FLAGS.min_rounds, min(FLAGS.rounds, int(FLAGS.case_seconds / per_round)))
        samples = _alternate(group, rounds, ("run",))
        for w in group:
            values = result["contenders"][w.key]
            values.update(w.ask("memory"))
            values["wall_s"] += [s["wall_s"] for s in samples[w.key]]
            values["cpu_s"] += [s["cpu_s"] for s in samples[w.key]]
        for w in group[1:]:
            result["ours_paired"][w.key] = [s["wall_s"] for s in samples[ours.key]]
            _release(w, case)
        result["rounds"] = max(result["rounds"], rounds)
    _release(ours, case)
    logging.info("%s: %s", case.key, ", ".join(
        f"{k} {statistics.median(v['wall_s']):.3f}s" for k, v in result["contenders"].items()))
    return result


def _release(worker: Worker, case: Case) -> None:
    if case.mode == "forward":
        worker.ask("free")
    else:
        worker.restart()


def _merged(path: str, update: dict) -> dict:
    """The results in `path` with the cases of `update` in place of the same cases."""
    with open(path, encoding="utf-8") as f:
        results = json.load(f)
    new = {Case.from_dict(r["case"]).key: r for r in update["cases"]}
    old_keys = {Case.from_dict(r["case"]).key for r in results["cases"]}
    results["cases"] = [new.get(Case.from_dict(r["case"]).key, r) for r in results["cases"]]
    results["cases"] += [r for key, r in new.items() if key not in old_keys]
    # A peak measured on a busier machine reads low: keep the higher figure of each matmul.
    peak = {(r["framework"], r["dtype"], tuple(r["shape"])): r for r in results["peak"]}
    for row in update["peak"]:
        key = (row["framework"], row["dtype"], tuple(row["shape"]))
        if key not in peak or row["gflops"] > peak[key]["gflops"]:
            peak[key] = row
    results["peak"] = list(peak.values())
    # The small products are alternated within one run: take the newer run's set whole.
    results["small_products"] = update.get("small_products") or results.get("small_products", [])
    results["updated"] = results.get("updated", []) + [
        {"cases": list(new), "load_average": update["machine"]["load_average_start"],
         "seconds": update["total_seconds"]}]
    return results


def main(argv):
    del argv
    models = FLAGS.models or ([SMALL_MODEL] if FLAGS.quick else list(MODEL_SIZES))
    rounds = 3 if FLAGS.quick else FLAGS.rounds
    FLAGS.rounds = rounds
    output_dir = FLAGS.output_dir or ("/tmp/bert_speed_quick" if FLAGS.quick
                                      else results_dir("model_speed"))
    cases = benchmark_cases(FLAGS.quick, models, FLAGS.dtypes, FLAGS.modes, FLAGS.shapes)
    if FLAGS.update and not os.path.exists(os.path.join(output_dir, "results.json")):
        raise app.UsageError(f"--update: no results.json in {output_dir} to update")
    os.makedirs(output_dir, exist_ok=True)
    scratch_dir = tempfile.mkdtemp(prefix="bert_bench_")
    workers = [Worker(key, scratch_dir) for key in FLAGS.contenders]
    start = time.monotonic()
    results = {"machine": machine_description(), "cases": []}
    try:
        results["peak"] = measure_peak(workers, FLAGS.dtypes)
        if SMALL_MODEL in models:
            results["small_products"] = measure_small_products(workers, FLAGS.dtypes)
        for case in cases:
            try:
                results["cases"].append(measure_case(workers, case))
            except (RuntimeError, OSError, EOFError) as error:
                logging.error("%s failed: %s", case.key, error)
                results.setdefault("failed", []).append({"case": case.key, "error": str(error)})
                for w in workers:
                    w.restart()
    finally:
        for w in workers:
            w.stop()
        shutil.rmtree(scratch_dir, ignore_errors=True)
    results["machine"]["load_average_end"] = os.getloadavg()
    results["total_seconds"] = time.monotonic() - start
    results["command"] = " ".join(["python -m bench.speed.run_benchmarks", *sys.argv[1:]])
    if FLAGS.update:
        results = _merged(os.path.join(output_dir, "results.json"), results)
    write_json(os.path.join(output_dir, "results.json"), results)
    report.write(results, output_dir)
    logging.info("wrote %s/RESULTS.md and results.png in %.0f s", output_dir,
                 results["total_seconds"])


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
