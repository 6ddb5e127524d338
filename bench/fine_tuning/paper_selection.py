"""The paper's fine-tuning selection on RTE and MRPC: this project's `select_fine_tuning.py` and
transformers run through the same grid, each choosing by the paper's rule.

The paper (section 4.1, appendix A.3) fine-tunes with batch 32 for 3 epochs and keeps the learning
rate among 5e-5, 4e-5, 3e-5 and 2e-5 that is best on dev, with random restarts on small sets. Here:
the fine-tuning benchmark's setup (`bench/fine_tuning/real_weights.py`: all-MiniLM-L6-v2 converted
to Google's layout, max_seq_length 128, 10% warm-up, weight decay 0.01, dropout 0.1), those four
rates, batch 32, 3 epochs, seeds 1 and 2 on RTE (two restarts) and seed 1 on MRPC:
- this project: `select_fine_tuning.py` over the grid with `--optimizer=adamw`, the original's,
  which the RTE table of `bench/fine_tuning/optimizers.py` favours (optimizer_results.md);
- transformers: `bench/fine_tuning/transformers_run.py` (PyTorch's AdamW) at every (rate, seed)
  of the grid.
Both sides choose by the rule `select_fine_tuning.py` applies (`selection.grid.RULE`): the best
dev run of all (RTE accuracy, MRPC F1), the first in the grid's order among equals.

Runs are resumable: select_fine_tuning.py skips its finished runs, and finished transformers runs
are kept in `paper_selection.json`. Accuracy runs may share the machine with other work.

    pip install -r bench/requirements.txt
    python -m bench.fine_tuning.paper_selection                 # RTE then MRPC, resumable
    python -m bench.fine_tuning.paper_selection --tasks=mrpc
    python -m bench.fine_tuning.paper_selection --report_only
"""
from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
from typing import Callable, Sequence

from absl import flags

from bench.fine_tuning import runs as finetune
from bench.support import (define_list_flag, define_output_dir_flag, define_report_only_flag,
                           define_shared_data_flag, log, machine_description, machine_label,
                           read_json, run_logged, write_report)
from utils import entry_point

FLAGS = flags.FLAGS

LEARNING_RATES = ("5e-5", "4e-5", "3e-5", "2e-5")
EPOCHS = 3
SEEDS = {"rte": (1, 2), "mrpc": (1,)}
METRIC = {"rte": "eval_accuracy", "mrpc": "eval_f1"}  # select_fine_tuning.py's for each task
OPTIMIZER = "adamw"
SIDES = (OPTIMIZER, "transformers")
SIDE_NAMES = {"adamw": "this project, `--optimizer=adamw` (original, no bias correction)",
              "adamw_bias_corrected": "this project, `--optimizer=adamw_bias_corrected`",
              "transformers": "transformers, PyTorch's AdamW"}

Table = dict[str, dict[str, float]]  # {learning rate: {seed: dev metric}}


def rate_name(rate: float | str) -> str:
    """A learning rate as the reports write it: 5e-5."""
    return f"{float(rate):.0e}".replace("e-0", "e-")


def run_selection(task: finetune.FineTuneTask, rates: Sequence[str], seeds: Sequence[int],
                  optimizer: str, bert: str, data_dir: str, output_dir: str,
                  optimizer_flags: Sequence[str] = ()) -> dict:
    """This project's grid by select_fine_tuning.py, its log beside `output_dir`; selection.json.
    `optimizer_flags` (e.g. --adam_epsilon) follow --optimizer."""
    os.makedirs(output_dir, exist_ok=True)
    run_logged([
        sys.executable, "select_fine_tuning.py", f"--task_name={task.name}",
        f"--data_dir={data_dir}", f"--init_checkpoint={bert}/bert_model.ckpt",
        f"--learning_rates={','.join(rates)}", f"--batch_sizes={finetune.TRAIN_BATCH_SIZE}",
        f"--epochs={task.num_epochs}", f"--seeds={','.join(map(str, seeds))}",
        f"--output_dir={output_dir}", "--", f"--optimizer={optimizer}", *optimizer_flags,
        "--do_lower_case=true", f"--max_seq_length={task.max_seq_length}",
        f"--eval_batch_size={finetune.EVAL_BATCH_SIZE}"], output_dir.rstrip("/") + ".log")
    with open(os.path.join(output_dir, "selection.json"), encoding="utf-8") as f:
        return json.load(f)


def metric_table(selection: dict, metric: str) -> Table:
    """{learning rate: {seed: dev `metric`}} of a selection.json."""
    table: Table = {}
    for run in selection["runs"]:
        table.setdefault(rate_name(run["learning_rate"]), {})[str(run["seed"])] = \
            run["results"][metric]
    return table


def run_transformers_grid(task: finetune.FineTuneTask, rates: Sequence[str],
                          seeds: Sequence[int], metric: str, data: dict, work_dir: str,
                          done: Table, save: Callable[[], None]) -> None:
    """transformers at every (rate, seed) not yet in `done`, each added to it and saved."""
    hf_dir = finetune.hf_model_dir()
    for rate in rates:
        for seed in seeds:
            if str(seed) in done.get(rate_name(rate), {}):
                continue
            run_dir = os.path.join(work_dir, "transformers", task.name, rate, str(seed))
            os.makedirs(run_dir, exist_ok=True)
            run = finetune.run_transformers(task, seed, hf_dir, data, run_dir,
                                            learning_rate=float(rate))
            done.setdefault(rate_name(rate), {})[str(seed)] = run[metric]
            log(f"transformers {task.name} {rate} seed {seed}: "
                f"{metric} {run[metric]:.4f}, {run['wall_seconds']:.0f} s")
            save()


