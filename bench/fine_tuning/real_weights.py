"""Fine-tunes a real pretrained BERT on real data with this project's scripts and with transformers.

The model is sentence-transformers' all-MiniLM-L6-v2 converted to Google's layout, and each run
is a script in its own process, as `bench/fine_tuning/runs.py` makes them.

Both sides run as their users run them: max_seq_length 128 for every task (SQuAD 384), this
project with its default padding and transformers with its collator's (each batch to its longest
sequence on both sides); a second timing row has both sides group training batches by length
(`--group_by_length`).

Two phases, each run in its own process per (task, framework), each framework's run right after
the other's:
- accuracy: every task's seeds (the runs may share the machine with other work):
  GLUE from ../shared/data/glue with `run_classifier.py` / `bench/fine_tuning/transformers_run.py`:
  MRPC and STS-B (official train/dev), RTE and CoLA (the re-split train, official dev), SST-2
  (every fortieth row of the re-split train, official dev); CoNLL-2003 NER with `run_ner.py` (the
  full train and dev sets);
- timing, on a quiet machine: one epoch of every task per framework, timed by the training loop
  (this project: its own examples/s log line at the last step; transformers: the loop's wall
  time), with random batches and with length-grouped ones; and SQuAD v1.1 dev (10,570
  questions): `run_squad.py --do_predict` after a short fine-tuning on one article, and
  transformers on the same fine-tuned weights (converted with `--to=hf`): prediction speed, and
  how often the two frameworks give the same answer. Timings are kept per kind of machine (CPU
  model, cores, ISA flags), one table each.

Useful-token model-FLOPs utilisation (MFU) of every timing run, on both sides: the FLOPs of the
epoch's real tokens (`bench/profile/useful_flops.py`: 6 x non-embedding parameters x real tokens,
plus attention over the real keys), counted from the task's training data with its tokenizer and
max_seq_length (`tokens` in the results), per second of the epoch, over the float32 matmul peak
measured as the speed benchmark measures it (`bench/speed/run_benchmarks.py`, `_Matmul` in
`bench/speed/worker.py`) at the start of the same command, on the same machine, and kept with each
timing run (`peak_gflops`): a peak measured on another host of the same kind need not be its.

Finished runs are kept in `finetune_results.json` and skipped when the command is run again, so
the benchmark can be stopped and resumed; `finetune_results.md` and `finetune_results.png` are
written from it after every run. Every run records the load average before and after it.

    pip install -r bench/requirements.txt
    python -m bench.fine_tuning.real_weights                  # everything, resumable
    python -m bench.fine_tuning.real_weights --phase=timing   # this machine's timings only
    python -m bench.fine_tuning.real_weights --phase=timing --tasks=cola,mrpc
    python -m bench.fine_tuning.real_weights --tasks=mrpc --seeds=1
    python -m bench.fine_tuning.real_weights --report_only
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import time

from absl import flags

from bench.fine_tuning import report
from bench.fine_tuning.runs import (MODEL_SIZE, TASKS, FineTuneTask, bert_dir, hf_model_dir,
                                    prepare_data, real_token_counts, run_squad_this_project,
                                    run_squad_transformers, run_this_project, run_transformers)
from bench.support import (define_list_flag, define_output_dir_flag, define_report_only_flag,
                           define_shared_data_flag, log, machine_description, machine_label,
                           read_json, write_json)
from utils import entry_point

FLAGS = flags.FLAGS

FRAMEWORKS = ("this_project", "transformers")
TIMING = "timing"  # the seed field of a timing run
TIMING_GROUPED = "timing_grouped"  # of a timing run with length-grouped batches
TIMINGS = (TIMING, TIMING_GROUPED)


def plan(task_names: list[str], max_seeds: int | None, phase: str = "all"
         ) -> list[tuple[str, str, int | str]]:
    """(task, framework, seed) in running order: every task's first seed, then the extra seeds
    (phase "accuracy"); then the timing runs of every task (phase "timing", seed `TIMING`, then
    `TIMING_GROUPED` for the training tasks)."""
    runs = []
    if phase in ("all", "accuracy"):
        for seed_round in range(1, max(t.seeds for t in TASKS.values()) + 1):
            for name in task_names:
                seeds = min(TASKS[name].seeds, max_seeds or TASKS[name].seeds)
                if seed_round <= seeds:
                    runs += [(name, framework, seed_round) for framework in FRAMEWORKS]
    if phase in ("all", TIMING):
        runs += [(name, framework, TIMING) for name in task_names for framework in FRAMEWORKS]
        runs += [(name, framework, TIMING_GROUPED) for name in task_names
                 for framework in FRAMEWORKS if name != "squad_predict"]
    return runs


def run_key(task: str, framework: str, seed: int | str) -> str:
    return f"{task}/{framework}/{seed}"


def runs_table(results: dict, seed: int | str) -> dict:
    """Where a run's result is kept: accuracy runs in `runs`, timing runs per kind of machine."""
    if seed not in TIMINGS:
        return results["runs"]
    return machine_table(results)["runs"]


