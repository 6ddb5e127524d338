"""Knowledge distillation: a fine-tuned BERT teaches a smaller student its task (Hinton et al.
2015), as Turc et al. 2019 ("Well-Read Students Learn Better") recommend for small BERTs.

The teacher labels the task's training set, and the lines of a transfer file, once; its outputs
are kept beside the run's outputs (`data.distillation.teacher_outputs`, resumable) and are a
feature of every training batch. The student's loss mixes the soft loss against them at a
temperature with the task's loss (`modeling.losses`: per example for a classifier, per token for
a tagger, start and end for SQuAD), and optionally TinyBERT's hidden-state and MiniLM's attention
losses on paired layers (`modeling.models.distillation`, the teacher run in the training step).
The student is written as every fine-tuned model is: `model.ckpt` in the original's format, `bert_config.json`,
`model_spec.json`, `vocab.txt` and `label_list.txt`, so the task's script, `predict_text.py`,
`convert_checkpoint.py` and `export_savedmodel.py` take it unchanged.

The module has the surface of a fine-tuning task (`tasks.runner.FineTunedTask`); the teacher's
task module (`classifier`, `ner`, `squad`) reads, scores and predicts.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, NamedTuple, Sequence

from absl import logging
import keras
import tensorflow as tf

from data import tokenization
from data.distillation.teacher_outputs import SHARD_ROWS, TeacherOutputs, fingerprint
from data.tfrecord_schema import ENCODER_INPUTS, INPUT_MASK
from modeling import checkpoints, losses
from modeling.config import BertConfig
from modeling.models.distillation import (ATTENTION_PROBABILITIES, HIDDEN_STATES,
                                          DistillationStudent, LayerPairs, student_of,
                                          teacher_intermediates)
from running.batching import FIXED, ArrayExamples
from tasks import classifier, ner, squad
from tasks.distillation_data import (LABELLED, Rows, align_tagger_outputs, distillation_rows,
                                     read_transfer_file)
from tasks.distillation_models import (Student, Teacher, build_student, initialise_student,
                                       vocabularies_differ)
from tasks.text_model import write_labels
from training import fine_tuning

# The task module of each head a teacher may have, and the outputs of its model.
MODULES = {"classifier": classifier, "token_classifier": ner, "squad": squad}
OUTPUTS = {"classifier": ("logits",), "token_classifier": ("logits",),
           "squad": ("start_logits", "end_logits")}
# The teacher's outputs, a feature of every batch: `teacher_logits`, ...
TEACHER = "teacher_"
# Beside the run's outputs: the teacher's outputs on the rows
# (`data.distillation.teacher_outputs`).
TEACHER_OUTPUTS_DIR = "teacher_outputs"


@dataclasses.dataclass(frozen=True)
class Losses:
    """The student's loss: alpha * soft + (1 - alpha) * task loss, plus the weighted sums of
    the hidden-state and attention losses over the paired layers.

    Attributes:
        temperature: softens both distributions of the soft loss (scaled back by T^2).
        alpha: the soft loss's share: 1 learns the teacher alone, 0 the labels alone.
        pairs: the layers of the intermediate losses (none: the outputs alone).
        hidden_weight, attention_weight: their weights.
    """

    temperature: float = 1.0
    alpha: float = 1.0
    pairs: LayerPairs = LayerPairs()
    hidden_weight: float = 1.0
    attention_weight: float = 1.0

    def check(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"--temperature={self.temperature} must be positive")
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"--alpha={self.alpha} must be between 0 and 1")
        for name, weight in (("hidden", self.hidden_weight), ("attention", self.attention_weight)):
            if weight < 0:
                raise ValueError(f"--{name}_loss_weight={weight} must not be negative")


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a distillation run reads and writes (distill.py's flags).

    Attributes:
        task: the teacher's task's settings (`distillation_data.task_settings`).
        teacher, student: the models (`distillation_models`).
        losses: the student's loss.
        transfer_file: unlabelled lines the teacher labels besides the training set.
        allow_vocab_mismatch: tokenize each text for each model with its own vocabulary.
        teacher_batch_size: rows a call while the teacher labels them.
        shard_rows: rows a file of the teacher's outputs.
    """

    task: Any
    teacher: Teacher
    student: Student
    losses: Losses = Losses()
    transfer_file: str | None = None
    allow_vocab_mismatch: bool = False
    teacher_batch_size: int = 64
    shard_rows: int = SHARD_ROWS

    @property
    def head(self) -> str:
        return self.teacher.head

    @property
    def evaluation(self):
        """The task's plan of scoring dev during training."""
        return self.task.evaluation

    @property
    def module(self):
        return MODULES[self.head]


