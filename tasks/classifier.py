"""Sentence (pair) classification: GLUE and XNLI (paper section 4.1), and new text.

Examples -> features (`data.classifier`), the classifier with its loss, dev scores
(`eval_results.txt`), test predictions (`test_results.tsv` and the GLUE server's submission file),
the best model of `--eval_every_epoch`, and `TextClassifier` for new text, which reads a text longer
than a sequence in overlapping windows (`data.features.text_windows`) and averages their answers.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import os
from typing import NamedTuple, Sequence

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from data import features as model_inputs, tokenization
from data.classifier import glue_tasks
from data.classifier.features import (InputExample, convert_examples_to_features,
                                      features_to_arrays)
from data.classifier.glue_submission import write_submission, write_test_results
from data.classifier.metrics import loss_metrics, task_metrics
from modeling import losses
from modeling.config import BertConfig
from modeling.task_models import BertClassifier
from tasks.text_model import TextModel, read_fine_tuned
from training import fine_tuning
from training.batching import ArrayExamples, Batching
from training.checkpointing import resumes
from training.evaluation import write_eval_summaries
from utils.output_files import write_eval_results, written_together

# The result each task is judged by (the BERT paper's Table 1), for --eval_every_epoch.
MAIN_METRIC = {glue_tasks.ACCURACY: "eval_accuracy", glue_tasks.MATTHEWS: "eval_mcc",
               glue_tasks.F1: "eval_f1", glue_tasks.CORRELATION: "eval_spearman"}
BEST_DIR = "best"


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a run reads and writes besides its model (run_classifier.py's flags)."""

    task: glue_tasks.GlueTask
    data_dir: str
    output_dir: str
    max_seq_length: int
    do_lower_case: bool
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    batching: Batching = Batching()
    xnli_language: str = "zh"
    # Score dev after each epoch and keep the best model in output_dir/best.
    eval_every_epoch: bool = False


class Split(NamedTuple):
    """A split read for the run: its spec, examples and features."""

    spec: glue_tasks.SplitSpec
    examples: list[InputExample]
    arrays: dict[str, np.ndarray]


def _check_roles(task: glue_tasks.GlueTask, roles: Sequence[str], eval_every_epoch: bool) -> None:
    """Each role ("train", "eval", "predict") has a split in the task."""
    for role in roles:
        if not task.splits_for(role):
            raise ValueError(f"--do_{role}: task {task.name!r} has no {role} split (its splits: "
                             f"{', '.join(s.name for s in task.splits)})")
    if eval_every_epoch and not ("train" in roles and task.splits_for("eval")):
        raise ValueError("--eval_every_epoch needs --do_train and a task with a dev split")


def read_splits(settings: Settings, roles: Sequence[str],
                tokenizer: tokenization.FullTokenizer) -> dict[str, Split]:
    """Reads and featurises every split of `roles` (and dev, for `eval_every_epoch`), so that
    bad input fails before anything is written (and each split is tokenised once).

    An optional split whose file is absent (MNLI's mismatched files) is left out, with a log line.
    """
    task = settings.task
    _check_roles(task, roles, settings.eval_every_epoch)
    if settings.eval_every_epoch and "eval" not in roles:
        roles = [*roles, "eval"]
    splits = {}
    for spec in (spec for role in roles for spec in task.splits_for(role)):
        path = glue_tasks.split_path(task, settings.data_dir, spec.name, settings.xnli_language)
        try:
            examples = glue_tasks.read_examples(task, settings.data_dir, spec.name,
                                                settings.xnli_language)
        except FileNotFoundError:
            if not spec.optional:
                raise
            logging.info("%s %s: %s does not exist; skipping that split", task.name, spec.name,
                         path)
            continue
        if not examples:
            raise ValueError(f"{path}: no {task.name} examples in the {spec.name} file (empty, "
                             "or only a header)")
        features = convert_examples_to_features(examples, task.label_list,
                                                settings.max_seq_length, tokenizer)
        splits[spec.name] = Split(spec, examples,
                                  features_to_arrays(features, task.is_regression))
    return splits


def fine_tuning_task(config: BertConfig, settings: Settings,
                     splits: dict[str, Split] | None = None) -> fine_tuning.FineTuningTask:
    """The classifier, its loss (cross-entropy, or squared error for regression) and its saver
    (the task's label names in `model_spec.json`)."""
    del splits  # a GLUE task's labels are its table row's
    task = settings.task
    loss = losses.mean_squared_error if task.is_regression else losses.mean_cross_entropy

    def loss_fn(outputs, batch, normaliser):
        return {"loss": loss(outputs["logits"], batch["label_ids"],
                             normaliser.global_batch_size(batch))}
    return fine_tuning.FineTuningTask(
        lambda: BertClassifier(config, task.num_labels), loss_fn,
        head=f"a classifier of {task.num_labels} labels: output_weights [{task.num_labels}, "
             f"{config.hidden_size}]",
        save=functools.partial(fine_tuning.save_fine_tuned, labels=task.labels or None,
                               do_lower_case=settings.do_lower_case))


