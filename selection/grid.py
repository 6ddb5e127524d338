"""The paper's choice of fine-tuning hyper-parameters: a grid of runs, the best on dev kept.

BERT fine-tunes each GLUE task with batch size 32 for 3 epochs and keeps the learning rate among
5e-5, 4e-5, 3e-5 and 2e-5 that is best on dev; on small sets it also makes random restarts (other
seeds: other shuffles and classifier initialisations) and keeps the best on dev (Devlin et al.
2019, section 4.1 and appendix A.3). Here: the grid and its checks, each run's name and its
`run_classifier.py` flags, the record that tells a finished run from one of other settings, the
dev results read back, and the choice. `select_fine_tuning.py` runs the runs;
`selection.report` writes the report.
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Callable, Sequence

from data.classifier import glue_tasks
from tasks.classifier import MAIN_METRIC
from utils.json_files import read_json_object

# Each run's folder holds the settings it was started with, to tell a finished run of this grid
# from a run of other settings.
RECORD_FILE = "selection_run.json"
# run_classifier.py flags the selection sets itself: not to be passed after `--`.
SET_BY_SELECTION = ("task_name", "data_dir", "output_dir", "init_checkpoint", "learning_rate",
                    "train_batch_size", "num_train_epochs", "seed", "do_train", "do_eval",
                    "do_predict")
RULE = ("the paper's (Devlin et al. 2019, section 4.1 and appendix A.3): every setting is "
        "fine-tuned once per seed, and the run with the best dev {metric} is kept; its setting is "
        "the one chosen and its model makes the test predictions. Several seeds are the paper's "
        "random restarts: the best single run over all seeds and settings is kept, not the best "
        "mean. Ties go to the first run in the grid's order; a run whose {metric} is not a number "
        "is never chosen.")


@dataclasses.dataclass(frozen=True, order=True)
class Setting:
    """The hyper-parameters a selection compares."""

    learning_rate: float
    batch_size: int
    epochs: float

    def label(self) -> str:
        return (f"learning rate {self.learning_rate:g}, batch size {self.batch_size}, "
                f"epochs {self.epochs:g}")


@dataclasses.dataclass(frozen=True)
class Run:
    """One fine-tuning run of the grid: a setting and a seed."""

    setting: Setting
    seed: int

    @property
    def name(self) -> str:
        """The run's folder name, which says its setting: `lr5e-05_bs32_ep3_seed1`."""
        s = self.setting
        return f"lr{s.learning_rate:g}_bs{s.batch_size}_ep{s.epochs:g}_seed{self.seed}"

    def label(self) -> str:
        return f"{self.setting.label()}, seed {self.seed}"

    def flags(self) -> list[str]:
        """The run's own `run_classifier.py` flags."""
        s = self.setting
        return [f"--learning_rate={s.learning_rate!r}", f"--train_batch_size={s.batch_size}",
                f"--num_train_epochs={s.epochs!r}", f"--seed={self.seed}"]


@dataclasses.dataclass(frozen=True)
class Grid:
    """Every combination of the values, each once."""

    learning_rates: tuple[float, ...]
    batch_sizes: tuple[int, ...]
    epochs: tuple[float, ...]
    seeds: tuple[int, ...]

    def runs(self) -> list[Run]:
        """Every setting with the first seed, then with the second, ...: stopped halfway, the
        finished runs cover the most settings."""
        return [Run(Setting(lr, bs, ep), seed) for seed in self.seeds
                for lr in self.learning_rates for bs in self.batch_sizes for ep in self.epochs]


def parse_grid(learning_rates: Sequence[str], batch_sizes: Sequence[str],
               epochs: Sequence[str], seeds: Sequence[str]) -> Grid:
    """The grid of the flags' comma-separated values.

    Raises:
        ValueError: an empty list, a value listed twice, a learning rate or a number of epochs
            that is not a positive number, a batch size that is not an integer >= 1, a seed that
            is not an integer; the message names the flag and the value.
    """
    return Grid(_parse("--learning_rates", learning_rates, _positive_number),
                _parse("--batch_sizes", batch_sizes, lambda text: _integer(text, minimum=1)),
                _parse("--epochs", epochs, _positive_number),
                _parse("--seeds", seeds, _integer))