class Splits(NamedTuple):
    """The task's splits (read with the student's tokenizer), and the rows distilled on, for
    the student and for the teacher (the same where the two tokenize alike); no rows without
    training."""

    task: Any
    rows: Rows | None = None
    teacher_rows: Rows | None = None


def read_splits(settings: Settings, roles: Sequence[str],
                tokenizer: tokenization.FullTokenizer) -> Splits:
    """The task's splits of `roles`, and with training the rows distilled on, for each model;
    bad input (labels that are not the teacher's, vocabularies that differ) fails here."""
    settings.losses.check()
    if settings.teacher_batch_size < 1:
        raise ValueError(f"--teacher_batch_size={settings.teacher_batch_size} must be positive")
    differ = vocabularies_differ(settings.teacher, settings.student,
                                 settings.allow_vocab_mismatch)
    if differ and settings.head == "squad":
        raise ValueError("--allow_vocab_mismatch: a SQuAD model's logits are over its own "
                         "tokens; its student needs the teacher's vocabulary")
    if differ and settings.losses.pairs:
        raise ValueError("--allow_vocab_mismatch: the hidden-state and attention losses compare "
                         "the two models token by token; they need one vocabulary")
    settings.teacher.model.config.check_max_seq_length(settings.task.max_seq_length
                                                       if settings.head != "squad" else
                                                       settings.task.windows.max_seq_length,
                                                       "--max_seq_length (the teacher's)")
    splits = settings.module.read_splits(settings.task, roles, tokenizer)
    _check_labels(settings, splits)
    if "train" not in roles:
        return Splits(splits)
    lines = read_transfer_file(settings.transfer_file, settings.head) \
        if settings.transfer_file else ()
    rows = distillation_rows(settings.head, splits, settings.task, task_labels(settings, splits),
                             tokenizer, lines)
    teacher_rows = rows
    if differ:
        teacher_tokenizer = tokenization.FullTokenizer(settings.teacher.loaded.vocab_file,
                                                       settings.teacher.do_lower_case)
        theirs = settings.module.read_splits(settings.task, ["train"], teacher_tokenizer)
        teacher_rows = distillation_rows(settings.head, theirs, settings.task,
                                         task_labels(settings, splits), teacher_tokenizer, lines)
    logging.info("distilling on %d rows (%d of the training set, %d of --transfer_file)",
                 rows.num_rows, int(rows.arrays[LABELLED].sum()),
                 rows.num_rows - int(rows.arrays[LABELLED].sum()))
    return Splits(splits, rows, teacher_rows)


def task_labels(settings: Settings, splits) -> tuple[str, ...] | None:
    """The task's label names by id: a classifier's task row's, a tagger's tag set."""
    if settings.head == "classifier":
        return tuple(splits.task.labels) or None
    if settings.head == "token_classifier":
        return tuple(splits.labels)
    return None


def _check_labels(settings: Settings, splits) -> None:
    """The task has the teacher's number of labels, and the same names where both have them."""
    teacher = settings.teacher
    if settings.head == "squad":
        return
    count = splits.task.num_labels if settings.head == "classifier" else len(splits.labels)
    labels = task_labels(settings, splits)
    if count != teacher.loaded.spec.num_labels or (teacher.labels and labels
                                                   and labels != teacher.labels):
        raise ValueError(f"the teacher {teacher.path} has {teacher.loaded.spec.num_labels} "
                         f"labels ({', '.join(teacher.labels or ['unnamed'])}), the task "
                         f"{count} ({', '.join(labels or ['unnamed'])}): the teacher was not "
                         "fine-tuned on this task")


