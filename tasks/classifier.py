"""Sentence (pair) classification: GLUE and XNLI (paper section 4.1), a user's own files
(single-label, multi-label or regression), and new text.

Examples -> features (`data.classifier`), the classifier with its loss (cross-entropy, a sigmoid
cross-entropy per label, or squared error; class weights on request), dev scores
(`eval_results.txt`), test predictions (`test_results.tsv`, and the GLUE server's submission file
or, for one's own files, `predictions.jsonl`), and `TextClassifier` for new text, which reads a
text longer than a sequence in overlapping windows (`data.features.text_windows`) and averages
their answers.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from typing import NamedTuple, Sequence

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from data import features as model_inputs, tokenization
from data.classifier import glue_tasks, own_files
from data.classifier.features import (InputExample, convert_examples_to_features,
                                      features_to_arrays)
from data.classifier.glue_submission import write_submission, write_test_results
from data.classifier.metrics import confusion_matrix, loss_metrics, task_metrics
from data.classifier.predictions import (prediction_records, write_confusion_matrix,
                                         write_predictions_jsonl)
from modeling import losses
from modeling.config import BertConfig
from modeling.models.task_models import BertClassifier
from running.batching import ArrayExamples, Batching
from tasks.text_model import (LABEL_FILE, TextModel, read_fine_tuned, saved_labels,
                              write_labels)
from training import fine_tuning
from training.evaluation import write_eval_summaries
from training.periodic_evaluation import EvaluationPlan
from utils.output_files import write_eval_results, written_together

# The result each GLUE task is judged by (the BERT paper's Table 1), and each problem type of
# one's own files, for the best model kept during training.
MAIN_METRIC = {glue_tasks.ACCURACY: "eval_accuracy", glue_tasks.MATTHEWS: "eval_mcc",
               glue_tasks.F1: "eval_f1", glue_tasks.CORRELATION: "eval_spearman"}
OWN_MAIN_METRIC = {glue_tasks.SINGLE_LABEL: "eval_accuracy",
                   glue_tasks.MULTI_LABEL: "eval_f1_micro",
                   glue_tasks.REGRESSION: "eval_spearman"}
CLASS_WEIGHTS = ("balanced",)


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a run reads and writes besides its model (run_classifier.py's flags).

    Attributes:
        output_dir: where results, predictions and the model go.
        max_seq_length, do_lower_case: the sequences' length and the tokenizer's casing.
        task: a GLUE or XNLI task, read from `data_dir`; None with `files`.
        data_dir: the task's folder.
        files: one's own files instead of a task.
        init_checkpoint: without training, the fine-tuned model, beside which its labels are.
        eval_batch_size, predict_batch_size, batching: how the model is run.
        xnli_language: XNLI's language.
        class_weights: "balanced": each class weighted inversely to its frequency in training.
        multi_label_threshold: the probability from which a multi-label model predicts a label.
        evaluation: dev scored during training (`training.periodic_evaluation`); its metric,
            when not given, is the task's main one (`main_metric`).
    """

    output_dir: str
    max_seq_length: int
    do_lower_case: bool
    task: glue_tasks.GlueTask | None = None
    data_dir: str | None = None
    files: own_files.OwnFiles | None = None
    init_checkpoint: str | None = None
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    batching: Batching = Batching()
    xnli_language: str = "zh"
    class_weights: str | None = None
    multi_label_threshold: float = 0.5
    evaluation: EvaluationPlan = EvaluationPlan()

    def check(self) -> None:
        """Raises ValueError for settings that cannot go together."""
        if (self.task is None) == (self.files is None):
            raise ValueError("give either --task_name (a GLUE or XNLI task) or your own files "
                             "(--train_file, --dev_file, --test_file), not both")
        if self.class_weights not in (None, *CLASS_WEIGHTS):
            raise ValueError(f"--class_weights={self.class_weights}: one of {CLASS_WEIGHTS}")
        if self.class_weights and self.problem == glue_tasks.REGRESSION:
            raise ValueError("--class_weights: a regression task has no classes")
        if not 0.0 < self.multi_label_threshold < 1.0:
            raise ValueError(f"--multi_label_threshold={self.multi_label_threshold} must be "
                             "between 0 and 1")
        self.evaluation.check()

    @property
    def problem(self) -> str:
        return self.files.problem_type if self.files else self.task.problem


class Split(NamedTuple):
    """A split read for the run: its spec, examples and features."""

    spec: glue_tasks.SplitSpec
    examples: list[InputExample]
    arrays: dict[str, np.ndarray]


class Splits(NamedTuple):
    """The task of the run (GLUE's row, or one built from one's own files) and its splits by
    name."""

    task: glue_tasks.GlueTask
    by_name: dict[str, Split]

    def of(self, role: str) -> list[Split]:
        return [self.by_name[spec.name] for spec in self.task.splits_for(role)
                if spec.name in self.by_name]


