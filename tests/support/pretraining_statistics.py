"""The statistics the issue compares pretraining data by, from records or reference instances."""
from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np
import tensorflow as tf

from data import tfrecord_schema


@dataclasses.dataclass
class PretrainingStatistics:
    """Instance count, next-sentence and masking shares, and the length distribution."""

    instances: int
    fraction_random_next: float
    masked_per_instance: float
    fraction_mask: float
    fraction_random: float
    fraction_kept: float
    length_histogram: np.ndarray  # float64 [max_seq_length + 1], sums to 1
    words_with_masked_piece: int
    partly_masked_words: int

    def total_variation(self, other: PretrainingStatistics) -> float:
        """Total-variation distance between the two length distributions."""
        return 0.5 * float(np.abs(self.length_histogram - other.length_histogram).sum())


def statistics_from_arrays(input_ids: np.ndarray, input_mask: np.ndarray,
                           masked_lm_positions: np.ndarray, masked_lm_ids: np.ndarray,
                           masked_lm_weights: np.ndarray, next_sentence_labels: np.ndarray,
                           vocab: Mapping[str, int]) -> PretrainingStatistics:
    """Statistics of N instances given as the record features ([N, L], [N, P], [N])."""
    lengths = input_mask.sum(axis=1)
    real = masked_lm_weights > 0
    rows = np.nonzero(real)[0]
    shown = input_ids[rows, masked_lm_positions[real]]
    labels = masked_lm_ids[real]
    is_mask = shown == vocab["[MASK]"]
    is_kept = ~is_mask & (shown == labels)
    histogram = np.bincount(lengths, minlength=input_ids.shape[1] + 1).astype(np.float64)
    with_masked, partly = _masked_words(input_ids, masked_lm_positions, masked_lm_ids, real,
                                        lengths, vocab)
    return PretrainingStatistics(
        instances=len(input_ids),
        fraction_random_next=float(np.mean(next_sentence_labels)),
        masked_per_instance=float(real.sum() / len(input_ids)),
        fraction_mask=float(is_mask.mean()), fraction_kept=float(is_kept.mean()),
        fraction_random=float((~is_mask & ~is_kept).mean()),
        length_histogram=histogram / histogram.sum(),
        words_with_masked_piece=with_masked, partly_masked_words=partly)


def _masked_words(input_ids, positions, labels, real, lengths, vocab) -> tuple[int, int]:
    """(words with a masked piece, words with some but not all pieces masked).

    A word is a token that does not start with `##` and the `##` pieces that follow it, in the
    original (unmasked) sequence; [CLS] and [SEP] end words, so a `##` piece that truncation
    left at the start of a segment begins a word fragment of its own.
    """
    continuation = np.zeros(max(vocab.values()) + 1, bool)
    for token, index in vocab.items():
        continuation[index] = token.startswith("##")
    original = input_ids.copy()
    rows = np.nonzero(real)[0]
    original[rows, positions[real]] = labels[real]
    masked = np.zeros(input_ids.shape, bool)
    masked[rows, positions[real]] = True
    real_positions = np.arange(input_ids.shape[1])[None, :] < lengths[:, None]
    special = (original == vocab["[CLS]"]) | (original == vocab["[SEP]"])
    after_special = np.zeros_like(special)
    after_special[:, 1:] = special[:, :-1]
    starts = ~continuation[original] | ~real_positions | special | after_special
    starts[:, 0] = True
    word = np.cumsum(starts, axis=1) + np.arange(len(input_ids))[:, None] * input_ids.shape[1]
    pieces = np.bincount(word[real_positions])
    masked_pieces = np.bincount(word[masked], minlength=len(pieces))
    any_masked = masked_pieces > 0
    return int(any_masked.sum()), int((any_masked & (masked_pieces < pieces)).sum())


def read_records(paths: Sequence[str], max_seq_length: int,
                 max_predictions_per_seq: int) -> dict[str, np.ndarray]:
    """All records of TFRecord files, parsed with the pretraining spec."""
    spec = tfrecord_schema.pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
    columns: dict[str, list[np.ndarray]] = {key: [] for key in spec}
    for batch in tf.data.TFRecordDataset(list(paths)).batch(4096):
        for key, value in tf.io.parse_example(batch, spec).items():
            columns[key].append(value.numpy())
    return {key: np.concatenate(values) for key, values in columns.items()}


def statistics_from_records(records: Mapping[str, np.ndarray],
                            vocab: Mapping[str, int]) -> PretrainingStatistics:
    """Statistics of parsed records (`read_records`)."""
    return statistics_from_arrays(
        records["input_ids"], records["input_mask"], records["masked_lm_positions"],
        records["masked_lm_ids"], records["masked_lm_weights"],
        records["next_sentence_labels"][:, 0], vocab)


def statistics_from_instances(instances: Sequence, vocab: Mapping[str, int],
                              max_seq_length: int,
                              max_predictions_per_seq: int) -> PretrainingStatistics:
    """Statistics of reference instances (tokens as strings) or fixture JSON records."""
    count = len(instances)
    input_ids = np.zeros((count, max_seq_length), np.int64)
    input_mask = np.zeros((count, max_seq_length), np.int64)
    positions = np.zeros((count, max_predictions_per_seq), np.int64)
    labels = np.zeros((count, max_predictions_per_seq), np.int64)
    weights = np.zeros((count, max_predictions_per_seq), np.float32)
    next_sentence = np.zeros(count, np.int64)
    for row, instance in enumerate(instances):
        get = instance.get if isinstance(instance, dict) else instance.__getattribute__
        tokens = get("tokens")
        input_ids[row, :len(tokens)] = [vocab[token] for token in tokens]
        input_mask[row, :len(tokens)] = 1
        masked = get("masked_lm_positions")
        positions[row, :len(masked)] = masked
        labels[row, :len(masked)] = [vocab[token] for token in get("masked_lm_labels")]
        weights[row, :len(masked)] = 1.0
        next_sentence[row] = int(get("is_random_next"))
    return statistics_from_arrays(input_ids, input_mask, positions, labels, weights,
                                  next_sentence, vocab)