def train(run: fine_tuning.FineTuningRun, config: BertConfig, settings: Settings,
          splits: dict[str, Split]) -> fine_tuning.Trained:
    """Fine-tunes on the train split; with `eval_every_epoch`, scores dev after each epoch and
    keeps the best model in `output_dir/best`."""
    task = settings.task
    fine_tuned = fine_tuning_task(config, settings)
    data = ArrayExamples(splits["train"].arrays, batching=settings.batching)
    steps = run.train_steps(data.num_examples)
    if not settings.eval_every_epoch:
        return fine_tuning.train(run, fine_tuned, data, steps)
    dev = splits[task.splits_for("eval")[0].name]
    best = [_previous_best(task, settings.output_dir) if resumes(settings.output_dir) else None]

    def at_epoch_end(trained: fine_tuning.Trained, epoch: int) -> None:
        if run.is_chief:
            best[0] = _evaluate_epoch(trained, fine_tuned, task, dev, epoch, best[0], settings)
    return fine_tuning.train(run, fine_tuned, data, steps, at_stop=at_epoch_end,
                             stops=_epoch_ends(data.num_examples, run))


def _epoch_ends(num_examples: int, run: fine_tuning.FineTuningRun) -> list[int]:
    """The global step at the end of each epoch (the last possibly partial one included)."""
    return sorted({fine_tuning.train_steps(num_examples, run.batch_size,
                                           min(epoch, run.num_train_epochs))
                   for epoch in range(1, math.ceil(run.num_train_epochs) + 1)})


def _previous_best(task: glue_tasks.GlueTask, output_dir: str) -> float | None:
    """The best dev result of an interrupted run with --eval_every_epoch, if it kept one."""
    path = os.path.join(output_dir, BEST_DIR, "eval_results.txt")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        results = dict(line.strip().split(" = ", 1) for line in f if " = " in line)
    return float(results[MAIN_METRIC[task.metric]])


def _evaluate_epoch(trained: fine_tuning.Trained, fine_tuned: fine_tuning.FineTuningTask,
                    task: glue_tasks.GlueTask, dev: Split, epoch: int, best: float | None,
                    settings: Settings) -> float | None:
    """Scores dev after an epoch and copies the model to output_dir/best when it is the best yet."""
    results = _evaluate_split(trained.model, dev, trained.global_step, settings, epoch)
    value = results[MAIN_METRIC[task.metric]]
    if best is None or math.isnan(best) or value > best:
        logging.info("epoch %d: best %s so far (%s); writing %s/", epoch,
                     MAIN_METRIC[task.metric], value, BEST_DIR)
        best_dir = os.path.join(settings.output_dir, BEST_DIR)
        fine_tuned.save(trained, best_dir)
        write_eval_results(os.path.join(best_dir, "eval_results.txt"), results)
        return value
    return best


def evaluate(model: keras.Model, settings: Settings, splits: dict[str, Split],
             global_step: int) -> dict:
    """Scores every dev split read (MNLI's matched and mismatched); returns the first's results."""
    found = [_evaluate_split(model, splits[spec.name], global_step, settings)
             for spec in settings.task.splits_for("eval") if spec.name in splits]
    return found[0]


def _evaluate_split(model: keras.Model, split: Split, global_step: int, settings: Settings,
                    epoch: int | None = None) -> dict:
    """Scores a dev split: `eval_results{suffix}.txt` (`..._epoch_N.txt` after an epoch) and
    TensorBoard scalars in `eval{suffix}/`."""
    task = settings.task
    suffix = split.spec.results_suffix
    epoch_suffix = "" if epoch is None else f"_epoch_{epoch}"
    path = os.path.join(settings.output_dir, f"eval_results{suffix}{epoch_suffix}.txt")
    logits = fine_tuning.predict(model, split.arrays, settings.eval_batch_size,
                                 settings.batching)["logits"]
    labels = split.arrays["label_ids"]
    if task.is_regression:
        per_example_loss = np.square(logits[:, 0] - labels)
    else:
        per_example_loss = losses.per_example_cross_entropy(logits, labels).numpy()
    results = {**task_metrics(task, logits, labels),
               **loss_metrics(per_example_loss, split.arrays["is_real_example"],
                              settings.eval_batch_size),
               "global_step": global_step}
    write_eval_results(path, results)
    write_eval_summaries(os.path.join(settings.output_dir, f"eval{suffix}"), global_step, results)
    logging.info("***** Eval results (%d examples) written to %s *****", len(split.examples),
                 path)
    for key in sorted(results):
        logging.info("  %s = %s", key, results[key])
    return results


