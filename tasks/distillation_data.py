"""The rows a student is distilled on: the task's training set and the lines of a transfer
file, featurised as the task featurises them, for the student and (where the two tokenize
differently) for the teacher.

Each kind of teacher reads its task as its own module does (`tasks.classifier`, `tasks.ner`,
`tasks.squad`); the rows keep the task's labels, and a transfer file's rows (one text, a
`text ||| text` pair, a sentence of words or a `question ||| context` a line) carry
placeholder labels and `labelled` 0, so that only the teacher's outputs teach on them.
"""
from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, Sequence

import numpy as np

from data import features as model_inputs, tokenization
from data.classifier import glue_tasks, own_files
from data.ner import features as ner_features
from data.squad.examples import SquadExample, split_context
from data.squad.features import features_to_arrays as squad_arrays
from data.tfrecord_schema import END_POSITIONS, ENCODER_INPUTS, START_POSITIONS
from running.batching import Batching
from tasks import classifier, ner, squad
from tasks.text_model import parsed
from training.periodic_evaluation import EvaluationPlan

# The rows' key saying which have the task's labels (1) and which the teacher's alone (0).
LABELLED = "labelled"
# The labels each kind's rows carry.
LABEL_KEYS = {"classifier": ("label_ids",), "token_classifier": ("label_ids",),
              "squad": (START_POSITIONS, END_POSITIONS)}


# The sequence length of each kind of task unless one is given (its script's default).
MAX_SEQ_LENGTH = {"classifier": 128, "token_classifier": 128, "squad": squad.Windows.max_seq_length}


@dataclasses.dataclass(frozen=True)
class TaskData:
    """Where the teacher's task is and how it is read, whatever the task (distill.py's data
    flags); `task_settings` makes it the task module's `Settings`.

    Attributes:
        output_dir, max_seq_length (None: the task's default), do_lower_case, eval_batch_size,
            predict_batch_size, batching, evaluation: as every task's settings have them.
        files: a file for some roles ("train", "eval", "predict"): a classifier's CSV, TSV or
            JSON lines, a tagger's CoNLL files, SQuAD JSON (dev and test: the predict file).
        task_name, data_dir: a GLUE or XNLI task and its folder; a CoNLL folder.
        columns, file_format, label_separator: how a classifier's own files are read.
        token_column, tag_column, tag_scheme, document_context: how a tagger's files are read.
        doc_stride, max_query_length, version_2_with_negative: SQuAD's windows and answers.
    """

    output_dir: str
    max_seq_length: int | None = None
    do_lower_case: bool = True
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    batching: Batching = Batching()
    evaluation: EvaluationPlan = EvaluationPlan()
    files: dict[str, str] = dataclasses.field(default_factory=dict)
    task_name: str | None = None
    data_dir: str | None = None
    columns: own_files.Columns = own_files.Columns("text")
    file_format: str | None = None
    label_separator: str = ","
    token_column: int = 0
    tag_column: int = -1
    tag_scheme: str = "auto"
    document_context: bool = False
    doc_stride: int | None = None
    max_query_length: int = squad.Windows.max_query_length
    version_2_with_negative: bool = False


def task_settings(head: str, data: TaskData, labels: Sequence[str] | None,
                  problem: str | None) -> Any:
    """The `Settings` of the task module a teacher of `head` is fine-tuned for, its labels
    (`labels`, the teacher's) and problem type (a classifier's) fixed."""
    common = dict(output_dir=data.output_dir, eval_batch_size=data.eval_batch_size,
                  predict_batch_size=data.predict_batch_size, batching=data.batching,
                  max_seq_length=data.max_seq_length or MAX_SEQ_LENGTH[head])
    if head == "classifier":
        files = None
        if data.files:
            data.columns.check()
            files = own_files.OwnFiles(data.files, data.columns, problem, data.file_format,
                                       data.label_separator, tuple(labels) if labels else None)
        elif not (data.task_name and data.data_dir):
            raise ValueError("name the teacher's task (--task_name and --data_dir) or its files "
                             "(--train_file, --dev_file, --test_file)")
        return classifier.Settings(
            task=glue_tasks.get_task(data.task_name) if data.task_name and not files else None,
            data_dir=data.data_dir, files=files, do_lower_case=data.do_lower_case,
            evaluation=data.evaluation, **common)
    if head == "token_classifier":
        return ner.Settings(
            data_dir=data.data_dir, files=data.files, token_column=data.token_column,
            tag_column=data.tag_column, do_lower_case=data.do_lower_case,
            tag_scheme=data.tag_scheme, document_context=data.document_context,
            doc_stride=data.doc_stride, labels=tuple(labels) if labels else None,
            evaluation=dataclasses.replace(data.evaluation,
                                           metric=data.evaluation.metric or ner.MAIN_METRIC),
            **common)
    return squad.Settings(
        output_dir=data.output_dir, train_file=data.files.get("train"),
        predict_file=data.files.get("predict") or data.files.get("eval"),
        windows=squad.Windows(common["max_seq_length"], data.doc_stride or squad.Windows.doc_stride,
                              data.max_query_length),
        rules=squad.AnswerRules(do_lower_case=data.do_lower_case,
                                version_2_with_negative=data.version_2_with_negative),
        predict_batch_size=data.predict_batch_size, batching=data.batching,
        evaluation=dataclasses.replace(data.evaluation,
                                       metric=data.evaluation.metric or squad.MAIN_METRIC))


