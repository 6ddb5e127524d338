"""SQuAD v1.1 / v2.0 JSON -> `SquadExample`s, exactly as the original `read_squad_examples`.

The context is split into words on whitespace (space, tab, CR, LF and U+202F only), and each
character is mapped to the index of the word it belongs to. A training answer, given as a
character offset, becomes a word span. Answers whose text cannot be found again in that word
span are skipped (the original does the same and logs a warning); they are returned in
`SquadReadResult.skipped` so a caller can report how many and which. Unanswerable v2.0
training questions get word positions -1 (they point at [CLS] once converted to features).
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from absl import logging

from data import tokenization

# The original's SQuAD-specific whitespace: narrower than `tokenization.is_whitespace`
# (no other Zs characters), plus U+202F (narrow no-break space).
_SQUAD_WHITESPACE = frozenset(" \t\r\n\u202f")


@dataclasses.dataclass
class SquadExample:
    """One question about one paragraph.

    Examples of the same paragraph share one `doc_tokens` list (as in the original).
    `orig_answer_text`, `start_position` and `end_position` (word indices into `doc_tokens`,
    inclusive) are set for training only; they are "" / -1 / -1 for an unanswerable v2.0
    training question.
    """

    qas_id: str
    question_text: str
    doc_tokens: list[str]
    orig_answer_text: str | None = None
    start_position: int | None = None
    end_position: int | None = None
    is_impossible: bool = False


@dataclasses.dataclass(frozen=True)
class SkippedAnswer:
    """A training question left out because its answer text is not in its word span."""

    qas_id: str
    span_text: str  # The whitespace words the character offsets point at.
    answer_text: str  # The answer with its whitespace runs collapsed.


@dataclasses.dataclass
class SquadReadResult:
    """The examples read from one file and the training questions skipped."""

    examples: list[SquadExample]
    skipped: list[SkippedAnswer]


def read_json(path: str | os.PathLike, what: str) -> Any:
    """The JSON value in a file; `what` names the file in errors ("the {what} file").

    Raises:
      ValueError: the file cannot be read or is not JSON.
    """
    try:
        with open(path, "r", encoding="utf-8") as reader:
            return json.load(reader)
    except OSError as error:
        raise ValueError(f"{path}: cannot read the {what} file: {error}") from error
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: the {what} file is not valid JSON: {error}") from error


def load_squad_json(input_file: str | os.PathLike) -> dict[str, Any]:
    """Reads an official-format SQuAD file and checks its top-level layout.

    Raises:
      ValueError: the file cannot be read, is not JSON, or has no "data" list.
    """
    dataset = read_json(input_file, "SQuAD")
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise ValueError(f'{input_file}: missing the top-level "data" list of articles')
    return dataset


def split_context(paragraph_text: str) -> tuple[list[str], list[int]]:
    """Splits a context into whitespace-delimited words.

    Returns:
      (doc_tokens, char_to_word_offset): the words, and for every character of
      `paragraph_text` the index of the word it is in (whitespace maps to the word before
      it, -1 before the first word).
    """
    doc_tokens: list[str] = []
    char_to_word_offset: list[int] = []
    prev_is_whitespace = True
    for char in paragraph_text:
        if char in _SQUAD_WHITESPACE:
            prev_is_whitespace = True
        else:
            if prev_is_whitespace:
                doc_tokens.append(char)
            else:
                doc_tokens[-1] += char
            prev_is_whitespace = False
        char_to_word_offset.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word_offset


def read_squad_examples(input_file: str | os.PathLike, is_training: bool,
                        version_2_with_negative: bool = False) -> SquadReadResult:
    """Reads a SQuAD JSON file into examples, in file order.

    Args:
      input_file: an official-format SQuAD v1.1 or v2.0 file.
      is_training: read answers (exactly one per answerable question) and word positions.
      version_2_with_negative: read each question's "is_impossible" (training only).

    Raises:
      ValueError: malformed file (a missing key, a question id given twice, ...); the message
        names the file and the question id.
    """
    dataset = load_squad_json(input_file)
    examples: list[SquadExample] = []
    skipped: list[SkippedAnswer] = []
    articles_of_ids: dict[str, int] = {}
    for article_index, article in enumerate(dataset["data"]):
        for paragraph in _require(article, "paragraphs", list, input_file,
                                  f"article {article_index}"):
            context = _require(paragraph, "context", str, input_file,
                               f"a paragraph of article {article_index}")
            doc_tokens, char_to_word_offset = split_context(context)
            for qa in _require(paragraph, "qas", list, input_file,
                               f"a paragraph of article {article_index}"):
                example = _read_question(qa, doc_tokens, char_to_word_offset, context,
                                         is_training, version_2_with_negative, input_file)
                if example.qas_id in articles_of_ids:
                    raise ValueError(
                        f"{input_file}: question id {example.qas_id!r} is given twice (articles "
                        f"{articles_of_ids[example.qas_id]} and {article_index}): one's "
                        "prediction would replace the other's; give each question its own id")
                articles_of_ids[example.qas_id] = article_index
                if isinstance(example, SkippedAnswer):
                    skipped.append(example)
                else:
                    examples.append(example)
    if skipped:
        logging.warning("%s: skipped %d of %d training questions whose answer text is not "
                        "in the context at its offset: %s", input_file, len(skipped),
                        len(skipped) + len(examples),
                        ", ".join(item.qas_id for item in skipped[:20]))
    return SquadReadResult(examples=examples, skipped=skipped)


def _read_question(qa: Any, doc_tokens: list[str], char_to_word_offset: list[int],
                   context: str, is_training: bool, version_2_with_negative: bool,
                   input_file: str | os.PathLike) -> SquadExample | SkippedAnswer:
    """Builds the example of one "qas" entry, or the record of why it was skipped."""
    qas_id = _require(qa, "id", str, input_file, "a question")
    where = f"question id {qas_id!r}"
    example = SquadExample(
        qas_id=qas_id,
        question_text=_require(qa, "question", str, input_file, where),
        doc_tokens=doc_tokens)
    if not is_training:
        return example
    if version_2_with_negative:
        example.is_impossible = _require(qa, "is_impossible", bool, input_file, where)
    if example.is_impossible:
        example.orig_answer_text, example.start_position, example.end_position = "", -1, -1
        return example
    answers = _require(qa, "answers", list, input_file, where)
    if len(answers) != 1:
        raise ValueError(f"{input_file}: {where}: for training, each question should have "
                         f"exactly 1 answer, found {len(answers)}")
    answer_text, answer_offset = _read_answer(answers[0], context, input_file, where)
    example.orig_answer_text = answer_text
    example.start_position = char_to_word_offset[answer_offset]
    example.end_position = char_to_word_offset[answer_offset + len(answer_text) - 1]
    span_text = " ".join(doc_tokens[example.start_position:example.end_position + 1])
    cleaned_answer_text = " ".join(tokenization.whitespace_tokenize(answer_text))
    if span_text.find(cleaned_answer_text) == -1:
        return SkippedAnswer(qas_id=qas_id, span_text=span_text,
                             answer_text=cleaned_answer_text)
    return example


def _read_answer(answer: Any, context: str, input_file: str | os.PathLike,
                 where: str) -> tuple[str, int]:
    """Returns (text, answer_start) of a training answer that lies inside `context`."""
    text = _require(answer, "text", str, input_file, f"{where}, its answer")
    offset = _require(answer, "answer_start", int, input_file, f"{where}, its answer")
    if not text:
        raise ValueError(f"{input_file}: {where}: the answer text is empty")
    if offset < 0 or offset + len(text) > len(context):
        raise ValueError(
            f"{input_file}: {where}: answer_start {offset} with an answer of {len(text)} "
            f"characters lies outside the context of {len(context)} characters")
    return text, offset


def _require(record: Any, key: str, kind: type, input_file: str | os.PathLike,
             where: str) -> Any:
    """Returns `record[key]`, checking that it exists and has type `kind`."""
    if not isinstance(record, dict) or key not in record:
        raise ValueError(f'{input_file}: {where}: missing key "{key}"')
    value = record[key]
    # bool is a subclass of int: an answer_start of `true` is not an offset.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f'{input_file}: {where}: "{key}" should be a {kind.__name__}, '
                         f"got {type(value).__name__}")
    return value
