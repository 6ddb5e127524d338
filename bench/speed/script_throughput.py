"""The scripts as fast as the model: `run_pretraining.py` against the benchmark's training step.

`run_pretraining.py` is run from the shell as a user runs it, on real pretraining TFRecords
(`create_pretraining_data.py` on WikiText-2 with Google's uncased vocabulary, 128 tokens, 20
masked positions), with everything its loop does: the input pipeline, the per-step log
(`train_log.jsonl`), progress lines, TensorBoard summaries and the non-finite-loss check. Its
throughput is read from the wall time of each step in `train_log.jsonl`, from the end of step
`WARMUP_STEPS` (tracing and the first calls left out) to the last step. The benchmark's training
step (`bench.speed.contenders.ThisProject`: the same model, batch, dtype and `Trainer` step, fed
from synthetic records of the same shape) is timed call by call in a worker process as
`bench.speed.run_benchmarks` does. The two alternate, round by round; ratio = the script's
examples/s / the step's in the same round (at least 0.95 is the target).

    python -m bench.speed.script_throughput                              # BERT-Base, 32 x 128
    python -m bench.speed.script_throughput --model=small_L4_H256 --steps=30
    python -m bench.speed.script_throughput --dtype=bfloat16

Writes `script_throughput.json` (every round) and `script_throughput.md` (the table) into
--output_dir (bench/results/script_throughput/), keeping the results of other cases and machines
already there.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile

from absl import app
from absl import flags

from bench.speed.cases import MAX_PREDICTIONS_PER_SEQ, MODEL_SIZES, Case, ModelSize
from bench.speed.contenders import bert_config
from bench.speed.run_benchmarks import Worker
from bench.support import (define_output_dir_flag, define_shared_data_flag, log,
                           machine_description, machine_label, read_json, run_logged,
                           write_report)
from utils import entry_point

FLAGS = flags.FLAGS

BATCH_SIZE = 32
SEQ_LENGTH = 128
# Steps left out of the script's figure: the first traces and compiles the step.
WARMUP_STEPS = 2


def pretraining_records(shared_data: str, work_dir: str) -> str:
    """Real pretraining TFRecords of SEQ_LENGTH tokens, made once by create_pretraining_data.py."""
    path = os.path.join(work_dir, f"wikitext2_T{SEQ_LENGTH}.tfrecord")
    if not os.path.exists(path):
        run_logged([sys.executable, "create_pretraining_data.py",
                    f"--input_file={shared_data}/wikitext-2-raw/wiki.test.sentences.txt",
                    f"--vocab_file={shared_data}/vocab/uncased_vocab.txt",
                    f"--output_file={path}", f"--max_seq_length={SEQ_LENGTH}",
                    f"--max_predictions_per_seq={MAX_PREDICTIONS_PER_SEQ}", "--dupe_factor=1"],
                   os.path.join(work_dir, "create_pretraining_data.log"))
    return path


def bert_config_file(model: ModelSize, work_dir: str) -> str:
    """The benchmark's model (`bench.speed.contenders.bert_config`) as a bert_config.json."""
    path = os.path.join(work_dir, f"bert_config_{model.name}.json")
    bert_config(model).to_json_file(path)
    return path


def script_rate(step_log: list[dict], batch_size: int, warmup_steps: int = WARMUP_STEPS) -> dict:
    """Examples/s of a run from its `train_log.jsonl` records, after `warmup_steps` steps."""
    timed = [r for r in step_log if r["step"] >= warmup_steps]
    if len(timed) < 2:
        raise ValueError(f"{len(step_log)} logged steps: too few to time after {warmup_steps}")
    steps = timed[-1]["step"] - timed[0]["step"]
    seconds = timed[-1]["wall_time"] - timed[0]["wall_time"]
    return {"steps": steps, "seconds": seconds, "examples_per_second": steps * batch_size / seconds}


def run_script(case: Case, steps: int, records: str, config_file: str, run_dir: str) -> dict:
    """run_pretraining.py for `steps` steps from a fresh model; its throughput after warm-up."""
    output_dir = os.path.join(run_dir, "output")
    shutil.rmtree(output_dir, ignore_errors=True)
    dtype = "mixed_bfloat16" if case.dtype == "bfloat16" else "float32"
    run_logged([sys.executable, "run_pretraining.py", f"--input_file={records}",
                f"--bert_config_file={config_file}", f"--output_dir={output_dir}", "--do_train",
                f"--train_batch_size={case.batch_size}", f"--max_seq_length={case.seq_length}",
                f"--max_predictions_per_seq={MAX_PREDICTIONS_PER_SEQ}",
                f"--num_train_steps={steps}", "--num_warmup_steps=0", "--learning_rate=1e-4",
                f"--dtype={dtype}"], os.path.join(run_dir, "run_pretraining.log"))
    with open(os.path.join(output_dir, "train_log.jsonl"), encoding="utf-8") as f:
        return script_rate([json.loads(line) for line in f], case.batch_size)