def main_metric(settings: Settings, task: glue_tasks.GlueTask) -> str:
    """The result the best model is chosen by: the plan's, else the task's main one."""
    if settings.evaluation.metric:
        return settings.evaluation.metric
    if task.metric == glue_tasks.EVERY_METRIC:
        return OWN_MAIN_METRIC[task.problem]
    return MAIN_METRIC[task.metric]


def read_splits(settings: Settings, roles: Sequence[str],
                tokenizer: tokenization.FullTokenizer) -> Splits:
    """Reads and featurises every split of `roles`, so that bad input fails before anything is
    written (and each split is tokenised once).

    An optional split whose file is absent (MNLI's mismatched files) is left out, with a log line.
    """
    settings.check()
    task, examples = _own_examples(settings, roles) if settings.files else \
        _glue_examples(settings, roles)
    by_name = {}
    for spec, found in examples:
        features = convert_examples_to_features(found, task.label_list, settings.max_seq_length,
                                                tokenizer)
        by_name[spec.name] = Split(spec, found, features_to_arrays(features, task.is_regression))
    return Splits(task, by_name)


def _glue_examples(settings: Settings, roles: Sequence[str]):
    task = settings.task
    for role in roles:
        if not task.splits_for(role):
            raise ValueError(f"--do_{role}: task {task.name!r} has no {role} split (its splits: "
                             f"{', '.join(s.name for s in task.splits)})")
    found = []
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
        found.append((spec, examples))
    return task, found


def _own_examples(settings: Settings, roles: Sequence[str]):
    """The task row of one's own files and their examples; the labels are `--label_list`, else
    the training file's, else (without training) those saved beside the model."""
    files = settings.files
    for role in roles:
        if role not in files.paths:
            raise ValueError(f"--do_{role} needs --{own_files.ROLE_SPLITS[role]}_file")
    labels = files.label_list
    examples = {}
    if "train" in roles:
        examples["train"] = own_files.read_file(files, "train", labels)
        labels = labels or own_files.labels_of(examples["train"], files.problem_type)
    elif labels is None and files.problem_type != glue_tasks.REGRESSION:
        labels = _saved_labels(settings)
    labels = () if files.problem_type == glue_tasks.REGRESSION else tuple(labels)
    if files.problem_type == glue_tasks.SINGLE_LABEL and len(labels) < 2:
        raise ValueError(f"{files.paths.get('train', 'the model')}: a single-label task needs at "
                         f"least two labels, found {list(labels)}")
    if files.problem_type == glue_tasks.MULTI_LABEL and not labels:
        raise ValueError(f"{files.paths['train']}: no row has a label")
    for role in roles:
        if role != "train":
            examples[role] = own_files.read_file(files, role, labels)
    task = own_files.task_row(files, labels)
    return task, [(task.split(own_files.ROLE_SPLITS[role]), examples[role]) for role in roles]


def _saved_labels(settings: Settings) -> tuple[str, ...]:
    path = settings.init_checkpoint or settings.output_dir
    labels = saved_labels(path)
    if labels is None:
        raise FileNotFoundError(f"no {LABEL_FILE} beside {path}: without --do_train the labels "
                                "come from --label_list or the file the training run wrote "
                                "beside the model")
    return tuple(labels)


def class_weights(settings: Settings, splits: Splits) -> dict[str, np.ndarray] | None:
    """`balanced` weights of the training labels (scikit-learn's: n / (K * count)); for a
    multi-label task, each label's positive and negative term n / (2 * count); None unless
    asked for."""
    if not settings.class_weights:
        return None
    labels = splits.by_name["train"].arrays["label_ids"]
    n, num_labels = len(labels), splits.task.num_labels
    if splits.task.is_multi_label:
        positives = labels.sum(axis=0)
        weights = {"positive": n / (2.0 * np.maximum(positives, 1)),
                   "negative": n / (2.0 * np.maximum(n - positives, 1))}
    else:
        counts = np.bincount(labels, minlength=num_labels)
        weights = {"class": n / (num_labels * np.maximum(counts, 1.0))}
    for name, values in weights.items():
        logging.info("class weights (%s): %s", name, ", ".join(
            f"{label} {value:.4g}" for label, value in zip(splits.task.labels, values)))
    return {name: values.astype(np.float32) for name, values in weights.items()}


