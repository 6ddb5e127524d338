"""The teacher and the student of a distillation run (`tasks.distillation`).

The teacher is any fine-tuned model the project reads with a classifier, tagger or SQuAD head:
a `run_classifier.py`, `run_ner.py` or `run_squad.py` output folder, or a Hugging Face
`BertFor{SequenceClassification,TokenClassification,QuestionAnswering}` folder. The student
has the teacher's head and labels, and starts from one of: some of the teacher's layers
(`layers`, DistilBERT's initialisation: the teacher's embeddings, pooler and head too), a
checkpoint of any format (`init`: a smaller released BERT, a KerasHub preset; its head too where
it has the teacher's, else a new one), or a `bert_config.json` and random values (`config_file`).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Sequence

from absl import logging
import keras

from data.classifier import glue_tasks
from modeling import checkpoints
from modeling.checkpoints.folder_readers import count_vocab_lines
from modeling.config import BertConfig
from modeling.models.distillation import LayerPairs
from tasks.text_model import FINE_TUNED_PREFIX, checked_lower_case, saved_labels

# The heads a teacher may have, and what they are for the messages.
HEADS = {"classifier": "a classifier", "token_classifier": "a tagger", "squad": "a SQuAD model"}


@dataclasses.dataclass(frozen=True)
class Teacher:
    """A fine-tuned model read with what travels beside it.

    Attributes:
        path: the path given (`--teacher`).
        loaded: the model, its spec (head, label count) and vocabulary.
        labels: its label names by id (model_spec.json, label_list.txt or Hugging Face's
            id2label); None where it has none.
        problem: a classifier's problem type (single_label, multi_label or regression).
        do_lower_case: the casing it was trained with (as recorded, else lower case).
    """

    path: str
    loaded: checkpoints.LoadedModel
    labels: tuple[str, ...] | None
    problem: str | None
    do_lower_case: bool

    @property
    def model(self) -> keras.Model:
        return self.loaded.model

    @property
    def head(self) -> str:
        return self.loaded.spec.head


def read_teacher(path: str) -> Teacher:
    """Reads the teacher at `path` (a folder holding `model.ckpt`, or any checkpoint).

    Raises:
        ValueError: it has no classifier, tagger or SQuAD head (a pretrained model).
    """
    found = os.path.join(path, FINE_TUNED_PREFIX)
    prefix = found if os.path.isfile(found + ".index") else path
    loaded = checkpoints.read_model(prefix)
    if loaded.spec.head not in HEADS:
        raise ValueError(f"--teacher={path} holds a model with the {loaded.spec.head!r} head, "
                         f"not a fine-tuned classifier, tagger or SQuAD model: give the output "
                         "folder of run_classifier.py, run_ner.py or run_squad.py, or a Hugging "
                         "Face ...ForSequenceClassification, ...ForTokenClassification or "
                         "...ForQuestionAnswering folder")
    labels = loaded.labels or saved_labels(path)
    problem = None
    if loaded.spec.head == "classifier":
        problem = loaded.problem_type or (glue_tasks.REGRESSION if loaded.spec.num_labels == 1
                                          else glue_tasks.SINGLE_LABEL)
    logging.info("teacher %s: %s, %d layers, hidden size %d%s", path, HEADS[loaded.spec.head],
                 loaded.model.config.num_hidden_layers, loaded.model.config.hidden_size,
                 f", labels {', '.join(labels)}" if labels else "")
    return Teacher(path, loaded, tuple(labels) if labels else None, problem,
                   checked_lower_case(None, loaded, prefix))


@dataclasses.dataclass(frozen=True)
class StudentSource:
    """Where the student starts: exactly one of `layers`, `init` and `config_file`.

    Attributes:
        layers: the teacher's layers the student keeps (`--student_layers`).
        init: a checkpoint of any format (`--student_init`).
        config_file: a `bert_config.json`, for a student of random values (`--student_config`).
        vocab_file: the student's vocabulary; default: `init`'s, else the teacher's.
        do_lower_case: the student's casing; default: `init`'s, else the teacher's.
    """

    layers: tuple[int, ...] | None = None
    init: str | None = None
    config_file: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool | None = None

    def check(self) -> None:
        given = [flag for flag, value in (("--student_layers", self.layers),
                                          ("--student_init", self.init),
                                          ("--student_config", self.config_file)) if value]
        if len(given) != 1:
            raise ValueError("give one of --student_layers (some of the teacher's layers), "
                             "--student_init (a checkpoint) or --student_config (a config, "
                             f"random values){'; found ' + ', '.join(given) if given else ''}")


@dataclasses.dataclass(frozen=True)
class Student:
    """The student as planned before anything is built: its config, vocabulary and start."""

    config: BertConfig
    vocab_file: str
    do_lower_case: bool
    source: StudentSource
    # The head of --student_init's checkpoint, loaded with the encoder where it is the teacher's.
    init_spec: checkpoints.ModelSpec | None = None


def plan_student(source: StudentSource, teacher: Teacher) -> Student:
    """The student's config, vocabulary and casing, checked before anything is written.

    Raises:
        ValueError: layers outside the teacher, a vocabulary larger than the config's.
    """
    source.check()
    config, vocab_file = teacher.model.config, teacher.loaded.vocab_file
    do_lower_case, init_spec = teacher.do_lower_case, None
    if source.layers:
        try:
            checkpoints.check_layers(source.layers, config.num_hidden_layers,
                                     f"the teacher {teacher.path}")
        except ValueError as error:
            raise ValueError(f"--student_layers={','.join(map(str, source.layers))}: "
                             f"{error}") from None
        config = dataclasses.replace(config, num_hidden_layers=len(source.layers))
    elif source.init:
        loaded = checkpoints.read_model(source.init, vocab_file=source.vocab_file)
        config, vocab_file, init_spec = loaded.model.config, loaded.vocab_file, loaded.spec
        do_lower_case = do_lower_case if loaded.do_lower_case is None else loaded.do_lower_case
    else:
        config = BertConfig.from_json_file(source.config_file)
    vocab_file = source.vocab_file or vocab_file
    tokens = count_vocab_lines(vocab_file)
    if tokens > config.vocab_size:
        raise ValueError(f"the student's vocabulary {vocab_file} has {tokens} tokens, more than "
                         f"its vocab_size={config.vocab_size}")
    if source.do_lower_case is not None:
        do_lower_case = source.do_lower_case
    return Student(config, vocab_file, do_lower_case, source, init_spec)


def _tokens(vocab_file: str) -> list[str]:
    with open(vocab_file, encoding="utf-8") as f:
        return f.read().splitlines()


def vocabularies_differ(teacher: Teacher, student: Student, allowed: bool) -> bool:
    """Whether the two tokenize text differently (another vocabulary, or casing).

    Raises:
        ValueError: they do, and `allowed` (`--allow_vocab_mismatch`) is not set.
    """
    same = teacher.do_lower_case == student.do_lower_case and (
        _tokens(teacher.loaded.vocab_file) == _tokens(student.vocab_file))
    if not same and not allowed:
        raise ValueError(
            f"the teacher's vocabulary ({teacher.loaded.vocab_file}, lower case "
            f"{teacher.do_lower_case}) and the student's ({student.vocab_file}, lower case "
            f"{student.do_lower_case}) differ: the student would be given token ids the "
            "teacher never saw. Pass --allow_vocab_mismatch to tokenize each text for each "
            "model with its own vocabulary")
    return not same


def build_student(student: Student, teacher: Teacher) -> keras.Model:
    """A new task model of the student's config with the teacher's head and label count."""
    return checkpoints.build_model(student.config, teacher.loaded.spec)


def initialise_student(model: keras.Model, student: Student, teacher: Teacher) -> None:
    """Loads the student's start into `model` (`build_student`'s), strictly."""
    source = student.source
    if source.layers:
        checkpoints.copy_layers(teacher.model, model, source.layers, f"the teacher {teacher.path}")
        logging.info("student initialised from layers %s of the teacher (embeddings, pooler and "
                     "head too)", ", ".join(map(str, source.layers)))
    elif source.init:
        whole = student.init_spec == teacher.loaded.spec
        found = checkpoints.load_checkpoint(model if whole else model.encoder, source.init)
        logging.info("student initialised from %s (%s, %s)", source.init, found,
                     "with its head" if whole else "a new head")
    else:
        logging.info("student of random values (%s)", source.config_file)


def _layer(value: str, num_layers: int, flag: str, embeddings: bool) -> int:
    """A layer of a `student:teacher` pair: from 0 (negative: from the last) or `embeddings`;
    as an index of the hidden states (the embeddings 0) where `embeddings` is allowed."""
    if value == "embeddings" and embeddings:
        return 0
    try:
        layer = int(value)
    except ValueError:
        raise ValueError(f"{flag}: {value!r} is not a layer number"
                         f"{' or embeddings' if embeddings else ''}") from None
    if not -num_layers <= layer < num_layers:
        raise ValueError(f"{flag}: layer {layer} of a model of {num_layers} layers (0 to "
                         f"{num_layers - 1}, or -1 for the last)")
    return layer % num_layers + (1 if embeddings else 0)


def layer_pairs(hidden: Sequence[str], attention: Sequence[str], student: Student,
                teacher: Teacher) -> LayerPairs:
    """The `student:teacher` pairs of --hidden_loss_layers and --attention_loss_layers (layers
    from 0, negative from the last; `embeddings` for the embeddings' output, hidden states
    only), as `LayerPairs`."""
    sizes = (student.config.num_hidden_layers, teacher.model.config.num_hidden_layers)
    found = {}
    for flag, values, embeddings in (("--hidden_loss_layers", hidden, True),
                                     ("--attention_loss_layers", attention, False)):
        pairs = []
        for value in values:
            parts = value.split(":")
            if len(parts) != 2:
                raise ValueError(f"{flag}: {value!r} is not `student_layer:teacher_layer`")
            pairs.append(tuple(_layer(part.strip(), size, flag, embeddings)
                               for part, size in zip(parts, sizes)))
        found[flag] = tuple(pairs)
    return LayerPairs(found["--hidden_loss_layers"], found["--attention_loss_layers"])