def predict(model: keras.Model, settings: Settings, splits: dict[str, Split],
            global_step: int) -> None:
    """Predicts every test split read (`_predict_split`)."""
    del global_step
    for spec in settings.task.splits_for("predict"):
        if spec.name in splits:
            _predict_split(model, splits[spec.name], settings)


def _predict_split(model: keras.Model, split: Split, settings: Settings) -> None:
    """test_results{suffix}.tsv: class probabilities [N, num_labels], or scores for regression;
    and the GLUE server's submission file."""
    task = settings.task
    logits = fine_tuning.predict(model, split.arrays, settings.predict_batch_size,
                                 settings.batching)["logits"]
    outputs = logits[:, 0] if task.is_regression else tf.nn.softmax(logits, axis=-1).numpy()
    path = os.path.join(settings.output_dir, f"test_results{split.spec.results_suffix}.tsv")
    with written_together():
        write_test_results(path, outputs)
        submission = write_submission(settings.output_dir, task, split.spec, split.examples,
                                      outputs)
    logging.info("***** Predictions for %d examples: %s and %s *****", len(split.examples),
                 path, submission)


@dataclasses.dataclass(frozen=True)
class Classified:
    """A classifier's answer for one text: the most probable label and every label's
    probability; for a regression model (STS-B), `prediction` alone."""

    label: str | None
    probabilities: dict[str, float] | None
    prediction: float | None = None


class TextClassifier(TextModel):
    """A sentence (pair) classifier's answers, with the label names the model was saved with
    (`run_classifier.py` writes them into `model_spec.json`; without them, labels are their
    ids).

    A text longer than max_seq_length is read in overlapping windows `doc_stride` tokens apart
    (default half a window); a pair keeps its shorter side in every window. The answer is the
    mean of the windows' class probabilities (a regression model's: of their predictions). A
    text that fits is one sequence, as `run_classifier.py` builds it.
    """

    def __init__(self, model: keras.Model, tokenizer: tokenization.FullTokenizer,
                 labels: Sequence[str] | None = None, max_seq_length: int = 128,
                 batch_size: int = 32, batching: Batching = Batching(),
                 doc_stride: int | None = None):
        super().__init__(model, tokenizer, max_seq_length, batch_size, batching)
        self.model = model
        self.labels = tuple(labels) if labels else tuple(str(i) for i in range(model.num_labels))
        if len(self.labels) != model.num_labels:
            raise ValueError(f"{len(self.labels)} label names for a classifier of "
                             f"{model.num_labels} labels")
        if doc_stride is not None and doc_stride < 1:
            raise ValueError(f"doc_stride={doc_stride} must be at least 1")
        self.doc_stride = doc_stride

    @classmethod
    def from_checkpoint(cls, path: str, vocab_file: str | None = None,
                        bert_config_file: str | None = None, do_lower_case: bool | None = None,
                        **kwargs) -> "TextClassifier":
        """Reads a fine-tuned classifier (e.g. run_classifier.py's --output_dir).

        Raises:
            ValueError: the checkpoint holds no classifier head.
        """
        loaded, tokenizer = read_fine_tuned(
            path, "classifier", "classifier (output_weights [labels, H] at the root scope)",
            vocab_file, bert_config_file, do_lower_case)
        if loaded.labels is None and loaded.spec.num_labels > 1:
            logging.warning("%s has no label names (model_spec.json): labels are their ids",
                            path)
        return cls(loaded.model, tokenizer, loaded.labels, **kwargs)

    def __call__(self, texts: Sequence[str]) -> list[Classified]:
        found = [model_inputs.text_windows(text, self.tokenizer, self.max_seq_length,
                                           self.doc_stride) for text in texts]
        if not found:
            return []
        windowed = [len(sequences) for sequences in found if len(sequences) > 1]
        if windowed:
            logging.info("%d of %d texts were longer than max_seq_length=%d: read in %d windows, "
                         "their answers averaged", len(windowed), len(texts),
                         self.max_seq_length, sum(windowed))
        logits = self._predict(self.model, model_inputs.stack(
            [sequence for sequences in found for sequence in sequences]))["logits"]
        regression = self.model.num_labels == 1
        outputs = logits if regression else tf.nn.softmax(logits, axis=-1).numpy()
        owners = np.repeat(np.arange(len(texts)), [len(sequences) for sequences in found])
        sums = np.zeros((len(texts), outputs.shape[1]))
        np.add.at(sums, owners, outputs)
        means = sums / np.bincount(owners, minlength=len(texts))[:, None]   # [texts, K]
        if regression:
            return [Classified(None, None, float(value)) for value in means[:, 0]]
        return [Classified(self.labels[int(np.argmax(row))],
                           dict(zip(self.labels, (float(p) for p in row))))
                for row in means]