def _parse(flag: str, texts: Sequence[str], parse: Callable[[str], float | int]) -> tuple:
    if not texts:
        raise ValueError(f"{flag} is empty: give at least one value")
    values = []
    for text in texts:
        try:
            value = parse(text.strip())
        except ValueError as error:
            raise ValueError(f"{flag}: {text.strip()!r} {error}") from None
        if value in values:
            raise ValueError(f"{flag}: {text.strip()!r} is listed twice")
        values.append(value)
    return tuple(values)


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError("is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError("is not a positive number")
    return value


def _integer(text: str, minimum: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError("is not an integer") from None
    if minimum is not None and value < minimum:
        raise ValueError(f"is less than {minimum}")
    return value


def check_task(task_name: str, data_dir: str, language: str = "zh") -> glue_tasks.GlueTask:
    """The task, which must have train and dev splits whose files are in `data_dir`.

    Raises:
        ValueError: an unknown task, or one without a train or dev split.
        FileNotFoundError: a train or (non-optional) dev file is missing; the message names it.
    """
    task = glue_tasks.get_task(task_name)
    for role in ("train", "eval"):
        if not task.splits_for(role):
            raise ValueError(f"task {task.name!r} has no {role} split: a selection trains on "
                             "train and compares on dev")
        for spec in task.splits_for(role):
            path = glue_tasks.split_path(task, data_dir, spec.name, language)
            if not spec.optional and not os.path.isfile(path):
                raise FileNotFoundError(f"No {task.name} {spec.name} file: {path} does not exist")
    return task


def prediction_splits(task: glue_tasks.GlueTask, data_dir: str,
                language: str = "zh") -> tuple[list[glue_tasks.SplitSpec], str | None]:
    """The test splits whose files are there, and a note when there is none to predict."""
    if not task.splits_for("predict"):
        return [], f"task {task.name} has no test split: no test predictions"
    present = [spec for spec in task.splits_for("predict")
               if os.path.isfile(glue_tasks.split_path(task, data_dir, spec.name, language))]
    if not present:
        path = glue_tasks.split_path(task, data_dir, task.splits_for("predict")[0].name, language)
        return [], f"{path} does not exist: no test predictions"
    return present, None


def check_extra_flags(extra: Sequence[str]) -> None:
    """Flags for `run_classifier.py` (after `--`) must leave the grid's flags to the selection."""
    for i, arg in enumerate(extra):
        follows_a_flag = i and extra[i - 1].startswith("--") and "=" not in extra[i - 1]
        if not arg.startswith("--") and not follows_a_flag:
            raise ValueError(f"{arg!r} after --: run_classifier.py's flags go there, as "
                             "--name=value")
        name = arg.lstrip("-").split("=", 1)[0] if arg.startswith("--") else None
        for flag in (name, name[2:] if name and name.startswith("no") else None):
            if flag in SET_BY_SELECTION:
                raise ValueError(f"{arg} after --: the selection sets run_classifier.py's "
                                 f"--{flag} itself")


def extra_flag_value(extra: Sequence[str], name: str) -> str | None:
    """The value of `--name=value` (or `--name value`) among the flags after `--`; the last wins."""
    value = None
    for i, arg in enumerate(extra):
        if arg.startswith(f"--{name}="):
            value = arg.split("=", 1)[1]
        elif arg == f"--{name}" and i + 1 < len(extra):
            value = extra[i + 1]
    return value


def run_record(run: Run, task: glue_tasks.GlueTask, data_dir: str, init_checkpoint: str,
               extra: Sequence[str]) -> dict:
    """What a run's folder records of it (`RECORD_FILE`): everything its command depends on."""
    return {"task_name": task.name, "data_dir": _absolute(data_dir),
            "init_checkpoint": _absolute(init_checkpoint),
            "learning_rate": run.setting.learning_rate, "batch_size": run.setting.batch_size,
            "epochs": run.setting.epochs, "seed": run.seed, "extra_flags": list(extra)}


def _absolute(path: str) -> str:
    return path if "://" in path else os.path.abspath(path)


def run_state(run_dir: str, record: dict, task: glue_tasks.GlueTask) -> str:
    """"new" (no folder, or an empty one), "finished" (its dev results are there) or "started"
    (to resume: run_classifier.py resumes from the folder's newest checkpoint).

    Raises:
        ValueError: the folder holds a run of other settings, or files of no selection's run.
    """
    if not os.path.isdir(run_dir) or not os.listdir(run_dir):
        return "new"
    path = os.path.join(run_dir, RECORD_FILE)
    if not os.path.isfile(path):
        raise ValueError(f"{run_dir} holds files but no {RECORD_FILE}, so it is no run of this "
                         "selection; remove it or choose another --output_dir")
    recorded = read_json_object(path, "selection run record")
    differing = sorted(key for key in set(record) | set(recorded)
                       if record.get(key) != recorded.get(key))
    if differing:
        raise ValueError(f"{run_dir} holds a run of other settings (its {', '.join(differing)} "
                         "differ); remove it or choose another --output_dir")
    return "finished" if read_dev_results(task, run_dir) is not None else "started"


def main_metric(task: glue_tasks.GlueTask) -> str:
    """The dev result a task is judged by (`eval_accuracy`, `eval_mcc`, `eval_f1`, ...)."""
    return MAIN_METRIC[task.metric]


def parse_eval_results(text: str) -> dict[str, float]:
    """`key = value` lines of an `eval_results.txt`."""
    pairs = (line.split(" = ", 1) for line in text.splitlines() if " = " in line)
    return {key.strip(): float(value) for key, value in pairs}


def read_dev_results(task: glue_tasks.GlueTask, run_dir: str) -> dict[str, float] | None:
    """A finished run's dev results: `eval_results.txt`, and those of the task's other dev
    splits with their suffix (MNLI's `eval_accuracy_mismatched`); None when it has none yet."""
    results = {}
    for spec in task.splits_for("eval"):
        path = os.path.join(run_dir, f"eval_results{spec.results_suffix}.txt")
        if not os.path.isfile(path):
            if spec.results_suffix:
                continue
            return None
        with open(path, encoding="utf-8") as f:
            results.update({key + spec.results_suffix: value
                            for key, value in parse_eval_results(f.read()).items()})
    return results


def choose(results: Sequence[tuple[Run, dict[str, float]]], metric: str
           ) -> tuple[Run, dict[str, float]] | None:
    """The paper's rule (`RULE`): the run with the best `metric`; the first of equals; None when
    no run has a number."""
    best = None
    for run, values in results:
        value = values.get(metric, math.nan)
        if not math.isnan(value) and (best is None or value > best[1][metric]):
            best = (run, values)
    return best


def mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
    """The mean and the sample standard deviation (n - 1; None for one value)."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
