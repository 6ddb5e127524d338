"""Sentence(-pair) classification features exactly as the original `run_classifier.py` builds them.

An `InputExample` (one or two texts and a label) becomes an `InputFeatures`: the sequence
`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` of `data.features` (pairs truncated longest-first,
zero-padded to `max_seq_length`) and the label's id.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

from absl import logging
import numpy as np

from data import features as model_inputs, tokenization

# The original logs the first few converted examples; so do we.
_NUM_LOGGED_EXAMPLES = 5


@dataclasses.dataclass(frozen=True)
class InputExample:
    """One example of a sequence (pair) classification or regression task.

    Attributes:
        guid: Unique id, the original's `"<set_type>-<n>"`.
        text_a: First (or only) text, untokenized.
        text_b: Second text of a pair task; None for single-sentence tasks.
        label: Label string (a class name, or a number for regression), or for a multi-label
            task the tuple of its class names. Unlabelled test examples carry the task's first
            label, as in the original.
        index: The id column of the source file (what the GLUE server calls `index`);
            None where the file has no such column.
    """

    guid: str
    text_a: str
    text_b: str | None = None
    label: str | tuple[str, ...] | None = None
    index: str | None = None


@dataclasses.dataclass(frozen=True)
class InputFeatures:
    """Model inputs of one example, each of length `max_seq_length`.

    Attributes:
        input_ids: Token ids, zero-padded.
        input_mask: 1 for real tokens, 0 for padding.
        segment_ids: 0 for `[CLS] A [SEP]`, 1 for `B [SEP]`, 0 for padding.
        label_id: Class index, the score itself for a regression task, or for a multi-label
            task 1.0 or 0.0 for each label.
        is_real_example: False for the original's padding examples (TPU batches); the original
            metrics weight by it.
    """

    input_ids: list[int]
    input_mask: list[int]
    segment_ids: list[int]
    label_id: int | float | list[float]
    is_real_example: bool = True


def example_tokens(example: InputExample, max_seq_length: int,
                   tokenizer: tokenization.FullTokenizer) -> tuple[list[str], list[int]]:
    """Returns the tokens `[CLS] A [SEP] (B [SEP])` and their segment ids, before padding
    (`data.features.truncated_tokens`)."""
    return model_inputs.truncated_tokens(
        tokenizer.tokenize(example.text_a),
        tokenizer.tokenize(example.text_b) if example.text_b else None, max_seq_length)


def convert_single_example(example: InputExample,
                           label_list: Sequence[str] | None, max_seq_length: int,
                           tokenizer: tokenization.FullTokenizer) -> InputFeatures:
    """Converts one example into `InputFeatures`.

    Args:
        example: The example.
        label_list: The task's labels in class-index order; None for regression, where the
            label string is parsed as a float.
        max_seq_length: Length of every output sequence (at least 3).
        tokenizer: WordPiece tokenizer.

    Returns:
        The features.

    Raises:
        ValueError: If the example's label is not in `label_list` or not a number.
    """
    sequence = model_inputs.encode(*example_tokens(example, max_seq_length, tokenizer), tokenizer,
                                   max_seq_length)
    return InputFeatures(input_ids=sequence.input_ids, input_mask=sequence.input_mask,
                         segment_ids=sequence.segment_ids,
                         label_id=_label_id(example, label_list))


def _label_id(example: InputExample, label_list: Sequence[str] | None) -> int | float:
    if label_list is None:
        try:
            return float(example.label)
        except (TypeError, ValueError):
            raise ValueError(f"Example {example.guid}: regression label {example.label!r} "
                             "is not a number") from None
    if isinstance(example.label, tuple):
        unknown = [label for label in example.label if label not in label_list]
        if unknown:
            raise ValueError(f"Example {example.guid}: labels {unknown} are not among "
                             f"{list(label_list)}")
        return [float(label in example.label) for label in label_list]
    try:
        return list(label_list).index(example.label)
    except ValueError:
        raise ValueError(f"Example {example.guid}: label {example.label!r} is not one of "
                         f"{list(label_list)}") from None


def convert_examples_to_features(examples: Iterable[InputExample],
                                 label_list: Sequence[str] | None, max_seq_length: int,
                                 tokenizer: tokenization.FullTokenizer) -> list[InputFeatures]:
    """Converts every example with `convert_single_example`, logging the first few."""
    features = []
    for ex_index, example in enumerate(examples):
        feature = convert_single_example(example, label_list, max_seq_length, tokenizer)
        if ex_index < _NUM_LOGGED_EXAMPLES:
            _log_example(example, feature, tokenizer)
        features.append(feature)
    return features


def _log_example(example: InputExample, feature: InputFeatures,
                 tokenizer: tokenization.FullTokenizer) -> None:
    length = sum(feature.input_mask)
    tokens = tokenizer.convert_ids_to_tokens(feature.input_ids[:length])
    logging.info("*** Example ***")
    logging.info("guid: %s", example.guid)
    logging.info("tokens: %s", " ".join(tokenization.printable_text(t) for t in tokens))
    logging.info("input_ids: %s", " ".join(str(x) for x in feature.input_ids))
    logging.info("input_mask: %s", " ".join(str(x) for x in feature.input_mask))
    logging.info("segment_ids: %s", " ".join(str(x) for x in feature.segment_ids))
    logging.info("label: %s (id = %s)", example.label, feature.label_id)


def features_to_arrays(features: Sequence[InputFeatures], is_regression: bool = False
                       ) -> dict[str, np.ndarray]:
    """Stacks features into arrays keyed by the TFRecord schema names, for `tf.data`.

    Args:
        features: Features, all of the same sequence length.
        is_regression: Whether `label_ids` holds float scores (STS-B) rather than class ids.

    Returns:
        `input_ids`, `input_mask`, `segment_ids`: int32 [N, max_seq_length];
        `label_ids`: int32 [N] (float32 for regression, float32 [N, num_labels] of 0s and 1s
        for a multi-label task); `is_real_example`: int32 [N].
    """
    arrays = model_inputs.stack(features)
    multi_label = bool(features) and isinstance(features[0].label_id, list)
    arrays["label_ids"] = np.asarray([f.label_id for f in features],
                                     np.float32 if is_regression or multi_label else np.int32)
    arrays["is_real_example"] = np.asarray([f.is_real_example for f in features], np.int32)
    return arrays
