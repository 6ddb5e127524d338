"""Dev scored while training: every N steps or every epoch, the best model kept, early stopping.

An `EvaluationPlan` says when to score and by which result. At each of those steps
`PeriodicEvaluation` has the task score the model (its `evaluate`, which writes
`eval_results_step_N.txt`, or `eval_results_epoch_N.txt` at an epoch's end), records the results
in `train_log.jsonl` and TensorBoard (`eval/`), writes the model to `best/` (the task's saver: the
original's checkpoint format) when it is the best so far, and counts the scorings without
improvement; after `patience` of them training stops. Its state is a file of the output folder
(`evaluation_state.json`), written after each scoring, so that a run killed and rerun scores the
same steps, keeps the same best and the same count, and a run that stopped early stays stopped.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from typing import Callable, Sequence

from absl import logging

from training.evaluation import write_eval_summaries
from training.step_log import STEP_LOG_FILE
from utils.output_files import replaced_folder, write_eval_results, write_text_atomically

STATE_FILE = "evaluation_state.json"
BEST_DIR = "best"


@dataclasses.dataclass(frozen=True)
class EvaluationPlan:
    """When dev is scored during training, by which result, and how long without improvement.

    Attributes:
        every_steps: score every this many steps (None: not by steps).
        every_epoch: score at the end of each epoch.
        metric: the key of the results the best model is chosen by (highest wins; lowest for a
            loss or an error: `lower_is_better`).
        patience: stop after this many scorings in a row without improvement (None: never).
    """

    every_steps: int | None = None
    every_epoch: bool = False
    metric: str = ""
    patience: int | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.every_steps) or self.every_epoch

    @property
    def lower_is_better(self) -> bool:
        return self.metric.endswith(("loss", "mse"))

    def check(self) -> None:
        """Raises ValueError for a step count or patience below 1, or patience without a plan."""
        if self.every_steps is not None and self.every_steps < 1:
            raise ValueError(f"--eval_every_steps={self.every_steps} must be at least 1")
        if self.patience is not None:
            if self.patience < 1:
                raise ValueError(f"--early_stopping_patience={self.patience} must be at least 1")
            if not self.enabled:
                raise ValueError("--early_stopping_patience needs --eval_every_steps or "
                                 "--eval_every_epoch (the scorings it counts)")

    def steps(self, num_train_steps: int, epoch_ends: Sequence[int]) -> list[int]:
        """The steps scored: multiples of `every_steps`, the epochs' ends, and the last step."""
        found = set(epoch_ends) if self.every_epoch else set()
        if self.every_steps:
            found.update(range(self.every_steps, num_train_steps + 1, self.every_steps))
        found.add(num_train_steps)
        return sorted(step for step in found if 0 < step <= num_train_steps)


@dataclasses.dataclass
class EvaluationState:
    """What the scorings so far decided, as `evaluation_state.json` keeps it."""

    scored: dict[int, float] = dataclasses.field(default_factory=dict)
    best_step: int | None = None
    best_value: float | None = None
    without_improvement: int = 0
    stopped_at: int | None = None

    @classmethod
    def load(cls, output_dir: str) -> "EvaluationState":
        path = os.path.join(output_dir, STATE_FILE)
        if not os.path.isfile(path):
            return cls()
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
        return cls(scored={int(step): value for step, value in values["scored"].items()},
                   best_step=values["best_step"], best_value=values["best_value"],
                   without_improvement=values["without_improvement"],
                   stopped_at=values["stopped_at"])

    def save(self, output_dir: str) -> None:
        write_text_atomically(os.path.join(output_dir, STATE_FILE),
                              json.dumps(dataclasses.asdict(self), indent=2) + "\n")


def _improves(value: float, best: float | None, lower_is_better: bool) -> bool:
    if best is None or (isinstance(best, float) and math.isnan(best)):
        return not math.isnan(value)
    return value < best if lower_is_better else value > best


