"""What every task's Python API for new text shares: a model read from any checkpoint format with
its tokenizer, texts turned into features (long ones truncated and counted), and batched
prediction in the input's order (`running.prediction`)."""
from __future__ import annotations

import os
from typing import Sequence

from absl import logging
import keras
import numpy as np

from data import tokenization
from data.features import EncodedSequence, text_sequence
from modeling import checkpoints
from running import prediction
from running.batching import ArrayExamples, Batching
from utils.output_files import write_text_atomically

# The fine-tuned model a fine-tuning script writes into its --output_dir.
FINE_TUNED_PREFIX = "model.ckpt"
# A tagger's or a classifier's labels, one a line, in class-index order, beside its model.
LABEL_FILE = "label_list.txt"


class TextModel:
    """Texts -> features -> a model's per-example outputs, in order."""

    def __init__(self, model: keras.Model, tokenizer: tokenization.FullTokenizer,
                 max_seq_length: int, batch_size: int, batching: Batching):
        model.config.check_max_seq_length(max_seq_length)
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be positive")
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.batching = batching

    def _features(self, texts: Sequence[str], tokenizer) -> list[EncodedSequence]:
        """One sequence per text (`data.features.text_sequence`); truncated ones are counted."""
        found = [text_sequence(text, tokenizer, self.max_seq_length) for text in texts]
        truncated = sum(was_truncated for _, was_truncated in found)
        if truncated:
            logging.info("%d of %d texts were longer than max_seq_length=%d and were truncated",
                         truncated, len(texts), self.max_seq_length)
        return [sequence for sequence, _ in found]

    def _predict(self, model: keras.Model, arrays: dict[str, np.ndarray]) -> dict:
        return prediction.predict(model, ArrayExamples(arrays, batching=self.batching),
                                  self.batch_size)


def model_folder(path: str) -> str:
    """The folder of a model: `path` itself if it is one, else the folder of its prefix."""
    return path if os.path.isdir(path) else os.path.dirname(path)


def write_labels(folder: str, labels: Sequence[str]) -> None:
    """`label_list.txt` in `folder`: the labels a model was trained with, one a line."""
    write_text_atomically(os.path.join(folder, LABEL_FILE), "".join(f"{label}\n"
                                                                    for label in labels))


def saved_labels(path: str) -> list[str] | None:
    """The labels a training run wrote beside the model at `path` (`label_list.txt`), or None."""
    label_file = os.path.join(model_folder(path), LABEL_FILE)
    if not os.path.isfile(label_file):
        return None
    with open(label_file, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def checked_lower_case(do_lower_case: bool | None, loaded: checkpoints.LoadedModel,
                       path: str) -> bool:
    """The casing given, else the one the model's folder records, else lower case; checked
    against the names of Google's releases."""
    if do_lower_case is None:
        do_lower_case = True if loaded.do_lower_case is None else loaded.do_lower_case
    tokenization.validate_case_matches_checkpoint(do_lower_case, path)
    return do_lower_case


def read_fine_tuned(path: str, head: str, description: str, vocab_file: str | None,
                    bert_config_file: str | None, do_lower_case: bool | None
                    ) -> tuple[checkpoints.LoadedModel, tokenization.FullTokenizer]:
    """A fine-tuned model with `head` from `path` (a checkpoint, or a script's --output_dir
    holding `model.ckpt`) and its tokenizer.

    Raises:
        ValueError: the checkpoint holds another model.
    """
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, FINE_TUNED_PREFIX + ".index")):
        path = os.path.join(path, FINE_TUNED_PREFIX)
    loaded = checkpoints.read_model(path, bert_config_file=bert_config_file,
                                    vocab_file=vocab_file)
    if loaded.spec.head != head:
        raise ValueError(f"{path} holds a model with the {loaded.spec.head!r} head, not a "
                         f"fine-tuned {description}")
    tokenizer = tokenization.FullTokenizer(loaded.vocab_file,
                                           checked_lower_case(do_lower_case, loaded, path))
    return loaded, tokenizer


def parts(text: str, layout: str) -> list[str]:
    """The `|||`-separated parts of `text`, as many as `layout` has.

    Raises:
        ValueError: another number of parts.
    """
    found = [part.strip() for part in text.split("|||")]
    if len(found) != layout.count("|||") + 1:
        raise ValueError(f"expected `{layout}`, found {len(found)} part(s)")
    return found


def parsed(texts: Sequence[str], parse) -> dict[int, object]:
    """`parse(text)` of every non-empty text, by index; an error names the text."""
    found = {}
    for index, text in enumerate(texts):
        if text.strip():
            try:
                found[index] = parse(text)
            except ValueError as error:
                raise ValueError(f"texts[{index}]: {error}") from None
    return found