def _loss_fn(settings: Settings, teacher: dict):
    """The student's loss (`Losses`) of a batch carrying the teacher's outputs; `teacher`
    holds the frozen teacher model where intermediate losses are asked for."""
    config, head, problem = settings.losses, settings.head, settings.teacher.problem
    temperature, alpha = config.temperature, config.alpha

    def loss_fn(outputs, batch, normaliser):
        labelled = tf.cast(batch[LABELLED], tf.float32)
        rows, labelled_rows = normaliser.global_batch_size(batch), \
            normaliser.global_sum(tf.reduce_sum(labelled))
        if head == "classifier":
            loss = losses.classifier_distillation_loss(
                outputs["logits"], batch[TEACHER + "logits"], batch["label_ids"], temperature,
                alpha, problem, labelled, rows, labelled_rows)
        elif head == "token_classifier":
            logits, label_ids = outputs["logits"], batch["label_ids"]
            tagged = tf.cast(label_ids >= 0, tf.float32)
            loss = losses.token_distillation_loss(
                logits, batch[TEACHER + "logits"][:, :tf.shape(logits)[1]], label_ids,
                temperature, alpha, labelled, normaliser.global_sum(tf.reduce_sum(tagged)),
                normaliser.global_sum(tf.reduce_sum(tagged * labelled[:, None])))
        else:
            loss = losses.span_distillation_loss(
                outputs["start_logits"], outputs["end_logits"], batch[TEACHER + "start_logits"],
                batch[TEACHER + "end_logits"], batch["start_positions"], batch["end_positions"],
                batch[INPUT_MASK], temperature, alpha, labelled, rows, labelled_rows)
        logs = {"distillation_loss": loss}
        if config.pairs:
            logs.update(_intermediate_losses(outputs, batch, normaliser, teacher["model"],
                                             config))
            loss += config.hidden_weight * logs.get("hidden_loss", 0.0) + \
                config.attention_weight * logs.get("attention_loss", 0.0)
        return {**logs, "loss": loss}
    return loss_fn


def _intermediate_losses(outputs, batch, normaliser, teacher: keras.Model,
                         config: Losses) -> dict:
    """The hidden-state and attention losses, each summed over its pairs of layers."""
    theirs = teacher_intermediates(teacher, {key: batch[key] for key in ENCODER_INPUTS},
                                   config.pairs)
    tokens = normaliser.global_sum(tf.reduce_sum(tf.cast(batch[INPUT_MASK], tf.float32)))
    logs = {}
    if config.pairs.hidden:
        logs["hidden_loss"] = tf.add_n([
            losses.hidden_state_loss(ours, their, batch[INPUT_MASK], tokens)
            for ours, their in zip(outputs[HIDDEN_STATES], theirs[HIDDEN_STATES])])
    if config.pairs.attention:
        logs["attention_loss"] = tf.add_n([
            losses.attention_distribution_loss(ours, their, batch[INPUT_MASK], tokens)
            for ours, their in zip(outputs[ATTENTION_PROBABILITIES],
                                   theirs[ATTENTION_PROBABILITIES])])
    return logs


def _frozen_teacher(teacher: Teacher) -> keras.Model:
    """A copy of the teacher built where it is called (the strategy's scope), not trained."""
    model = checkpoints.build_model(teacher.model.config, teacher.loaded.spec)
    model.set_weights(teacher.model.get_weights())
    model.trainable = False
    return model


def fine_tuning_task(config: BertConfig, settings: Settings, splits: Splits,
                     intermediate: bool = False) -> fine_tuning.FineTuningTask:
    """The student, its loss, its start and its saver. With `intermediate` (training with
    hidden-state or attention losses), the model is a `DistillationStudent` and a frozen copy
    of the teacher runs in each step; what is saved is the student alone."""
    del config
    teacher: dict = {}
    pairs = settings.losses.pairs if intermediate else LayerPairs()

    def build_model() -> keras.Model:
        student = build_student(settings.student, settings.teacher)
        if not pairs:
            return student
        teacher["model"] = _frozen_teacher(settings.teacher)
        return DistillationStudent(student, pairs, settings.teacher.model.config.hidden_size)

    labels = task_labels(settings, splits.task)

    def save(trained: fine_tuning.Trained, folder: str) -> None:
        fine_tuning.save_fine_tuned(
            trained._replace(model=student_of(trained.model)), folder, labels=labels,
            do_lower_case=settings.student.do_lower_case, problem_type=settings.teacher.problem)
        if labels:
            write_labels(folder, labels)
    return fine_tuning.FineTuningTask(
        build_model, _loss_fn(settings, teacher),
        head=f"{settings.head}, as the teacher's",
        initialise=lambda model, _: initialise_student(student_of(model), settings.student,
                                                       settings.teacher),
        save=save)


