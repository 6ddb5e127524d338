"""RTE fine-tuned with the original's optimizer and with the bias-corrected one, at two learning
rates, five seeds each, against transformers at the same rates.

The setup is the fine-tuning benchmark's (`bench/fine_tuning/real_weights.py`): all-MiniLM-L6-v2
converted to Google's layout, RTE's re-split train and official dev, max_seq_length 128, batch 32,
2 epochs, 10% warm-up, weight decay 0.01, dropout 0.1. Only the optimizer and the learning rate
change:
- this project: `select_fine_tuning.py` runs the grid (learning rates 5e-5 and 2e-5, seeds 1-5)
  once per `--optimizer`: `adamw` (the original's AdamWeightDecay, no bias correction, the
  default) and `adamw_bias_corrected`, and once more with `adamw_bias_corrected` at PyTorch's
  epsilon (`--adam_epsilon=1e-8`, against the original's 1e-6), and at either epsilon with
  transformers' schedule (`--learning_rate_decay=from_peak`: the decay starts at the peak, at the
  end of warm-up, instead of at step 0);
- transformers: `bench/fine_tuning/transformers_run.py` (PyTorch's AdamW, bias-corrected) at the
  same rates and seeds; at the fine-tuning benchmark's own rate (5e-5) its RTE runs are the same
  command, and are taken from `finetune_results.json` where it has them.

The report says for each rate whether the bias-corrected optimizer's mean dev accuracy (at each
epsilon) is within 1 point of transformers', and whether any of its seeds ends below the
majority class of the dev set. Runs are resumable: select_fine_tuning.py skips its finished runs,
and finished transformers runs are kept in `optimizer_results.json`. Accuracy runs may share the
machine with other work.

    pip install -r bench/requirements.txt
    python -m bench.fine_tuning.optimizers               # everything, resumable
    python -m bench.fine_tuning.optimizers --sides=adamw_bias_corrected_epsilon_1e-8
    python -m bench.fine_tuning.optimizers --report_only
    python -m bench.fine_tuning.optimizers --epochs=3 --sides=adamw_bias_corrected,transformers
        # the paper's 3 epochs: optimizer_results_3_epochs.{md,json}, runs in their own folders
    python -m bench.fine_tuning.optimizers --epochs=3 --learning_rates=2e-5 --seeds=6,7,8,9,10 \
        --sides=adamw_bias_corrected_epsilon_1e-8_from_peak,transformers
        # more seeds, added to those the report already holds
"""
from __future__ import annotations

import dataclasses
import json
import os
import statistics

from absl import flags

from bench.fine_tuning import runs as finetune
from bench.fine_tuning.paper_selection import (best_run, metric_table, rate_name, run_selection,
                                               run_transformers_grid)
from bench.fine_tuning.real_weights import run_key
from bench.support import (define_integers_flag, define_list_flag, define_output_dir_flag,
                           define_report_only_flag, define_shared_data_flag, log,
                           machine_description, machine_label, read_json, results_dir,
                           write_report)
from data.classifier import glue_tasks
from utils import entry_point

FLAGS = flags.FLAGS

TASK = finetune.TASKS["rte"]
LEARNING_RATES = ("5e-5", "2e-5")
SEEDS = (1, 2, 3, 4, 5)
# This project's sides: --optimizer and the flags after it.
OURS = {"adamw_bias_corrected": ("adamw_bias_corrected", ()),
        "adamw_bias_corrected_epsilon_1e-8": ("adamw_bias_corrected", ("--adam_epsilon=1e-8",)),
        "adamw_bias_corrected_from_peak": ("adamw_bias_corrected",
                                           ("--learning_rate_decay=from_peak",)),
        "adamw_bias_corrected_epsilon_1e-8_from_peak": (
            "adamw_bias_corrected", ("--adam_epsilon=1e-8", "--learning_rate_decay=from_peak")),
        "adamw": ("adamw", ())}
BIAS_CORRECTED = tuple(side for side, (optimizer, _) in OURS.items()
                       if optimizer == "adamw_bias_corrected")
SIDES = (*BIAS_CORRECTED, "transformers", "adamw")  # the table's rows
# Running order: the new optimizer and the lower rate, which no earlier benchmark measured, first.
STEPS = (("adamw_bias_corrected", LEARNING_RATES), ("transformers", ("2e-5",)),
         ("adamw", LEARNING_RATES), ("transformers", ("5e-5",)),
         ("adamw_bias_corrected_epsilon_1e-8", LEARNING_RATES),
         ("adamw_bias_corrected_epsilon_1e-8_from_peak", LEARNING_RATES),
         ("adamw_bias_corrected_from_peak", LEARNING_RATES))


def _side_name(optimizer: str, flags: tuple[str, ...]) -> str:
    """A side of this project as the report names it: its command-line flags."""
    name = f"this project, `{' '.join((f'--optimizer={optimizer}', *flags))}`"
    return name + (" (original, no bias correction)" if optimizer == "adamw" else "")