def fine_tuning_task(config: BertConfig, settings: Settings,
                     splits: Splits) -> fine_tuning.FineTuningTask:
    """The classifier, its loss and its saver (the label names and problem type in
    `model_spec.json`)."""
    task = splits.task
    weights = class_weights(settings, splits) if settings.class_weights else None

    def loss_fn(outputs, batch, normaliser):
        logits, labels = outputs["logits"], batch["label_ids"]
        size = normaliser.global_batch_size(batch)
        if task.is_regression:
            loss = losses.mean_squared_error(logits, labels, size)
        elif task.is_multi_label:
            loss = losses.mean_binary_cross_entropy(
                logits, labels, size, *(weights[k] for k in ("positive", "negative"))
                if weights else ())
        elif weights:
            loss = losses.weighted_cross_entropy(logits, labels, weights["class"], size)
        else:
            loss = losses.mean_cross_entropy(logits, labels, size)
        return {"loss": loss}
    return fine_tuning.FineTuningTask(
        lambda: BertClassifier(config, task.num_labels), loss_fn,
        head=f"a classifier of {task.num_labels} labels: output_weights [{task.num_labels}, "
             f"{config.hidden_size}]",
        save=functools.partial(fine_tuning.save_fine_tuned, labels=task.labels or None,
                               do_lower_case=settings.do_lower_case,
                               problem_type=task.problem_type))


def train(run: fine_tuning.FineTuningRun, config: BertConfig, settings: Settings,
          splits: Splits) -> fine_tuning.Trained:
    """Fine-tunes on the train split, scoring dev as the settings' evaluation plan says; one's
    own files' labels are written beside the model (`label_list.txt`)."""
    data = ArrayExamples(splits.by_name["train"].arrays, batching=settings.batching)
    if settings.files and splits.task.labels:
        write_labels(settings.output_dir, splits.task.labels)
    return fine_tuning.train(
        run, fine_tuning_task(config, settings, splits), data,
        run.train_steps(data.num_examples),
        dataclasses.replace(settings.evaluation, metric=main_metric(settings, splits.task)),
        lambda model, step, suffix: evaluate(model, settings, splits, step, suffix))


def _outputs(task: glue_tasks.GlueTask, logits: np.ndarray) -> np.ndarray:
    """Scores [N] (regression), a sigmoid per label (multi-label) or class probabilities."""
    if task.is_regression:
        return logits[:, 0]
    return (tf.sigmoid(logits) if task.is_multi_label else tf.nn.softmax(logits, axis=-1)).numpy()


def evaluate(model: keras.Model, settings: Settings, splits: Splits, global_step: int,
             suffix: str = "") -> dict:
    """Scores every dev split read (MNLI's matched and mismatched); returns the first's results.

    Each writes `eval_results{split's suffix}{suffix}.txt`; without `suffix` (the evaluation at
    the end, not one during training), also TensorBoard's `eval{split's suffix}/` and, for
    one's own single-label files, `confusion_matrix.tsv`.
    """
    return [_evaluate_split(model, split, splits.task, global_step, settings, suffix)
            for split in splits.of("eval")][0]


def _evaluate_split(model: keras.Model, split: Split, task: glue_tasks.GlueTask,
                    global_step: int, settings: Settings, suffix: str) -> dict:
    name = f"{split.spec.results_suffix}{suffix}"
    path = os.path.join(settings.output_dir, f"eval_results{name}.txt")
    logits = fine_tuning.predict(model, split.arrays, settings.eval_batch_size,
                                 settings.batching)["logits"]
    labels = split.arrays["label_ids"]
    if task.is_regression:
        per_example_loss = np.square(logits[:, 0] - labels)
    elif task.is_multi_label:
        per_example_loss = losses.per_example_binary_cross_entropy(logits, labels).numpy()
    else:
        per_example_loss = losses.per_example_cross_entropy(logits, labels).numpy()
    outputs = _outputs(task, logits)
    results = {**task_metrics(task, outputs if task.is_multi_label else logits, labels,
                              threshold=settings.multi_label_threshold),
               **loss_metrics(per_example_loss, split.arrays["is_real_example"],
                              settings.eval_batch_size),
               "global_step": global_step}
    with written_together():
        write_eval_results(path, results)
        if settings.files and task.problem == glue_tasks.SINGLE_LABEL and not suffix:
            write_confusion_matrix(os.path.join(settings.output_dir, "confusion_matrix.tsv"),
                                   confusion_matrix(np.argmax(logits, -1), labels,
                                                    task.num_labels), task.labels)
    if not suffix:
        write_eval_summaries(os.path.join(settings.output_dir, f"eval{name}"), global_step,
                             results)
    logging.info("***** Eval results (%d examples) written to %s *****", len(split.examples),
                 path)
    for key in sorted(results):
        logging.info("  %s = %s", key, results[key])
    return results