def machine_table(results: dict) -> dict:
    """This kind of machine's entry of `timing`: its description and timing runs."""
    machine = machine_description()
    timing = results.setdefault("timing", {})
    return timing.setdefault(machine_label(machine), {"machine": machine, "runs": {}})


def measure_peak() -> dict:
    """This machine's float32 matmul GFLOP/s, TensorFlow and PyTorch alternated in their own
    processes, as the speed benchmark measures it (`bench.speed.run_benchmarks.measure_peak`)."""
    import tempfile
    from bench.speed.run_benchmarks import Worker, measure_peak as alternated_peak
    scratch_dir = tempfile.mkdtemp(prefix="bert_peak_")
    load_before = os.getloadavg()[0]
    workers = [Worker(key, scratch_dir) for key in ("this_project", "transformers")]
    try:
        rows = alternated_peak(workers, ["float32"])
    finally:
        for worker in workers:
            worker.stop()
        shutil.rmtree(scratch_dir, ignore_errors=True)
    return {"rows": rows, "load_average": [load_before, os.getloadavg()[0]]}


def uncounted_tasks(results: dict) -> list[FineTuneTask]:
    """The training tasks without real-token counts at their max_seq_length in `tokens`."""
    counted = results.get("tokens", {})
    return [task for task in TASKS.values() if task.seeds and
            counted.get(task.name, {}).get("max_seq_length") != task.max_seq_length]


def add_token_counts(results: dict, data: dict, vocab_file: str) -> None:
    """Puts each uncounted training task's real-token counts in `tokens`."""
    counted = results.setdefault("tokens", {})
    for task in uncounted_tasks(results):
        counts = real_token_counts(task, data[task.name], vocab_file)
        counted[task.name] = {**dataclasses.asdict(counts), "max_seq_length": task.max_seq_length}
        log(f"{task.name}: {counts.sequences} training sequences, {counts.tokens} real tokens")


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    define_list_flag("tasks", list(TASKS), list(TASKS), "Tasks to run.")
    flags.DEFINE_integer("seeds", None, "At most this many seeds a task.")
    flags.DEFINE_enum("phase", "all", ["all", "accuracy", TIMING],
                      "The accuracy runs (seeds), this machine's timing runs, or both.")
    flags.DEFINE_string("work_dir", "/tmp/bert_finetune_bench",
                        "Model, data subsets and the runs' outputs and logs.")
    define_output_dir_flag("fine_tuning", "finetune_results.{json,md,png}")
    define_shared_data_flag()
    define_report_only_flag()


def main(argv: list[str]) -> None:
    del argv
    task_names = FLAGS.tasks
    results_path = os.path.join(FLAGS.output_dir, "finetune_results.json")
    results = read_json(results_path, {"runs": {}})
    drop_stale_runs(results)
    squad = runs_table(results, TIMING)
    if run_key("squad_predict", "transformers", TIMING) not in squad and not os.path.exists(
            os.path.join(_run_dir(FLAGS.work_dir, "squad_predict", "this_project", TIMING),
                         "output", "predictions.json")):
        # transformers predicts with this project's fine-tuned SQuAD model: make it again.
        squad.pop(run_key("squad_predict", "this_project", TIMING), None)
    todo = [run for run in plan(task_names, FLAGS.seeds, FLAGS.phase)
            if run_key(*run) not in runs_table(results, run[2])]
    if not FLAGS.report_only and todo:
        _run_all(todo, results, results_path)
    if uncounted_tasks(results):
        try:
            data = prepare_data(FLAGS.shared_data, FLAGS.work_dir)
        except FileNotFoundError as error:
            log(f"no real-token counts (no MFU figures) without the data: {error}")
        else:
            add_token_counts(results, data, os.path.join(hf_model_dir(), "vocab.txt"))
            write_json(results_path, results, sort_keys=True)
    report.write_report(results, TASKS, FLAGS.output_dir, MODEL_SIZE)
    log(f"report: {os.path.join(FLAGS.output_dir, 'finetune_results.md')}")