SIDE_NAMES = {**{side: _side_name(*OURS[side]) for side in OURS},
              "transformers": "transformers, PyTorch's AdamW (epsilon 1e-8)"}
TOLERANCE = 0.01  # of accuracy: the bias-corrected mean within 1 point of transformers'


def majority_class_accuracy(data_dir: str) -> float:
    """The dev accuracy of always answering the dev set's most frequent label."""
    examples = glue_tasks.read_examples(glue_tasks.get_task(TASK.name), data_dir, "dev")
    labels = [example.label for example in examples]
    return max(labels.count(label) for label in set(labels)) / len(labels)


def add_finetune_benchmark_runs(results: dict, path: str) -> None:
    """transformers' RTE runs at the fine-tuning benchmark's rate, from its results, where this
    benchmark has none of its own for a seed."""
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        runs = json.load(f)["runs"]
    done = results["accuracy"].setdefault("transformers", {}).setdefault(
        rate_name(finetune.LEARNING_RATE), {})
    for seed in SEEDS:
        run = runs.get(run_key(TASK.name, "transformers", seed))
        if str(seed) not in done and run and run.get("max_seq_length") == TASK.max_seq_length:
            done[str(seed)] = run["eval_accuracy"]


def summarize(accuracies: dict[str, dict[str, dict[str, float]]], majority: float) -> dict:
    """Mean, sd and lowest seed of every (side, rate), and the acceptance per rate."""
    summary: dict = {}
    for side, rates in accuracies.items():
        for rate, seeds in rates.items():
            values = list(seeds.values())
            summary.setdefault(side, {})[rate] = {
                "seeds": len(values), "mean": statistics.mean(values),
                "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
                "min": min(values),
                # The scripts write accuracies as float32: equal to the majority is not below it.
                "below_majority": sum(v < majority - 1e-6 for v in values)}
    # Each side against transformers over the seeds both ran.
    checks: dict = {}
    for side in BIAS_CORRECTED:
        for rate in map(rate_name, LEARNING_RATES):
            ours = accuracies.get(side, {}).get(rate, {})
            theirs = accuracies.get("transformers", {}).get(rate, {})
            common = [seed for seed in ours if seed in theirs]
            if common:
                gap = statistics.mean(ours[s] - theirs[s] for s in common)
                checks.setdefault(side, {})[rate] = {
                    "seeds": len(common), "mean_gap": gap,
                    "within_1_point": gap >= -TOLERANCE,
                    "no_seed_below_majority": summary[side][rate]["below_majority"] == 0}
    return {"summary": summary, "checks": checks, "chosen": {
        side: best_run(rates, LEARNING_RATES, seeds_of({side: rates}))
        for side, rates in accuracies.items() if rates}}


def seeds_of(accuracies: dict[str, dict[str, dict[str, float]]]) -> list[int]:
    """Every seed that some side ran at some rate, in order."""
    return sorted({int(seed) for rates in accuracies.values() for seeds in rates.values()
                   for seed in seeds})


