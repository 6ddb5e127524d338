"""What every fine-tuning task module exposes, and the one order in which the scripts call it.

A task module (`classifier`, `ner`, `squad`, `swag`) is a `FineTunedTask`: its `Settings` (what a
run reads and writes besides the model: files, output folder, sequence length, batch sizes, and
the task's own settings), `read_splits` (every split a run needs, read and made into features
before anything is written, so that bad input fails first), `fine_tuning_task` (the model, its
head and loss), `train` (scoring dev while it trains, as the settings' `evaluation` plan says),
`evaluate` (dev, scored by the task's metric) and `predict` (the test files), and a `Text*` class
for new text. `fine_tune` is the recipe every fine-tuning script
runs: read, set up, train or restore, evaluate, predict.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

import keras
import tensorflow as tf

from data.tokenization import FullTokenizer
from modeling.config import BertConfig
from training import fine_tuning

# What a run does, as the original's --do_train, --do_eval and --do_predict say.
ROLES = ("train", "eval", "predict")


class FineTunedTask(Protocol):
    """The surface of a task module (modules satisfy it structurally)."""

    def read_splits(self, settings: Any, roles: Sequence[str],
                    tokenizer: FullTokenizer) -> Any:
        """Every split of `roles`, read and featurised; raises ValueError on bad input."""

    def fine_tuning_task(self, config: BertConfig, settings: Any,
                         splits: Any) -> fine_tuning.FineTuningTask:
        """The task model, its loss and how it is saved."""

    def train(self, run: fine_tuning.FineTuningRun, config: BertConfig, settings: Any,
              splits: Any) -> fine_tuning.Trained:
        """Fine-tunes on the train split; the chief saves the model."""

    def evaluate(self, model: keras.Model, settings: Any, splits: Any, global_step: int,
                 suffix: str = "") -> dict:
        """Scores the dev split(s), writes the results files; returns the results. With a
        `suffix` (a scoring during training), writes `eval_results{suffix}` alone."""

    def predict(self, model: keras.Model, settings: Any, splits: Any, global_step: int) -> None:
        """Writes the test split(s)' outputs."""


def roles_of(do_train: bool, do_eval: bool, do_predict: bool) -> list[str]:
    """The roles the `--do_*` flags ask for, in order."""
    return [role for role, wanted in zip(ROLES, (do_train, do_eval, do_predict)) if wanted]


def fine_tune(task: FineTunedTask, settings: Any, config: BertConfig, tokenizer: FullTokenizer,
              roles: Sequence[str], start_run: Callable[[], fine_tuning.FineTuningRun],
              output_dir: str) -> fine_tuning.Trained | None:
    """Reads the splits, starts the run, trains (or restores the fine-tuned model), then, on the
    chief, evaluates and predicts as `roles` ask.

    Without training, the model is restored before the output folder is made, so that a model
    that does not fit fails first. Returns the trained model (None on workers other than the
    chief).
    """
    scored = "train" in roles and settings.evaluation.enabled and "eval" not in roles
    splits = task.read_splits(settings, [*roles, "eval"] if scored else roles, tokenizer)
    run = start_run()
    trained = None if "train" in roles else fine_tuning.restore(
        run, task.fine_tuning_task(config, settings, splits))
    tf.io.gfile.makedirs(output_dir)
    if trained is None:
        trained = task.train(run, config, settings, splits)
    if not run.is_chief:
        return None
    if "eval" in roles:
        task.evaluate(trained.model, settings, splits, trained.global_step)
    if "predict" in roles:
        task.predict(trained.model, settings, splits, trained.global_step)
    return trained