def run_step(case: Case, steps: int, scratch_dir: str) -> dict:
    """The benchmark's training step in a fresh worker: built, warmed up, then timed `steps`
    calls after the same warm-up as the script's."""
    worker = Worker("this_project", scratch_dir)
    try:
        worker.ask("build", case.to_dict())  # the first call and one warm-up call
        walls = [worker.ask("run")["wall_s"] for _ in range(steps - WARMUP_STEPS)]
        memory = worker.ask("memory")
    finally:
        worker.stop()
    return {"steps": len(walls), "seconds": sum(walls),
            "examples_per_second": len(walls) * case.batch_size / sum(walls),
            "median_step_s": statistics.median(walls), **memory}


def markdown(results: dict) -> str:
    lines = ["# run_pretraining.py against the benchmark's training step", "",
             "Examples/s of `run_pretraining.py` (real TFRecords, its whole loop, after "
             f"{WARMUP_STEPS} warm-up steps) and of the benchmark's training step (the same model, "
             "batch and step, timed call by call), alternated round by round; ratio = the "
             "script's / the step's in each round (median, min-max); the commands follow each "
             "table.", ""]
    for label, machine in sorted(results.get("machines", {}).items()):
        lines += [f"## {label}", "",
                  "| case | rounds | steps timed | script examples/s | step examples/s | ratio |",
                  "|---|---|---|---|---|---|"]
        for key, case in sorted(machine["cases"].items()):
            rounds = case["rounds"]
            ratios = sorted(r["script"]["examples_per_second"] / r["step"]["examples_per_second"]
                            for r in rounds)
            script = statistics.median(r["script"]["examples_per_second"] for r in rounds)
            step = statistics.median(r["step"]["examples_per_second"] for r in rounds)
            lines.append(f"| {key} | {len(rounds)} | {rounds[0]['script']['steps']} | "
                         f"{script:.2f} | {step:.2f} | {statistics.median(ratios):.3f} "
                         f"({ratios[0]:.3f}-{ratios[-1]:.3f}) |")
        lines += [""] + [f"- {key}: `{case['command']}`" for key, case in
                         sorted(machine["cases"].items())] + [""]
    return "\n".join(lines)


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    flags.DEFINE_enum("model", "bert_base", sorted(MODEL_SIZES), "The model's size.")
    flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "float32, or mixed bfloat16.")
    flags.DEFINE_integer("steps", 12, f"Training steps of each run, the first {WARMUP_STEPS} "
                         "untimed.")
    flags.DEFINE_integer("rounds", 2, "Rounds, each a run of the script and one of the step.")
    flags.DEFINE_string("work_dir", "/tmp/bert_script_throughput",
                        "Where the pretraining records, the config and the runs go.")
    define_output_dir_flag("script_throughput", "script_throughput.json and .md")
    define_shared_data_flag()


def main(argv: list[str]) -> None:
    del argv
    if FLAGS.steps < WARMUP_STEPS + 2:
        raise app.UsageError(f"--steps must be at least {WARMUP_STEPS + 2}")
    case = Case(ModelSize(FLAGS.model, *MODEL_SIZES[FLAGS.model]), FLAGS.dtype, "train",
                BATCH_SIZE, SEQ_LENGTH)
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    records = pretraining_records(FLAGS.shared_data, FLAGS.work_dir)
    config_file = bert_config_file(case.model, FLAGS.work_dir)
    report = os.path.join(FLAGS.output_dir, "script_throughput")
    results = read_json(report + ".json", {})
    machine = machine_description()
    label = machine_label(machine)
    rounds = []
    for index in range(1, FLAGS.rounds + 1):
        load = os.getloadavg()[0]
        with tempfile.TemporaryDirectory(prefix="bert_script_") as scratch:
            script = run_script(case, FLAGS.steps, records, config_file, scratch)
            step = run_step(case, FLAGS.steps, scratch)
        rounds.append({"script": script, "step": step, "load_average": [load, os.getloadavg()[0]]})
        log(f"round {index}/{FLAGS.rounds} {case.key}: script "
            f"{script['examples_per_second']:.2f} examples/s, step "
            f"{step['examples_per_second']:.2f}, ratio "
            f"{script['examples_per_second'] / step['examples_per_second']:.3f}")
    table = results.setdefault("machines", {}).setdefault(label, {"machine": machine, "cases": {}})
    table["cases"][case.key] = {"command": " ".join(["python -m bench.speed.script_throughput",
                                                     *sys.argv[1:]]), "rounds": rounds}
    write_report(report, results, markdown(results), sort_keys=True)
    log(f"wrote {report}.json")


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