def report_markdown(results: dict) -> str:
    """The Markdown report of optimizer_results.json."""
    majority = results["majority_class_accuracy"]
    epochs = results.get("epochs", TASK.num_epochs)
    all_seeds = seeds_of(results["accuracy"])
    lines = ["# RTE with and without Adam's bias correction", "",
             "all-MiniLM-L6-v2, RTE re-split train / official dev (277 examples; one answer is "
             f"0.36 points), max_seq_length {TASK.max_seq_length}, batch "
             f"{finetune.TRAIN_BATCH_SIZE}, {epochs} epochs. Dev accuracy in points, "
             f"mean ± sample sd over seeds; the majority class scores {100 * majority:.1f}.", "",
             "| optimizer | learning rate | " + " | ".join(f"seed {s}" for s in all_seeds)
             + " | mean ± sd | seeds below majority |",
             "|---|---|" + "---|" * len(all_seeds) + "---|---|"]
    for side in SIDES:
        for rate in map(rate_name, LEARNING_RATES):
            seeds = results["accuracy"].get(side, {}).get(rate)
            if not seeds:
                continue
            row = results["summary"][side][rate]
            cells = [f"{100 * seeds[str(s)]:.1f}" if str(s) in seeds else ""
                     for s in all_seeds]
            lines.append(f"| {SIDE_NAMES[side]} | {rate} | " + " | ".join(cells)
                         + f" | {100 * row['mean']:.1f} ± {100 * row['sd']:.1f} | "
                         f"{row['below_majority']} |")
    if epochs == TASK.num_epochs:
        lines += ["", "transformers at 5e-5: the fine-tuning benchmark's RTE runs "
                  "(`finetune_results.json`, the same command) where it has them."]
    lines += ["", "Bias-corrected optimizer against transformers (mean within 1 point over the "
              "seeds both ran, no seed below the majority class):", ""]
    for side, checks in results["checks"].items():
        for rate, check in checks.items():
            lines.append(f"- {SIDE_NAMES[side]}, {rate}: mean {100 * check['mean_gap']:+.1f} "
                         f"points over the {check['seeds']} seeds both ran; within 1 point: "
                         f"{'yes' if check['within_1_point'] else 'no'}; "
                         "no seed below the majority class: "
                         f"{'yes' if check['no_seed_below_majority'] else 'no'}")
    lines += ["", "The paper's selection over this grid (the best dev run of all, the rule "
              "`select_fine_tuning.py` applies):", ""]
    for side in SIDES:
        chosen = results["chosen"].get(side)
        if chosen:
            lines.append(f"- {SIDE_NAMES[side]}: learning rate {chosen['learning_rate']}, seed "
                         f"{chosen['seed']}, dev accuracy {100 * chosen['value']:.1f}")
    machines: dict[str, list[str]] = {}
    for side in SIDES:
        if side in results["machines"]:
            machines.setdefault(machine_label(results["machines"][side]), []).append(
                SIDE_NAMES[side])
    lines += [""] + [f"Machine of {', '.join(sides)}: {label}." for label, sides in
                     machines.items()] + [""]
    return "\n".join(lines)


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    flags.DEFINE_string("work_dir", "/tmp/bert_optimizer_bench",
                        "Model, data and the runs' outputs and logs.")
    define_output_dir_flag("optimizers", "optimizer_results*.{json,md}")
    flags.DEFINE_string("finetune_results", os.path.join(results_dir("fine_tuning"),
                                                         "finetune_results.json"),
                        "The fine-tuning benchmark's results, whose RTE runs of transformers at "
                        "5e-5 are taken where this benchmark has none of its own.")
    define_shared_data_flag()
    define_report_only_flag()
    define_list_flag("sides", list(SIDES), SIDES, "Sides to run.")
    flags.DEFINE_integer("epochs", TASK.num_epochs, "Training epochs of every run (the "
                         f"fine-tuning benchmark's {TASK.num_epochs}; the paper's GLUE runs take "
                         f"3). Other than {TASK.num_epochs}, the runs and the report are named by "
                         "it.", lower_bound=1)
    define_list_flag("learning_rates", list(LEARNING_RATES), LEARNING_RATES, "Rates to run.")
    define_integers_flag("seeds", SEEDS, "Seeds to run; their results join those the report "
                         "already holds.")


def main(argv: list[str]) -> None:
    del argv
    sides, rates, seeds = FLAGS.sides, FLAGS.learning_rates, [int(s) for s in FLAGS.seeds]
    task = dataclasses.replace(TASK, num_epochs=FLAGS.epochs)
    default_epochs = FLAGS.epochs == TASK.num_epochs
    name = "optimizer_results" if default_epochs else f"optimizer_results_{FLAGS.epochs}_epochs"
    runs_dir = FLAGS.work_dir if default_epochs else os.path.join(FLAGS.work_dir,
                                                                    f"{FLAGS.epochs}_epochs")
    report = os.path.join(FLAGS.output_dir, name)
    results = read_json(report + ".json", {"accuracy": {}})
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    data = finetune.prepare_data(FLAGS.shared_data, FLAGS.work_dir)
    results["majority_class_accuracy"] = majority_class_accuracy(data[TASK.name])
    results["epochs"] = FLAGS.epochs
    machines = results.setdefault("machines", {})  # each side's
    if default_epochs:
        add_finetune_benchmark_runs(results, FLAGS.finetune_results)

    def save() -> None:
        results.update(summarize(results["accuracy"], results["majority_class_accuracy"]))
        write_report(report, results, report_markdown(results), sort_keys=True)

    if not FLAGS.report_only:
        bert = finetune.bert_dir(FLAGS.work_dir, finetune.hf_model_dir())
        for side, step_rates in STEPS:
            step_rates = [rate for rate in step_rates if rate in rates]
            if side not in sides or not step_rates:
                continue
            if side in OURS:
                optimizer, flags = OURS[side]
                log(f"{SIDE_NAMES[side]}: select_fine_tuning.py over "
                    f"{len(step_rates) * len(seeds)} runs")
                selection = run_selection(task, step_rates, seeds, optimizer, bert,
                                          data[TASK.name],
                                          os.path.join(runs_dir, f"select_{side}"), flags)
                table = results["accuracy"].setdefault(side, {})
                for rate, by_seed in metric_table(selection, "eval_accuracy").items():
                    table.setdefault(rate, {}).update(by_seed)
                machines[side] = machine_description()
                save()
            else:
                machines.setdefault(side, machine_description())
                run_transformers_grid(task, step_rates, seeds, "eval_accuracy", data, runs_dir,
                                      results["accuracy"].setdefault(side, {}), save)
    save()
    log(f"report: {report}.md")


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