def predict(model: keras.Model, settings: Settings, splits: Splits, global_step: int) -> None:
    """Every test split read: test_results{suffix}.tsv (class probabilities [N, num_labels],
    or scores for regression) and the GLUE server's submission file or, for one's own files,
    predictions.jsonl."""
    del global_step
    task = splits.task
    for split in splits.of("predict"):
        logits = fine_tuning.predict(model, split.arrays, settings.predict_batch_size,
                                     settings.batching)["logits"]
        outputs = _outputs(task, logits)
        path = os.path.join(settings.output_dir, f"test_results{split.spec.results_suffix}.tsv")
        with written_together():
            write_test_results(path, outputs)
            if settings.files:
                other = os.path.join(settings.output_dir, "predictions.jsonl")
                write_predictions_jsonl(other, prediction_records(
                    split.examples, outputs, task.labels, task.problem,
                    settings.multi_label_threshold))
            else:
                other = write_submission(settings.output_dir, task, split.spec, split.examples,
                                         outputs)
        logging.info("***** Predictions for %d examples: %s and %s *****", len(split.examples),
                     path, other)


@dataclasses.dataclass(frozen=True)
class Classified:
    """A classifier's answer for one text: the most probable label (a multi-label model's
    labels at or above its threshold) and every label's probability; for a regression model,
    `prediction` alone."""

    label: str | None
    probabilities: dict[str, float] | None
    prediction: float | None = None
    labels: tuple[str, ...] | None = None


class TextClassifier(TextModel):
    """A sentence (pair) classifier's answers, with the label names the model was saved with
    (`run_classifier.py` writes them into `model_spec.json` and, for one's own files,
    `label_list.txt`; without them, labels are their ids).

    A text longer than max_seq_length is read in overlapping windows `doc_stride` tokens apart
    (default half a window); a pair keeps its shorter side in every window. The answer is the
    mean of the windows' class probabilities (a regression model's: of their predictions). A
    text that fits is one sequence, as `run_classifier.py` builds it. A multi-label model gives
    a sigmoid per label, and the labels at or above `threshold`.
    """

    def __init__(self, model: keras.Model, tokenizer: tokenization.FullTokenizer,
                 labels: Sequence[str] | None = None, max_seq_length: int = 128,
                 batch_size: int = 32, batching: Batching = Batching(),
                 doc_stride: int | None = None, problem_type: str | None = None,
                 threshold: float = 0.5):
        super().__init__(model, tokenizer, max_seq_length, batch_size, batching)
        self.model = model
        self.labels = tuple(labels) if labels else tuple(str(i) for i in range(model.num_labels))
        if len(self.labels) != model.num_labels:
            raise ValueError(f"{len(self.labels)} label names for a classifier of "
                             f"{model.num_labels} labels")
        if doc_stride is not None and doc_stride < 1:
            raise ValueError(f"doc_stride={doc_stride} must be at least 1")
        self.doc_stride = doc_stride
        self.problem_type = problem_type or (glue_tasks.REGRESSION if model.num_labels == 1
                                             else glue_tasks.SINGLE_LABEL)
        self.threshold = threshold

    @classmethod
    def from_checkpoint(cls, path: str, vocab_file: str | None = None,
                        bert_config_file: str | None = None, do_lower_case: bool | None = None,
                        **kwargs) -> "TextClassifier":
        """Reads a fine-tuned classifier (e.g. run_classifier.py's --output_dir), its labels
        (`model_spec.json`, else `label_list.txt`) and problem type.

        Raises:
            ValueError: the checkpoint holds no classifier head.
        """
        loaded, tokenizer = read_fine_tuned(
            path, "classifier", "classifier (output_weights [labels, H] at the root scope)",
            vocab_file, bert_config_file, do_lower_case)
        labels = loaded.labels or saved_labels(path)
        if labels is None and loaded.spec.num_labels > 1:
            logging.warning("%s has no label names (model_spec.json): labels are their ids",
                            path)
        return cls(loaded.model, tokenizer, labels, problem_type=loaded.problem_type, **kwargs)

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
        task = glue_tasks.GlueTask("", self.labels, "", (), problem_type=self.problem_type)
        outputs = _outputs(task, logits).reshape(len(logits), -1)
        owners = np.repeat(np.arange(len(texts)), [len(sequences) for sequences in found])
        sums = np.zeros((len(texts), outputs.shape[1]))
        np.add.at(sums, owners, outputs)
        means = sums / np.bincount(owners, minlength=len(texts))[:, None]   # [texts, K]
        if task.is_regression:
            return [Classified(None, None, float(value)) for value in means[:, 0]]
        answers = []
        for row in means:
            probabilities = dict(zip(self.labels, (float(p) for p in row)))
            chosen = tuple(label for label, p in probabilities.items() if p >= self.threshold) \
                if task.is_multi_label else None
            answers.append(Classified(self.labels[int(np.argmax(row))], probabilities,
                                      labels=chosen))
        return answers