class PeriodicEvaluation:
    """Scores a model at the plan's steps, keeps the best and decides when to stop.

    Args:
        plan: when and by what to score.
        evaluate: `evaluate(model, global_step, suffix)` scores dev and writes
            `eval_results{suffix}.txt`; returns the results, `plan.metric` among them.
        save: `save(trained, folder)` writes a model into a folder (the task's saver).
        output_dir: the run's folder (state, `best/`, `eval/`, `train_log.jsonl`).
        epoch_ends: the global step at each epoch's end, for the files' names.
    """

    def __init__(self, plan: EvaluationPlan, evaluate: Callable[..., dict],
                 save: Callable[..., object], output_dir: str, epoch_ends: Sequence[int] = ()):
        self.plan = plan
        self.evaluate = evaluate
        self.save = save
        self.output_dir = output_dir
        self.epoch_ends = list(epoch_ends)
        self.state = EvaluationState.load(output_dir)

    def stops(self, num_train_steps: int) -> list[int]:
        """The steps at which training pauses to score (none past an early stop)."""
        steps = self.plan.steps(num_train_steps, self.epoch_ends)
        if self.state.stopped_at is not None:
            steps = [step for step in steps if step <= self.state.stopped_at] or \
                [self.state.stopped_at]
        return steps

    @property
    def stopped(self) -> bool:
        return self.state.stopped_at is not None

    def suffix(self, step: int) -> str:
        if self.plan.every_epoch and step in self.epoch_ends:
            return f"_epoch_{self.epoch_ends.index(step) + 1}"
        return f"_step_{step}"

    def __call__(self, trained, step: int) -> bool:
        """Scores the model at `step` unless that step was scored already; returns whether
        training stops here."""
        if step in self.state.scored or self.stopped:
            return self.stopped
        results = self.evaluate(trained.model, step, self.suffix(step))
        if self.plan.metric not in results:
            raise ValueError(f"--metric_for_best={self.plan.metric} is not among the results of "
                             f"the evaluation: {', '.join(sorted(results))}")
        value = float(results[self.plan.metric])
        _log_results(self.output_dir, step, results)
        state = self.state
        if _improves(value, state.best_value, self.plan.lower_is_better):
            with replaced_folder(os.path.join(self.output_dir, BEST_DIR)) as folder:
                self.save(trained, folder)
                write_eval_results(os.path.join(folder, "eval_results.txt"), results)
            logging.info("step %d: best %s so far (%s); written to %s/", step, self.plan.metric,
                         value, BEST_DIR)
            state.best_step, state.best_value, state.without_improvement = step, value, 0
        else:
            state.without_improvement += 1
            logging.info("step %d: %s %s, no better than %s at step %d (%d scoring(s) without "
                         "improvement)", step, self.plan.metric, value, state.best_value,
                         state.best_step, state.without_improvement)
        state.scored[step] = value
        if self.plan.patience and state.without_improvement >= self.plan.patience:
            state.stopped_at = step
            logging.info("early stopping at step %d: %s has not improved in %d scorings; the "
                         "best, %s at step %d, is in %s/", step, self.plan.metric,
                         self.plan.patience, state.best_value, state.best_step, BEST_DIR)
        state.save(self.output_dir)
        return self.stopped


def _log_results(output_dir: str, step: int, results: dict) -> None:
    """The results in train_log.jsonl (`{"step", "eval": {...}}`) and TensorBoard's `eval/`."""
    shown = {key: value for key, value in results.items() if key != "global_step"}
    if "://" not in output_dir:
        with open(os.path.join(output_dir, STEP_LOG_FILE), "a", encoding="utf-8") as f:
            f.write(json.dumps({"step": step, "eval": shown,
                                "wall_time": round(time.time(), 3)}) + "\n")
    write_eval_summaries(os.path.join(output_dir, "eval"), step, shown)