class Rows(NamedTuple):
    """Featurised rows: arrays keyed by the model's inputs and labels, and, for a tagger, each
    row's words' first-piece positions (-1 for a word without one) to align two tokenizations."""

    arrays: dict[str, np.ndarray]
    word_positions: list[np.ndarray] | None = None

    @property
    def num_rows(self) -> int:
        return len(self.arrays[ENCODER_INPUTS[0]])


def read_transfer_file(path: str, head: str) -> list[str]:
    """The non-empty lines of a transfer file; for a SQuAD teacher each one is checked to be
    `question ||| context`.

    Raises:
        ValueError: no line, or a line without its parts (named by its number).
    """
    with open(path, encoding="utf-8") as f:
        lines = [(number, line.strip()) for number, line in enumerate(f, 1)]
    found = [line for _, line in lines if line]
    for number, line in lines:
        if line and head == "squad":
            try:
                squad.QuestionAnswerer.parse(line)
            except ValueError as error:
                raise ValueError(f"--transfer_file={path}, line {number}: {error}") from None
    if not found:
        raise ValueError(f"--transfer_file={path}: no lines of text")
    return found


def _training_rows(head: str, splits, settings, tokenizer: tokenization.FullTokenizer) -> Rows:
    """The train split's rows, as the task trains on them."""
    keys = ENCODER_INPUTS + LABEL_KEYS[head]
    if head == "classifier":
        arrays = splits.by_name["train"].arrays
    elif head == "token_classifier":
        found = splits.by_role["train"].features
        return Rows({key: found.to_arrays()[key] for key in keys}, _word_positions(found))
    else:
        arrays = squad.training_arrays(splits.train, tokenizer, settings.windows)
    return Rows({key: arrays[key] for key in keys})


def _word_positions(found: ner_features.NerFeatures) -> list[np.ndarray]:
    """Each sentence's words' first-piece positions in its one row (training rows are cut,
    not windowed)."""
    return [np.asarray(positions, np.int32) for positions in found.word_positions]


def _transfer_rows(head: str, lines: Sequence[str], settings, labels: Sequence[str],
                   tokenizer: tokenization.FullTokenizer) -> Rows:
    """The transfer lines' rows, with their task's labels left as placeholders."""
    if head == "classifier":
        arrays = model_inputs.stack([model_inputs.text_sequence(line, tokenizer,
                                                                settings.max_seq_length)[0]
                                     for line in lines])
        return Rows(arrays)
    if head == "token_classifier":
        found = ner_features.convert_documents_to_features(
            ner.sentence_documents(lines), tokenizer, labels, settings.max_seq_length)
        return Rows({key: found.to_arrays()[key] for key in ENCODER_INPUTS + ("label_ids",)},
                    _word_positions(found))
    examples = [SquadExample(str(index), question, split_context(context)[0])
                for index, (question, context)
                in parsed(lines, squad.QuestionAnswerer.parse).items()]
    arrays = squad_arrays(list(squad.features(examples, tokenizer, settings.windows, False)),
                          is_training=False)
    return Rows({key: arrays[key] for key in ENCODER_INPUTS})


def distillation_rows(head: str, splits, settings, labels: Sequence[str] | None,
                      tokenizer: tokenization.FullTokenizer,
                      transfer_lines: Sequence[str] = ()) -> Rows:
    """The train split's rows, then the transfer lines', with `LABELLED` saying which are
    which; the transfer rows' labels are zeros (a tagger's: 0 at each word's first piece)."""
    rows = _training_rows(head, splits, settings, tokenizer)
    labelled = np.ones(rows.num_rows, np.int32)
    if not transfer_lines:
        return Rows({**rows.arrays, LABELLED: labelled}, rows.word_positions)
    extra = _transfer_rows(head, transfer_lines, settings, labels, tokenizer)
    for key in LABEL_KEYS[head]:
        template = rows.arrays[key]
        if key not in extra.arrays:
            extra.arrays[key] = np.zeros((extra.num_rows, *template.shape[1:]), template.dtype)
        elif head == "token_classifier":
            extra.arrays[key] = np.where(extra.arrays[key] >= 0, 0, -1).astype(template.dtype)
    arrays = {key: np.concatenate([rows.arrays[key], extra.arrays[key]])
              for key in rows.arrays}
    arrays[LABELLED] = np.concatenate([labelled, np.zeros(extra.num_rows, np.int32)])
    positions = None if rows.word_positions is None else \
        rows.word_positions + extra.word_positions
    return Rows(arrays, positions)


def align_tagger_outputs(teacher_logits: np.ndarray, teacher_rows: Rows, rows: Rows
                         ) -> tuple[np.ndarray, np.ndarray]:
    """A tagger teacher's logits, computed on its own tokenization, at the student's positions
    of the same words (`--allow_vocab_mismatch`).

    Args:
        teacher_logits: float32 [N, T', K] at the teacher's rows.
        teacher_rows, rows: the same sentences featurised for the teacher and the student.

    Returns:
        The logits [N, T, K] at each word's first piece in the student's rows, and the
        student's label ids with -1 at the words the teacher's rows lack (cut off by its
        tokenization), which then teach nothing.
    """
    label_ids = rows.arrays["label_ids"].copy()
    num_rows, length = label_ids.shape
    aligned = np.zeros((num_rows, length, teacher_logits.shape[-1]), np.float32)
    for row, (theirs, ours) in enumerate(zip(teacher_rows.word_positions, rows.word_positions)):
        both = (theirs >= 0) & (ours >= 0)
        aligned[row, ours[both]] = teacher_logits[row, theirs[both]]
        label_ids[row, ours[(theirs < 0) & (ours >= 0)]] = -1
    return aligned, label_ids
