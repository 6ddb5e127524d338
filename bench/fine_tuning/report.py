"""The fine-tuning benchmark's report: a markdown table and a bar plot with error bars."""
from __future__ import annotations

import os
import statistics

from bench.profile.useful_flops import (MINILM_L6_H384, EncoderSize, TokenCounts, training_flops,
                                        utilisation)
from bench.support import write_text

FRAMEWORKS = ("this_project", "transformers")
_NAMES = {"mrpc": "MRPC", "rte": "RTE", "stsb": "STS-B", "cola": "CoLA", "sst2": "SST-2",
          "conll2003": "CoNLL-2003 NER", "squad_predict": "SQuAD v1.1 dev (predict)"}
_METRIC_NAMES = {"eval_f1": "F1", "eval_accuracy": "accuracy", "eval_spearman": "Spearman",
                 "eval_pearson": "Pearson", "eval_mcc": "MCC", "exact_match": "EM", "f1": "F1"}


def task_runs(results: dict, task: str, framework: str) -> list[dict]:
    """The finished accuracy runs of one task and framework, in seed order."""
    prefix = f"{task}/{framework}/"
    return [run for key, run in sorted(results["runs"].items()) if key.startswith(prefix)]


def mean_sd(values: list[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (None for a single value)."""
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else None


def task_summary(results: dict, task) -> dict | None:
    """Per framework: the number of seeds and the mean and sd of each metric (in points); the
    verdict of the issue's metric rule. None until both frameworks have a run."""
    runs = {fw: task_runs(results, task.name, fw) for fw in FRAMEWORKS}
    if not all(runs.values()):
        return None
    summary = {"task": task, "frameworks": {
        fw: {"n": len(fw_runs), "metrics": {m: mean_sd([100 * r[m] for r in fw_runs])
                                            for m in task.metrics}}
        for fw, fw_runs in runs.items()}}
    ours, theirs = (summary["frameworks"][fw] for fw in FRAMEWORKS)
    judged = task.metrics[0]
    sds = [s for s in (ours["metrics"][judged][1], theirs["metrics"][judged][1]) if s]
    margin = max([1.0, *sds])
    summary["metric_ok"] = ours["metrics"][judged][0] >= theirs["metrics"][judged][0] - margin
    return summary


# The timing runs' kinds (their seed field), as the speed tables show them.
TIMING_ROWS = (("timing", "random"), ("timing_grouped", "by length"))


def speed_ratio(timing_runs: dict, task: str, kind: str = "timing") -> float | None:
    """transformers' seconds per epoch over this project's (above 1: this project is faster);
    None until both frameworks have a timing run of the task of that kind."""
    ours, theirs = (timing_runs.get(f"{task}/{fw}/{kind}") for fw in FRAMEWORKS)
    if ours is None or theirs is None:
        return None
    return theirs["seconds_per_epoch"] / ours["seconds_per_epoch"]


def peak_gflops(rows: list[dict]) -> float | None:
    """The float32 matmul peak of the speed benchmark's rows
    (`bench.speed.run_benchmarks.measure_peak`) over frameworks and shapes: the fastest call's
    GFLOP/s, or the rate from the calls' CPU time (every core to itself) where that is higher, as
    it is where other work shares the machine; None without float32 rows."""
    rates = [max(row["best_gflops"], row.get("cpu_gflops", 0.0))
             for row in rows if row["dtype"] == "float32"]
    return max(rates, default=None)


def epoch_examples(framework: str, sequences: int, batch_size: int = 32) -> int:
    """Examples one epoch trains on: this project takes the original's int(N / batch) steps of
    full batches, transformers' loop every example (its last batch partial)."""
    return sequences // batch_size * batch_size if framework == "this_project" else sequences


def useful_gflops(run: dict, framework: str, tokens: dict | None,
                  size: EncoderSize = MINILM_L6_H384) -> float | None:
    """The model FLOPs of the real tokens of the examples a timing run's epoch trained on (at
    the task's mean), per second of the epoch, in GFLOP/s; None without the task's counts."""
    if tokens is None:
        return None
    counts = TokenCounts(tokens["sequences"], tokens["tokens"], tokens["tokens_squared"])
    flops = training_flops(size, *counts.scaled(epoch_examples(framework, counts.sequences)))
    return flops / run["seconds_per_epoch"] / 1e9


def useful_mfu(run: dict, framework: str, tokens: dict | None,
               size: EncoderSize = MINILM_L6_H384) -> float | None:
    """Useful-token MFU of a timing run: `useful_gflops` over the peak measured with the run
    (None for runs without one)."""
    rate = useful_gflops(run, framework, tokens, size)
    peak = run.get("peak_gflops")
    return None if rate is None or peak is None else utilisation(rate * 1e9, 1.0, peak)


def _useful_cell(run: dict, framework: str, tokens: dict | None, size: EncoderSize) -> str:
    rate = useful_gflops(run, framework, tokens, size)
    mfu = useful_mfu(run, framework, tokens, size)
    if rate is None:
        return "-"
    return f"{rate:.0f}" + ("" if mfu is None else f" ({100 * mfu:.0f}%)")


def _metric_cell(value: tuple[float, float | None]) -> str:
    mean, sd = value
    return f"{mean:.1f}" if sd is None else f"{mean:.1f} ± {sd:.1f}"


def markdown(results: dict, tasks: dict, size: EncoderSize = MINILM_L6_H384) -> str:
    lines = ["# Fine-tuning a real pretrained BERT: this project against transformers", "",
             "## Dev metrics", "",
             "In points, mean ± sample sd over seeds (n = seeds per framework). Metric OK: this "
             "project's mean >= transformers' minus max(1 point, the larger sd).", "",
             "| task | metric | n | this project | transformers | metric OK |",
             "|---|---|---|---|---|---|"]
    for task in tasks.values():
        summary = task_summary(results, task) if task.seeds else None
        if summary is None:
            continue
        ours, theirs = (summary["frameworks"][fw] for fw in FRAMEWORKS)
        for index, metric in enumerate(task.metrics):
            verdict = ("yes" if summary["metric_ok"] else "**no**") if index == 0 else ""
            lines.append(
                f"| {_NAMES[task.name] if index == 0 else ''} | {_METRIC_NAMES[metric]} | "
                f"{ours['n']}/{theirs['n']} | {_metric_cell(ours['metrics'][metric])} | "
                f"{_metric_cell(theirs['metrics'][metric])} | {verdict} |")
    for label, timing in sorted(results.get("timing", {}).items()):
        if timing["runs"]:
            lines += _speed_lines(label, timing, tasks, results.get("tokens", {}), size)
    return "\n".join(lines) + "\n"


def _speed_lines(label: str, timing: dict, tasks: dict, tokens: dict,
                 size: EncoderSize) -> list[str]:
    versions = ", ".join(f"{k} {v}" for k, v in timing["machine"].get("versions", {}).items())
    peaks = sorted({f"{run['peak_gflops']:.0f}" for run in timing["runs"].values()
                    if run.get("peak_gflops")})
    mfu_note = ("Useful GFLOP/s: the model FLOPs of the epoch's real tokens "
                "(bench/profile/useful_flops.py) per second of the epoch; in brackets, "
                "useful-token MFU against the float32 matmul peak measured with the run (" +
                (", ".join(peaks) + " GFLOP/s" if peaks else "none with these runs") + ").")
    lines = ["", f"## Speed on {label}", "",
             f"One epoch of each task per framework, nothing else running; {versions}. Each "
             "batch padded to its longest sequence on both sides; batches random, or grouped "
             "by length on both sides (`--group_by_length`). Time per epoch of the training "
             "loop; ratio = transformers' time / this project's (above 1: this project is "
             f"faster). {mfu_note}", "",
             "| task | max_seq_length | batches | s/epoch this | s/epoch HF | examples/s this | "
             "examples/s HF | useful GFLOP/s this | useful GFLOP/s HF | speed ratio |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    runs = timing["runs"]
    for task in tasks.values():
        for kind, batches in TIMING_ROWS:
            ratio = None if task.name == "squad_predict" else speed_ratio(runs, task.name, kind)
            if ratio is None:
                continue
            ours, theirs = (runs[f"{task.name}/{fw}/{kind}"] for fw in FRAMEWORKS)
            useful = [_useful_cell(runs[f"{task.name}/{fw}/{kind}"], fw, tokens.get(task.name),
                                   size) for fw in FRAMEWORKS]
            lines.append(
                f"| {_NAMES[task.name]} | {task.max_seq_length} | {batches} | "
                f"{ours['seconds_per_epoch']:.0f} | {theirs['seconds_per_epoch']:.0f} | "
                f"{ours['examples_per_second']:.1f} | {theirs['examples_per_second']:.1f} | "
                f"{' | '.join(useful)} | {ratio:.2f}x |")
    return lines + _squad_lines(runs)


def _squad_lines(runs: dict) -> list[str]:
    ours, theirs = (runs.get(f"squad_predict/{fw}/timing") for fw in FRAMEWORKS)
    if ours is None or theirs is None:
        return []
    lines = ["", f"SQuAD v1.1 dev, {ours['questions']} questions, predicted with the same "
             "fine-tuned weights (one article of fine-tuning: the scores measure agreement and "
             f"speed, not quality). Same answer in {100 * theirs['same_answer_share']:.1f}% of "
             "the questions.", "",
             "| framework | questions/s | total s | features s | model s | answers s | EM | F1 |",
             "|---|---|---|---|---|---|---|---|"]
    for name, run in (("this project", ours), ("transformers", theirs)):
        lines.append(f"| {name} | {run['questions_per_second']:.1f} | {run['predict_seconds']:.0f} "
                     f"| {run['features_seconds']:.1f} | {run['model_seconds']:.1f} | "
                     f"{run['answers_seconds']:.1f} | {run['exact_match']:.1f} | "
                     f"{run['f1']:.1f} |")
    ratio = ours["questions_per_second"] / theirs["questions_per_second"]
    lines.append(f"\nSpeed ratio (this project's questions/s / transformers'): {ratio:.2f}x.")
    return lines


def plot(results: dict, tasks: dict, path: str) -> bool:
    """Bars with error bars: each task's judged metric per framework. False if nothing to plot."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    summaries = [s for s in (task_summary(results, t) for t in tasks.values() if t.seeds) if s]
    if not summaries:
        return False
    figure, axis = plt.subplots(figsize=(max(5, 1.6 * len(summaries)), 3.6))
    width = 0.38
    for offset, fw in enumerate(FRAMEWORKS):
        means, errors = [], []
        for summary in summaries:
            mean, sd = summary["frameworks"][fw]["metrics"][summary["task"].metrics[0]]
            means.append(mean)
            errors.append(sd or 0.0)
        axis.bar([i + (offset - 0.5) * width for i in range(len(summaries))], means, width,
                 yerr=errors, capsize=3, label=fw.replace("_", " "))
    axis.set_xticks(range(len(summaries)))
    axis.set_xticklabels([f"{_NAMES[s['task'].name]}\n{_METRIC_NAMES[s['task'].metrics[0]]}"
                          for s in summaries], fontsize=8)
    axis.set_ylabel("dev metric (points)")
    axis.set_title("all-MiniLM-L6-v2 fine-tuned: this project vs transformers")
    axis.legend(fontsize=8)
    figure.tight_layout()
    temp_path = f"{path}.{os.getpid()}.tmp.png"
    figure.savefig(temp_path, dpi=110)
    plt.close(figure)
    os.replace(temp_path, path)
    return True


def write_report(results: dict, tasks: dict, output_dir: str,
                 size: EncoderSize = MINILM_L6_H384) -> None:
    write_text(os.path.join(output_dir, "finetune_results.md"), markdown(results, tasks, size))
    plot(results, tasks, os.path.join(output_dir, "finetune_results.png"))