def best_run(table: Table, rates: Sequence[str], seeds: Sequence[int]) -> dict | None:
    """The paper's rule over the grid (`selection.grid.RULE`): the run with the best dev metric,
    the first in the grid's order (learning rate, then seed) among equals."""
    best = None
    for rate in map(rate_name, rates):
        for seed in map(str, seeds):
            value = table.get(rate, {}).get(seed)
            if value is not None and (best is None or value > best["value"]):
                best = {"learning_rate": rate, "seed": int(seed), "value": value}
    return best


def summarize(task_name: str, tables: dict[str, Table]) -> dict:
    """Per side: mean and sd over seeds of each rate, and the run the paper's rule keeps."""
    return {side: {"rates": {rate: {"mean": statistics.mean(seeds.values()),
                                    "sd": statistics.stdev(seeds.values())
                                    if len(seeds) > 1 else 0.0}
                             for rate, seeds in table.items()},
                   "chosen": best_run(table, LEARNING_RATES, SEEDS[task_name])}
            for side, table in tables.items() if table}


def report_markdown(results: dict) -> str:
    """The Markdown report of paper_selection.json."""
    lines = ["# The paper's selection on RTE and MRPC", "",
             f"all-MiniLM-L6-v2, max_seq_length 128, batch {finetune.TRAIN_BATCH_SIZE}, "
             f"{EPOCHS} epochs, learning rates {', '.join(LEARNING_RATES)}; dev metric in "
             "points (RTE accuracy on its 277 dev examples, MRPC F1 on 408). The chosen run: "
             "the best dev run of all, the first in the grid's order among equals.", ""]
    for task_name, tables in results["tasks"].items():
        seeds = SEEDS[task_name]
        metric = METRIC[task_name].removeprefix("eval_")
        lines += [f"## {task_name.upper()} (dev {metric})", "",
                  "| side | learning rate | " + " | ".join(f"seed {s}" for s in seeds)
                  + " | mean |", "|---|---|" + "---|" * len(seeds) + "---|"]
        summary = results["summary"][task_name]
        for side in SIDES:
            for rate in LEARNING_RATES:
                values = tables.get(side, {}).get(rate)
                if not values:
                    continue
                cells = [f"{100 * values[str(s)]:.1f}" if str(s) in values else "" for s in seeds]
                lines.append(f"| {SIDE_NAMES[side]} | {rate} | " + " | ".join(cells)
                             + f" | {100 * summary[side]['rates'][rate]['mean']:.1f} |")
        lines += ["", "Chosen by the paper's rule:", ""]
        for side in SIDES:
            chosen = summary.get(side, {}).get("chosen")
            if chosen:
                done = sum(map(len, tables[side].values()))
                grid = len(LEARNING_RATES) * len(seeds)
                lines.append(f"- {SIDE_NAMES[side]}: learning rate {chosen['learning_rate']}, "
                             f"seed {chosen['seed']}, dev {metric} {100 * chosen['value']:.1f}"
                             + (f" (of {done} runs; {grid} in the grid)" if done < grid else ""))
        lines.append("")
    lines += [f"Machine: {machine_label(results['machine'])}.", ""]
    return "\n".join(lines)


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    flags.DEFINE_string("work_dir", "/tmp/bert_paper_selection_bench",
                        "Model, data and the runs' outputs and logs.")
    define_output_dir_flag("paper_selection", "paper_selection.{json,md}")
    define_list_flag("tasks", ["rte", "mrpc"], sorted(SEEDS), "Tasks to run, in this order.")
    define_shared_data_flag()
    define_report_only_flag()


def main(argv: list[str]) -> None:
    del argv
    task_names = FLAGS.tasks
    report = os.path.join(FLAGS.output_dir, "paper_selection")
    results = read_json(report + ".json", {"tasks": {}})

    def save() -> None:
        results["summary"] = {name: summarize(name, tables)
                              for name, tables in results["tasks"].items()}
        if not FLAGS.report_only or "machine" not in results:  # where the runs ran
            results["machine"] = machine_description()
        write_report(report, results, report_markdown(results), sort_keys=True)

    if not FLAGS.report_only:
        os.makedirs(FLAGS.work_dir, exist_ok=True)
        data = finetune.prepare_data(FLAGS.shared_data, FLAGS.work_dir)
        bert = finetune.bert_dir(FLAGS.work_dir, finetune.hf_model_dir())
        for name in task_names:
            task = dataclasses.replace(finetune.TASKS[name], num_epochs=EPOCHS)
            tables = results["tasks"].setdefault(name, {})
            log(f"{name}: select_fine_tuning.py over "
                f"{len(LEARNING_RATES) * len(SEEDS[name])} runs")
            selection = run_selection(task, LEARNING_RATES, SEEDS[name], OPTIMIZER, bert,
                                      data[name], os.path.join(FLAGS.work_dir, f"select_{name}"))
            tables[OPTIMIZER] = metric_table(selection, METRIC[name])
            save()
            run_transformers_grid(task, LEARNING_RATES, SEEDS[name], METRIC[name], data,
                                  FLAGS.work_dir, tables.setdefault("transformers", {}), save)
    save()
    log(f"report: {report}.md")


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