def teacher_outputs(settings: Settings, splits: Splits) -> dict:
    """The teacher's outputs on the rows, `TEACHER`-prefixed: read from the cache beside the
    outputs, the rows it lacks computed first; aligned to the student's positions where a
    tagger's two tokenizations differ (`align_tagger_outputs`, which also returns the label ids
    of the words the teacher did not see as -1)."""
    teacher, rows = settings.teacher, splits.teacher_rows
    inputs = {key: rows.arrays[key] for key in ENCODER_INPUTS}
    spec = teacher.loaded.spec
    length = inputs[INPUT_MASK].shape[1]
    shapes = {"classifier": {"logits": (spec.num_labels,)},
              "token_classifier": {"logits": (length, spec.num_labels or 0)},
              "squad": {"start_logits": (length,), "end_logits": (length,)}}[settings.head]
    cache = TeacherOutputs(
        os.path.join(settings.task.output_dir, TEACHER_OUTPUTS_DIR), shapes, rows.num_rows,
        {"teacher": fingerprint((w.path, w.numpy()) for w in teacher.model.weights),
         "rows": fingerprint(inputs.items())}, settings.shard_rows)
    batching = FIXED if settings.head == "squad" else settings.task.batching

    def compute(start: int, end: int) -> dict:
        found = fine_tuning.predict(teacher.model, {k: v[start:end] for k, v in inputs.items()},
                                    settings.teacher_batch_size, batching)
        return {name: found[name] for name in OUTPUTS[settings.head]}
    computed = cache.fill(compute)
    logging.info("teacher outputs of %d rows: %d computed, %d read from %s", rows.num_rows,
                 computed, rows.num_rows - computed, cache.folder)
    outputs = cache.read()
    if splits.rows is not rows and settings.head == "token_classifier":
        logits, label_ids = align_tagger_outputs(outputs["logits"], rows, splits.rows)
        return {TEACHER + "logits": logits, "label_ids": label_ids}
    return {TEACHER + name: values for name, values in outputs.items()}


def train(run: fine_tuning.FineTuningRun, config: BertConfig, settings: Settings,
          splits: Splits) -> fine_tuning.Trained:
    """Labels the rows with the teacher (or reads its cached outputs), then trains the student
    on them, scoring dev as the task's evaluation plan says."""
    arrays = {**splits.rows.arrays, **teacher_outputs(settings, splits)}
    batching = FIXED if settings.head == "squad" else settings.task.batching
    data = ArrayExamples(arrays, batching=batching)
    labels = task_labels(settings, splits.task)
    if labels:
        write_labels(settings.task.output_dir, labels)
    plan = settings.task.evaluation
    if settings.head == "classifier":
        plan = dataclasses.replace(plan, metric=classifier.main_metric(settings.task,
                                                                       splits.task.task))
    return fine_tuning.train(
        run, fine_tuning_task(config, settings, splits, intermediate=True), data,
        run.train_steps(data.num_examples), plan,
        lambda model, step, suffix: evaluate(model, settings, splits, step, suffix))


def evaluate(model: keras.Model, settings: Settings, splits: Splits, global_step: int,
             suffix: str = "") -> dict:
    """The student scored on dev as the teacher's task scores it (`eval_results.txt`, ...)."""
    return settings.module.evaluate(student_of(model), settings.task, splits.task, global_step,
                                    suffix)


def predict(model: keras.Model, settings: Settings, splits: Splits, global_step: int) -> None:
    """The student's predictions on the test split(s), as the teacher's task writes them."""
    settings.module.predict(student_of(model), settings.task, splits.task, global_step)
