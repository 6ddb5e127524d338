"""The report of a fine-tuning selection (`selection.grid`): `selection.json` and `selection.md`.

The JSON holds every run's dev results, the mean and sample standard deviation of each result per
setting, the rule, the chosen run and where its test predictions are; the Markdown file is written
from it. Numbers that are not numbers (a correlation of constant predictions) are `null`.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from selection.grid import RULE, Grid, Run, Setting, mean_sd

# Keys of eval_results.txt left out of the tables: `loss` repeats `eval_loss`.
_NOT_SHOWN = ("loss", "global_step")


def result_keys(results: Sequence[tuple[Run, dict[str, float]]], metric: str) -> list[str]:
    """The dev results to show: the task's metric first, then the other `eval_*` results."""
    keys = {key for _, values in results for key in values if key not in _NOT_SHOWN}
    return [metric] + sorted(keys - {metric})


def build_report(task_name: str, metric: str, grid: Grid,
                 results: Sequence[tuple[Run, dict[str, float]]],
                 chosen: tuple[Run, dict[str, float]] | None, run_dirs: dict[str, str],
                 predictions: dict[str, Any] | None) -> dict[str, Any]:
    """The report as a JSON object.

    Args:
        task_name: the task.
        metric: the result the choice is made on (`selection.grid.main_metric`).
        grid: the grid; its runs give the order of the tables.
        results: (run, dev results) of the finished runs.
        chosen: `selection.grid.choose` of `results`.
        run_dirs: each run's folder, by run name.
        predictions: {"output_dir", "files"} of the chosen model's test predictions, {"note"}
            when there are none to make, None while the runs are not all finished.
    """
    keys = result_keys(results, metric)
    report = {
        "task": task_name, "metric": metric, "rule": RULE.format(metric=metric),
        "grid": {"learning_rates": list(grid.learning_rates),
                 "batch_sizes": list(grid.batch_sizes), "epochs": list(grid.epochs),
                 "seeds": list(grid.seeds)},
        "runs_finished": len(results), "runs_in_grid": len(grid.runs()),
        "runs": [{"name": run.name, **_setting_json(run.setting), "seed": run.seed,
                  "output_dir": run_dirs[run.name], "results": _numbers(values)}
                 for run, values in results],
        "settings": _settings(results, keys, metric),
        "chosen": None, "predictions": predictions,
    }
    if chosen is not None:
        run, values = chosen
        report["chosen"] = {"run": run.name, **_setting_json(run.setting), "seed": run.seed,
                            metric: _number(values[metric]),
                            "model": f"{run_dirs[run.name]}/model.ckpt"}
    return report


def _setting_json(setting: Setting) -> dict[str, Any]:
    return {"learning_rate": setting.learning_rate, "batch_size": setting.batch_size,
            "epochs": setting.epochs}


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value


def _numbers(values: dict[str, float]) -> dict[str, float | None]:
    return {key: _number(value) for key, value in sorted(values.items())}


def _settings(results, keys: list[str], metric: str) -> list[dict[str, Any]]:
    """Per setting, in the grid's order: runs, and the mean and sd of each result over seeds."""
    by_setting: dict[Setting, list[dict[str, float]]] = {}
    for run, values in results:
        by_setting.setdefault(run.setting, []).append(values)
    summaries = []
    for setting, runs in by_setting.items():
        summary = {**_setting_json(setting), "runs": len(runs), "mean": {}, "sd": {}}
        for key in keys:
            values = [v[key] for v in runs if key in v and not math.isnan(v[key])]
            mean, sd = mean_sd(values) if values else (math.nan, None)
            summary["mean"][key], summary["sd"][key] = _number(mean), sd
        summary[f"best_{metric}"] = _number(max((v.get(metric, math.nan) for v in runs),
                                                key=lambda x: -math.inf if math.isnan(x) else x))
        summaries.append(summary)
    return summaries


def _format(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _mean_sd(mean: float | None, sd: float | None) -> str:
    return _format(mean) if sd is None else f"{_format(mean)} ± {sd:.4f}"


def report_markdown(report: dict[str, Any]) -> str:
    """`selection.md`: the rule, the choice, the means per setting and every run."""
    metric = report["metric"]
    keys = [metric] + sorted({k for run in report["runs"] for k in run["results"]
                              if k not in _NOT_SHOWN and k != metric})
    lines = [f"# Fine-tuning selection: {report['task']}", "",
             f"Rule: {report['rule']}", "",
             f"Runs finished: {report['runs_finished']} of {report['runs_in_grid']}"
             + ("" if report["runs_finished"] == report["runs_in_grid"]
                else " (the choice is among those so far)") + ".", ""]
    lines += _chosen_lines(report) + ["", "## Mean ± sd per setting", "",
                                      "Over the seeds; sd is the sample standard deviation "
                                      "(n - 1), none for a single run.", ""]
    lines += _table(["learning rate", "batch size", "epochs", "runs", *keys, f"best {metric}"],
                    [[f"{s['learning_rate']:g}", str(s["batch_size"]), f"{s['epochs']:g}",
                      str(s["runs"]), *(_mean_sd(s["mean"][k], s["sd"][k]) for k in keys),
                      _format(s[f"best_{metric}"])] for s in report["settings"]])
    lines += ["", "## Every run", ""]
    lines += _table(["run", "learning rate", "batch size", "epochs", "seed", *keys, "steps"],
                    [[f"`{r['name']}`", f"{r['learning_rate']:g}", str(r["batch_size"]),
                      f"{r['epochs']:g}", str(r["seed"]),
                      *(_format(r["results"].get(k)) for k in keys),
                      str(int(r["results"].get("global_step") or 0))] for r in report["runs"]])
    return "\n".join(lines) + "\n"


def _chosen_lines(report: dict[str, Any]) -> list[str]:
    chosen, metric = report["chosen"], report["metric"]
    if chosen is None:
        return ["Chosen: none yet (no finished run has a dev result that is a number)."]
    lines = [f"Chosen: learning rate {chosen['learning_rate']:g}, batch size "
             f"{chosen['batch_size']}, epochs {chosen['epochs']:g}: run `{chosen['run']}` "
             f"(seed {chosen['seed']}), dev {metric} {_format(chosen[metric])}.", "",
             f"Its model: `{chosen['model']}`."]
    predictions = report["predictions"]
    if predictions is None:
        return lines
    if "note" in predictions:
        return lines + ["", f"Test predictions: none ({predictions['note']})."]
    files = ", ".join(f"`{predictions['output_dir']}/{name}`" for name in predictions["files"])
    return lines + ["", f"Its test predictions (the GLUE server's submission file, and the "
                        f"class probabilities): {files}."]


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)] + \
        ["| " + " | ".join(row) + " |" for row in rows]
