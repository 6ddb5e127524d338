"""Entity-level precision, recall and F1 exactly as the CoNLL shared tasks' `conlleval` counts them.

An entity ("chunk") opens where `data.ner.conll.starts_chunk` says so (a `B-` tag, or an `I-`
tag after `O` or after another type: IOB1 and IOB2 read alike) and runs until the next
opening or `O`; sentences never share an entity. A predicted entity is correct when a gold
entity has the same type, first word and last word. Precision, recall and F1 are in percent,
0 where undefined, overall and per type; token accuracy counts words whose predicted tag
equals the gold tag. seqeval's default mode computes the same numbers.
"""
from __future__ import annotations

import collections
import dataclasses
import os
from typing import Sequence

from data.ner import conll
from utils import output_files


@dataclasses.dataclass(frozen=True)
class Chunk:
    """An entity: its type and the half-open word range [start, end) in its sentence."""

    chunk_type: str
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class ChunkScores:
    """Entity counts of one type (or of all types) and the scores they give."""

    correct: int
    found_gold: int
    found_predicted: int

    @property
    def precision(self) -> float:
        return 100.0 * self.correct / self.found_predicted if self.found_predicted else 0.0

    @property
    def recall(self) -> float:
        return 100.0 * self.correct / self.found_gold if self.found_gold else 0.0

    @property
    def f1(self) -> float:
        total = self.precision + self.recall
        return 2.0 * self.precision * self.recall / total if total > 0 else 0.0


@dataclasses.dataclass(frozen=True)
class NerEvaluation:
    """What conlleval reports: overall and per-type entity scores, and token accuracy."""

    overall: ChunkScores
    per_type: dict[str, ChunkScores]
    correct_tags: int
    token_count: int

    @property
    def accuracy(self) -> float:
        return 100.0 * self.correct_tags / self.token_count if self.token_count else 0.0


def extract_chunks(tags: Sequence[str]) -> list[Chunk]:
    """Returns the entities of one sentence's tags, in order.

    Raises:
        ValueError: If a tag is not `O`, `B-TYPE` or `I-TYPE`.
    """
    chunks = []
    open_start, open_type = None, ""
    previous = conll.OUTSIDE_TAG
    for index, tag in enumerate(tags):
        opens = conll.starts_chunk(previous, tag)
        if open_start is not None and (opens or tag == conll.OUTSIDE_TAG):
            chunks.append(Chunk(open_type, open_start, index))
            open_start = None
        if opens:
            open_start, open_type = index, conll.parse_tag(tag)[1]
        previous = tag
    if open_start is not None:
        chunks.append(Chunk(open_type, open_start, len(tags)))
    return chunks


def evaluate_ner(gold_tags: Sequence[Sequence[str]],
                 predicted_tags: Sequence[Sequence[str]]) -> NerEvaluation:
    """Scores predicted tags against gold tags, sentence by sentence.

    Args:
        gold_tags: One list of tags per sentence.
        predicted_tags: The predicted tags, one per gold tag.

    Returns:
        The overall and per-type entity scores and the token accuracy.

    Raises:
        ValueError: If the sentence counts or lengths differ, or a tag is malformed.
    """
    if len(gold_tags) != len(predicted_tags):
        raise ValueError(f"{len(gold_tags)} gold sentences but {len(predicted_tags)} predicted")
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    correct_tags = token_count = 0
    for index, (gold, predicted) in enumerate(zip(gold_tags, predicted_tags)):
        if len(gold) != len(predicted):
            raise ValueError(f"Sentence {index}: {len(gold)} gold tags but "
                             f"{len(predicted)} predicted")
        gold_chunks = extract_chunks(gold)
        predicted_chunks = extract_chunks(predicted)
        for chunk in gold_chunks:
            counts[chunk.chunk_type]["found_gold"] += 1
        for chunk in predicted_chunks:
            counts[chunk.chunk_type]["found_predicted"] += 1
        for chunk in set(gold_chunks) & set(predicted_chunks):
            counts[chunk.chunk_type]["correct"] += 1
        correct_tags += sum(g == p for g, p in zip(gold, predicted))
        token_count += len(gold)
    per_type = {chunk_type: _scores(counts[chunk_type]) for chunk_type in sorted(counts)}
    overall = _scores(sum(counts.values(), collections.Counter()))
    return NerEvaluation(overall=overall, per_type=per_type, correct_tags=correct_tags,
                         token_count=token_count)


def _scores(counter: collections.Counter) -> ChunkScores:
    return ChunkScores(correct=counter["correct"], found_gold=counter["found_gold"],
                       found_predicted=counter["found_predicted"])


def format_report(evaluation: NerEvaluation) -> str:
    """The evaluation as conlleval prints it (each per-type line ends with the predicted count)."""
    overall = evaluation.overall
    lines = [f"processed {evaluation.token_count} tokens with {overall.found_gold} phrases; "
             f"found: {overall.found_predicted} phrases; correct: {overall.correct}."]
    if evaluation.token_count:
        lines.append(f"accuracy: {evaluation.accuracy:6.2f}%; "
                     f"precision: {overall.precision:6.2f}%; "
                     f"recall: {overall.recall:6.2f}%; FB1: {overall.f1:6.2f}")
    for chunk_type, scores in evaluation.per_type.items():
        lines.append(f"{chunk_type:>17}: precision: {scores.precision:6.2f}%; "
                     f"recall: {scores.recall:6.2f}%; FB1: {scores.f1:6.2f}  "
                     f"{scores.found_predicted}")
    return "\n".join(lines) + "\n"


def write_report(path: str | os.PathLike, evaluation: NerEvaluation) -> None:
    """Writes `format_report(evaluation)` to `path` atomically (temporary file, then rename)."""
    output_files.write_text_atomically(path, format_report(evaluation))

