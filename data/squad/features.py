"""`SquadExample`s -> fixed-length model inputs, as the original `convert_examples_to_features`.

Each example becomes one feature per document window:
`[CLS] query [SEP] window of the WordPiece-tokenized context [SEP]`, zero-padded to
`max_seq_length`. Windows of at most `max_seq_length - len(query) - 3` tokens start every
`doc_stride` tokens until one reaches the end of the context. A token seen by several windows
is scored in the window where it has the most context on its shorter side
(`token_is_max_context`); only that window may start an answer there at prediction time. The
windows and that rule are `data.windows`, which NER and classification of long texts share.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable, Iterator, Sequence

import numpy as np

from data import features as model_inputs, tfrecord_schema as schema, windows
from data.squad.examples import SquadExample
from data.tokenization import FullTokenizer

# The first unique id, as in the original.
FIRST_UNIQUE_ID = 1000000000


@dataclasses.dataclass
class SquadFeatures:
    """One document window of one example, ready for the model.

    `token_to_orig_map` and `token_is_max_context` are keyed by positions in `tokens` that
    hold context tokens. `start_position` / `end_position` (inclusive, in `tokens`) are set
    for training only: 0 / 0 when the answer is not wholly inside this window or the
    question is unanswerable.
    """

    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: list[str]
    token_to_orig_map: dict[int, int]  # Position in `tokens` -> index in `doc_tokens`.
    token_is_max_context: dict[int, bool]
    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]
    start_position: int | None = None
    end_position: int | None = None
    is_impossible: bool = False


@dataclasses.dataclass
class _TokenizedDoc:
    """The WordPiece tokens of one paragraph and their alignment with its words."""

    words: list[str]  # The `doc_tokens` list these pieces were made from.
    pieces: list[str]
    piece_to_word: list[int]
    word_to_first_piece: list[int]


def check_window_settings(max_seq_length: int, max_query_length: int, doc_stride: int,
                          prefix: str = "") -> None:
    """Raises ValueError for windows without room for the context or a stride below 1; names
    the settings with `prefix` ("--" for flags)."""
    if max_seq_length <= max_query_length + 3:
        raise ValueError(f"{prefix}max_seq_length={max_seq_length} leaves no room for the "
                         f"context: it must exceed {prefix}max_query_length={max_query_length}"
                         " + 3 ([CLS] and two [SEP])")
    if doc_stride < 1:
        raise ValueError(f"{prefix}doc_stride={doc_stride} must be at least 1")


def convert_examples_to_features(examples: Iterable[SquadExample], tokenizer: FullTokenizer,
                                 max_seq_length: int, doc_stride: int, max_query_length: int,
                                 is_training: bool) -> Iterator[SquadFeatures]:
    """Yields the features of `examples`, in order, with consecutive unique ids.

    Raises:
      ValueError: the settings fail `check_window_settings`, or `max_seq_length` leaves no
        room for context tokens after a question.
    """
    check_window_settings(max_seq_length, max_query_length, doc_stride)
    unique_id = FIRST_UNIQUE_ID
    doc: _TokenizedDoc | None = None
    for example_index, example in enumerate(examples):
        query_tokens = tokenizer.tokenize(example.question_text)[:max_query_length]
        # Questions about one paragraph share its word list: tokenize it once.
        if doc is None or doc.words is not example.doc_tokens:
            doc = _tokenize_doc(example.doc_tokens, tokenizer)
        max_tokens_for_doc = max_seq_length - len(query_tokens) - 3  # [CLS], [SEP], [SEP]
        if max_tokens_for_doc < 1:
            raise ValueError(
                f"question id {example.qas_id!r}: max_seq_length {max_seq_length} leaves no "
                f"room for the context after {len(query_tokens)} question tokens")
        answer_span = _answer_piece_span(example, doc, tokenizer) if is_training else None
        doc_spans = windows.spans(len(doc.pieces), max_tokens_for_doc, doc_stride)
        best_span_of_piece = windows.max_context_spans(doc_spans, len(doc.pieces))
        for doc_span_index, doc_span in enumerate(doc_spans):
            feature = _window_feature(doc, query_tokens, doc_span, doc_span_index,
                                      best_span_of_piece, tokenizer, max_seq_length)
            feature.unique_id = unique_id
            feature.example_index = example_index
            feature.is_impossible = example.is_impossible
            if is_training:
                feature.start_position, feature.end_position = _window_positions(
                    answer_span, doc_span, len(query_tokens))
            yield feature
            unique_id += 1


def _tokenize_doc(words: list[str], tokenizer: FullTokenizer) -> _TokenizedDoc:
    doc = _TokenizedDoc(words=words, pieces=[], piece_to_word=[], word_to_first_piece=[])
    for word_index, word in enumerate(words):
        doc.word_to_first_piece.append(len(doc.pieces))
        for piece in tokenizer.tokenize(word):
            doc.piece_to_word.append(word_index)
            doc.pieces.append(piece)
    return doc


def _answer_piece_span(example: SquadExample, doc: _TokenizedDoc,
                       tokenizer: FullTokenizer) -> tuple[int, int] | None:
    """The answer as inclusive WordPiece positions, or None if unanswerable."""
    if example.is_impossible:
        return None
    start = doc.word_to_first_piece[example.start_position]
    if example.end_position < len(example.doc_tokens) - 1:
        end = doc.word_to_first_piece[example.end_position + 1] - 1
    else:
        end = len(doc.pieces) - 1
    return improve_answer_span(doc.pieces, start, end, tokenizer, example.orig_answer_text)


def improve_answer_span(doc_pieces: Sequence[str], input_start: int, input_end: int,
                        tokenizer: FullTokenizer, orig_answer_text: str) -> tuple[int, int]:
    """Narrows a word-aligned answer span to the pieces that spell the tokenized answer.

    The annotated answer "1895" inside the word "(1895-1943)." becomes the single piece
    "1895". Where no sub-span matches (e.g. "Japan" annotated inside "Japanese"), the
    span is kept. The first match in (start ascending, end descending) order wins.
    """
    tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))
    for new_start in range(input_start, input_end + 1):
        for new_end in range(input_end, new_start - 1, -1):
            if " ".join(doc_pieces[new_start:new_end + 1]) == tok_answer_text:
                return new_start, new_end
    return input_start, input_end


def _window_feature(doc: _TokenizedDoc, query_tokens: list[str], doc_span: windows.Span,
                    doc_span_index: int, best_span_of_piece: list[int],
                    tokenizer: FullTokenizer, max_seq_length: int) -> SquadFeatures:
    """The tokens, maps and padded id lists of one window (ids and positions set later):
    `[CLS] question [SEP] window [SEP]` (`data.features`)."""
    offset = len(query_tokens) + 2  # [CLS] question [SEP]
    token_to_orig_map, token_is_max_context = {}, {}
    for position, piece_index in enumerate(range(doc_span.start, doc_span.end), start=offset):
        token_to_orig_map[position] = doc.piece_to_word[piece_index]
        token_is_max_context[position] = best_span_of_piece[piece_index] == doc_span_index
    sequence = model_inputs.encode(*model_inputs.sequence_tokens(
        query_tokens, doc.pieces[doc_span.start:doc_span.end], pair=True), tokenizer,
        max_seq_length)
    return SquadFeatures(
        unique_id=0, example_index=0, doc_span_index=doc_span_index, tokens=sequence.tokens,
        token_to_orig_map=token_to_orig_map, token_is_max_context=token_is_max_context,
        input_ids=sequence.input_ids, input_mask=sequence.input_mask,
        segment_ids=sequence.segment_ids)


def _window_positions(answer_span: tuple[int, int] | None, doc_span: windows.Span,
                      num_query_tokens: int) -> tuple[int, int]:
    """Training targets in one window; [CLS] (0, 0) when the answer is not wholly inside."""
    if answer_span is None:
        return 0, 0
    start, end = answer_span
    doc_end = doc_span.end - 1
    if start < doc_span.start or end > doc_end:
        return 0, 0
    doc_offset = num_query_tokens + 2  # [CLS] query [SEP]
    return start - doc_span.start + doc_offset, end - doc_span.start + doc_offset


def features_to_arrays(features: Sequence[SquadFeatures],
                       is_training: bool) -> dict[str, np.ndarray]:
    """Stacks features into int32 arrays keyed by the TFRecord schema names.

    Returns:
      `unique_ids` [N], `input_ids`, `input_mask`, `segment_ids` [N, max_seq_length], and
      for training `start_positions`, `end_positions` [N].

    Raises:
      ValueError: training features without positions.
    """
    arrays = {schema.UNIQUE_IDS: np.array([f.unique_id for f in features], dtype=np.int32),
              **model_inputs.stack(features)}
    if is_training:
        missing = [f.unique_id for f in features if f.start_position is None]
        if missing:
            raise ValueError(f"features {missing[:5]} have no start/end positions; they were "
                             "not converted with is_training=True")
        arrays[schema.START_POSITIONS] = np.array([f.start_position for f in features],
                                                  dtype=np.int32)
        arrays[schema.END_POSITIONS] = np.array([f.end_position for f in features],
                                                dtype=np.int32)
    return arrays