def drop_stale_runs(results: dict) -> None:
    """Forgets runs made at another max_seq_length than the task's (an earlier setup)."""
    tables = [results["runs"], *(t["runs"] for t in results.get("timing", {}).values())]
    for table in tables:
        for key in [k for k, run in table.items()
                    if run.get("max_seq_length") != TASKS[k.split("/")[0]].max_seq_length]:
            del table[key]


def _run_dir(work_dir: str, task_name: str, framework: str, seed: int | str) -> str:
    return os.path.join(work_dir, "runs", task_name, framework, str(seed))


def _run_one(task_name: str, framework: str, seed: int | str, run_dir: str,
             models: tuple[str, str], data: dict) -> dict:
    hf_dir, bert = models
    task = TASKS[task_name]
    if task_name == "squad_predict" and framework == "this_project":
        return run_squad_this_project(task, bert, data, run_dir)
    if task_name == "squad_predict":
        this_run_dir = _run_dir(FLAGS.work_dir, task_name, "this_project", seed)
        return run_squad_transformers(task, bert, data, run_dir, this_run_dir)
    grouped = seed == TIMING_GROUPED
    if seed in TIMINGS:
        task, seed = dataclasses.replace(task, num_epochs=1), 1
    if framework == "this_project":
        return run_this_project(task, seed, bert, data, run_dir, grouped)
    return run_transformers(task, seed, hf_dir, data, run_dir, grouped)


def _run_all(todo: list[tuple[str, str, int | str]], results: dict,
             results_path: str) -> None:
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    hf_dir = hf_model_dir()
    models = hf_dir, bert_dir(FLAGS.work_dir, hf_dir)
    data = prepare_data(FLAGS.shared_data, FLAGS.work_dir)
    results.setdefault("machine", machine_description())
    log(f"{len(todo)} runs to do; model {models[1]}")
    peak = None
    if any(seed in TIMINGS for _, _, seed in todo):
        log("measuring this machine's float32 matmul peak (for the timing runs' MFU)")
        peak = measure_peak()
    start = time.monotonic()
    for index, (task_name, framework, seed) in enumerate(todo, start=1):
        run_dir = _run_dir(FLAGS.work_dir, task_name, framework, seed)
        shutil.rmtree(run_dir, ignore_errors=True)  # an interrupted run starts again, timed whole
        os.makedirs(run_dir)
        load_before = os.getloadavg()[0]
        result = _run_one(task_name, framework, seed, run_dir, models, data)
        machine = machine_description()
        result.update(load_average=[load_before, os.getloadavg()[0]], cpu=machine["cpu"],
                      isa=machine["isa"], max_seq_length=TASKS[task_name].max_seq_length)
        if seed in TIMINGS:
            result.update(peak_gflops=report.peak_gflops(peak["rows"]),
                          peak_load_average=peak["load_average"])
        runs_table(results, seed)[run_key(task_name, framework, seed)] = result
        write_json(results_path, results, sort_keys=True)
        report.write_report(results, TASKS, FLAGS.output_dir, MODEL_SIZE)
        elapsed = time.monotonic() - start
        shown = ", ".join(f"{m} {result[m]:.4f}" for m in TASKS[task_name].metrics if m in result)
        log(f"{index}/{len(todo)} {run_key(task_name, framework, seed)}: {shown}, "
             f"{result['wall_seconds']:.0f} s; elapsed {elapsed / 60:.1f} min, ETA "
             f"{elapsed / index * (len(todo) - index) / 60:.1f} min")


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
