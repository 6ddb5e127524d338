"""Token-classification features for CoNLL-2003 NER, as in the BERT paper (section 5.3).

Each sentence becomes one sequence `[CLS] left-context sentence right-context [SEP]`, all
segment 0. Every word is split into WordPiece tokens and only its first piece carries the
word's label; other pieces, context, `[CLS]`, `[SEP]` and padding get label id -1, which the
loss and the predictions ignore. Without document context the contexts are empty; with it,
the tokens of the neighbouring sentences of the same document fill the sequence, the
sentence as centred as the document allows ("maximal document context").

A sentence longer than the sequence is cut for training (its words that lose their first piece
are predicted `O`). For tagging, with a `doc_stride`, it becomes overlapping windows
(`data.windows`, SQuAD's rule): windows of `max_seq_length - 2` tokens every `doc_stride` tokens
over the sentence or, with document context, over the sentence and up to half a window of the
document on each side; each word is tagged from the window where its first piece has the most
context, and a window that is no word's best is left out. A sentence that fits is one sequence
either way.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Sequence

import numpy as np

from data import features as model_inputs, tokenization, windows
from data.ner import conll
from data.tfrecord_schema import INPUT_IDS, INPUT_MASK, SEGMENT_IDS
from utils import output_files

IGNORED_LABEL_ID = -1


@dataclasses.dataclass(frozen=True)
class NerFeatures:
    """Model inputs of every sentence (one row each, or one per window), in file order, and
    where each word's label sits.

    Attributes:
        input_ids: int32 [N, T] token ids, zero-padded.
        input_mask: int32 [N, T] 1 for real tokens (context included), 0 for padding.
        segment_ids: int32 [N, T] all 0.
        label_ids: int32 [N, T] label index at each word's first piece in the row it is tagged
            from, -1 elsewhere.
        word_rows: Per sentence, int32 [num_words] the row each word is tagged from, -1 where
            the word has no piece inside a sequence.
        word_positions: Per sentence, int32 [num_words] position of each word's first piece in
            that row, -1 where it has none.
    """

    input_ids: np.ndarray
    input_mask: np.ndarray
    segment_ids: np.ndarray
    label_ids: np.ndarray
    word_rows: list[np.ndarray]
    word_positions: list[np.ndarray]

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The model inputs and labels keyed by the TFRecord schema names, for `tf.data`."""
        return {INPUT_IDS: self.input_ids, INPUT_MASK: self.input_mask,
                SEGMENT_IDS: self.segment_ids, "label_ids": self.label_ids}


def context_window(num_left: int, sentence_length: int, num_right: int,
                   max_tokens: int) -> tuple[int, int]:
    """How many context tokens to take from each side of a sentence.

    Fills `max_tokens - sentence_length` with as many context tokens as there are, split
    as evenly as possible (the extra odd token goes right); a side that runs out leaves
    its share to the other.

    Args:
        num_left: Tokens available before the sentence in its document.
        sentence_length: Tokens of the sentence.
        num_right: Tokens available after it.
        max_tokens: Room in the sequence, without `[CLS]` and `[SEP]`.

    Returns:
        `(left, right)`: context tokens to take from the end of the left side and from the
        start of the right side.
    """
    budget = max(max_tokens - sentence_length, 0)
    left = min(num_left, budget // 2)
    right = min(num_right, budget - left)
    left = min(num_left, budget - right)
    return left, right


@dataclasses.dataclass(frozen=True)
class _TokenizedDocument:
    """A document's WordPiece tokens, sentence after sentence, and where each sentence lies."""

    tokens: list[str]
    sentence_starts: list[int]
    # Per sentence, each word's first-piece offset within the sentence's tokens (-1 if none).
    first_pieces: list[list[int]]


def _tokenize_document(document: conll.ConllDocument,
                       tokenizer: tokenization.FullTokenizer) -> _TokenizedDocument:
    tokens: list[str] = []
    sentence_starts, first_pieces = [], []
    for sentence in document.sentences:
        sentence_starts.append(len(tokens))
        offsets = []
        for word in sentence.words:
            pieces = tokenizer.tokenize(word)
            # A word of characters the tokenizer drops (control characters) has no piece.
            offsets.append(len(tokens) - sentence_starts[-1] if pieces else -1)
            tokens += pieces
        first_pieces.append(offsets)
    sentence_starts.append(len(tokens))
    return _TokenizedDocument(tokens, sentence_starts, first_pieces)


def _sentence_sequence(document: _TokenizedDocument, index: int, max_seq_length: int,
                       document_context: bool) -> tuple[list[str], list[int]]:
    """Tokens `[CLS] ... [SEP]` for sentence `index` and its words' first-piece positions."""
    start, end = document.sentence_starts[index], document.sentence_starts[index + 1]
    room = max_seq_length - 2
    sentence_tokens = document.tokens[start:min(end, start + room)]
    left = right = 0
    if document_context:
        left, right = context_window(start, end - start, len(document.tokens) - end, room)
    tokens, _ = model_inputs.sequence_tokens(document.tokens[start - left:start] + sentence_tokens
                                             + document.tokens[end:end + right])
    positions = [1 + left + offset if 0 <= offset < len(sentence_tokens) else -1
                 for offset in document.first_pieces[index]]
    return tokens, positions


def _sentence_windows(document: _TokenizedDocument, index: int, max_seq_length: int,
                      document_context: bool, doc_stride: int
                      ) -> list[tuple[list[str], list[int]]]:
    """The windows of a sentence longer than a sequence, as `_sentence_sequence` gives one
    sequence: tokens `[CLS] ... [SEP]` and the positions of the words tagged from it (-1 for
    the others)."""
    start, end = document.sentence_starts[index], document.sentence_starts[index + 1]
    room = max_seq_length - 2
    margin = room // 2 if document_context else 0
    first, last = max(0, start - margin), min(len(document.tokens), end + margin)
    spans = windows.spans(last - first, room, doc_stride)
    best = windows.max_context_spans(spans, last - first)
    words_of_span: dict[int, list[int]] = {}
    for word, offset in enumerate(document.first_pieces[index]):
        if offset >= 0:
            words_of_span.setdefault(best[start - first + offset], []).append(word)
    found = []
    for span_index in sorted(words_of_span):
        span = spans[span_index]
        positions = [-1] * len(document.first_pieces[index])
        for word in words_of_span[span_index]:
            positions[word] = 1 + start - first + document.first_pieces[index][word] - span.start
        found.append((model_inputs.sequence_tokens(
            document.tokens[first + span.start:first + span.end])[0], positions))
    return found


def _sequences(document: _TokenizedDocument, index: int, max_seq_length: int,
               document_context: bool, doc_stride: int | None
               ) -> list[tuple[list[str], list[int]]]:
    """Sentence `index` as one sequence, or as windows when it is too long and `doc_stride`
    is given."""
    length = document.sentence_starts[index + 1] - document.sentence_starts[index]
    if doc_stride is None or length <= max_seq_length - 2:
        return [_sentence_sequence(document, index, max_seq_length, document_context)]
    return _sentence_windows(document, index, max_seq_length, document_context, doc_stride)


def convert_documents_to_features(documents: Sequence[conll.ConllDocument],
                                  tokenizer: tokenization.FullTokenizer,
                                  labels: Sequence[str], max_seq_length: int,
                                  document_context: bool = False,
                                  doc_stride: int | None = None) -> NerFeatures:
    """Converts every sentence of `documents` into a model sequence, or a long one into windows.

    Args:
        documents: Read CoNLL documents (IOB2 tags).
        tokenizer: WordPiece tokenizer.
        labels: Label strings in class-index order (`data.ner.conll.label_list`).
        max_seq_length: Length T of every sequence (at least 3).
        document_context: Whether to fill each sequence with the neighbouring sentences
            of the same document.
        doc_stride: Tokens between the starts of the windows of a sentence longer than a
            sequence; None cuts it instead (training).

    Returns:
        The features: one row per sentence, or per window of a long one, in document and
        sentence order.

    Raises:
        ValueError: If `max_seq_length` < 3, `doc_stride` < 1 or a gold tag is not in `labels`.
    """
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
    if doc_stride is not None and doc_stride < 1:
        raise ValueError(f"doc_stride must be at least 1, got {doc_stride}")
    label_index = {label: index for index, label in enumerate(labels)}
    sequences, label_rows = [], []
    word_rows, word_positions = [], []
    for document in documents:
        tokenized = _tokenize_document(document, tokenizer)
        for index, sentence in enumerate(document.sentences):
            sentence_rows = np.full(len(sentence.tokens), -1, np.int32)
            sentence_positions = np.full(len(sentence.tokens), -1, np.int32)
            for tokens, positions in _sequences(tokenized, index, max_seq_length,
                                                document_context, doc_stride):
                positions = np.asarray(positions, dtype=np.int32)
                sentence_rows[positions >= 0] = len(sequences)
                sentence_positions[positions >= 0] = positions[positions >= 0]
                sequences.append(model_inputs.encode(tokens, [0] * len(tokens), tokenizer,
                                                     max_seq_length))
                label_rows.append(_label_row(sentence, positions, label_index, max_seq_length))
            word_rows.append(sentence_rows)
            word_positions.append(sentence_positions)
    arrays = {name: values.reshape(-1, max_seq_length)
              for name, values in model_inputs.stack(sequences).items()}
    return NerFeatures(**arrays, label_ids=np.asarray(label_rows, np.int32).reshape(
        -1, max_seq_length), word_rows=word_rows, word_positions=word_positions)


def _label_row(sentence: conll.ConllSentence, positions: Sequence[int],
               label_index: dict[str, int], max_seq_length: int) -> list[int]:
    row = [IGNORED_LABEL_ID] * max_seq_length
    for offset, (tag, position) in enumerate(zip(sentence.tags, positions)):
        if tag not in label_index:
            raise ValueError(f"Line {sentence.first_line + offset}: tag {tag!r} is not one of "
                             f"the labels {list(label_index)}")
        if position >= 0:
            row[position] = label_index[tag]
    return row


def predicted_word_tags(features: NerFeatures, predicted_label_ids: np.ndarray,
                        labels: Sequence[str]) -> list[list[str]]:
    """Maps per-token predictions back to one tag per word.

    Args:
        features: The features the predictions were made on.
        predicted_label_ids: int [N, T] predicted label index at every position.
        labels: Label strings in class-index order.

    Returns:
        Per sentence, the label predicted at each word's first piece in the row it is tagged
        from; `O` for a word without a piece in a sequence.

    Raises:
        ValueError: If the predictions' shape does not match the features.
    """
    predicted_label_ids = np.asarray(predicted_label_ids)
    if predicted_label_ids.shape != features.input_ids.shape:
        raise ValueError(f"Predictions of shape {predicted_label_ids.shape} do not match "
                         f"features of shape {features.input_ids.shape}")
    tags = []
    for rows, positions in zip(features.word_rows, features.word_positions):
        tags.append([labels[predicted_label_ids[r, p]] if p >= 0 else conll.OUTSIDE_TAG
                     for r, p in zip(rows, positions)])
    return tags


def write_conll_predictions(path: str | os.PathLike, sentences: Sequence[conll.ConllSentence],
                            predicted_tags: Sequence[Sequence[str]]) -> None:
    """Writes `word gold predicted` lines, a blank line after each sentence, atomically.

    The file is conlleval's input format: `conlleval < path` scores it.

    Raises:
        ValueError: Before writing anything, if the sentence counts or lengths differ.
    """
    if len(sentences) != len(predicted_tags):
        raise ValueError(f"{len(sentences)} sentences but {len(predicted_tags)} predicted")
    lines = []
    for sentence, tags in zip(sentences, predicted_tags):
        if len(sentence.tokens) != len(tags):
            raise ValueError(f"Sentence at line {sentence.first_line}: {len(sentence.tokens)} "
                             f"words but {len(tags)} predicted tags")
        lines += [f"{token.word} {token.tag} {tag}\n" for token, tag in zip(sentence.tokens, tags)]
        lines.append("\n")
    output_files.write_text_atomically(path, "".join(lines))

