"""Multiple choice: SWAG (paper section 4.4), and new text.

Each question becomes four sequences `[CLS] sent1 [SEP] sent2 ending_i [SEP]` (`data.swag`); one
learned vector scores each pooled output and a softmax runs over the four. Outputs: dev scores
(`eval_results.txt`, `eval_predictions.csv`), test predictions (`predictions.csv`), and
`MultipleChoice` for new text.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from typing import Sequence

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from data import tokenization
from data.classifier.metrics import loss_metrics
from data.swag import examples as swag
from modeling import losses
from modeling.config import BertConfig
from modeling.task_models import BertMultipleChoice
from tasks.text_model import TextModel, parsed, parts, read_fine_tuned
from training import fine_tuning
from training.batching import FIXED, ArrayExamples, Batching
from utils.output_files import write_eval_results, written_together

# The files of the SWAG distribution, by role.
FILES = {"train": "train.csv", "eval": "val.csv", "predict": "test.csv"}


def read_splits(data_dir: str, roles: Sequence[str]) -> dict[str, list[swag.SwagExample]]:
    """Reads the file of every role, so that bad input fails before anything is written."""
    examples = {}
    for role in roles:
        path = os.path.join(data_dir, FILES[role])
        if not os.path.isfile(path):
            raise FileNotFoundError(f"--do_{role}: {path} does not exist (--data_dir)")
        examples[role] = swag.read_swag_examples(path, require_labels=role != "predict")
    return examples


def _loss_fn(outputs, batch, normaliser):
    return {"loss": losses.mean_cross_entropy(outputs["logits"], batch["label_ids"],
                                              normaliser.global_batch_size(batch))}


def fine_tuning_task(config: BertConfig, do_lower_case: bool) -> fine_tuning.FineTuningTask:
    """The multiple-choice model (`cls/multiple_choice/...`) and its cross-entropy."""
    return fine_tuning.FineTuningTask(
        lambda: BertMultipleChoice(config), _loss_fn,
        head="SWAG: cls/multiple_choice/output_weights",
        save=functools.partial(fine_tuning.save_fine_tuned, do_lower_case=do_lower_case))


def training_data(examples: list[swag.SwagExample], tokenizer: tokenization.FullTokenizer,
                  max_seq_length: int, batching: Batching) -> ArrayExamples:
    return ArrayExamples(swag.convert_examples_to_arrays(examples, tokenizer, max_seq_length),
                         batching=batching)


def logits(model: keras.Model, examples: list[swag.SwagExample],
           tokenizer: tokenization.FullTokenizer, max_seq_length: int, batch_size: int,
           batching: Batching = FIXED) -> tuple[np.ndarray, np.ndarray]:
    """Per-ending logits float32 [N, 4] and the label ids int32 [N] (0 for unlabelled)."""
    arrays = swag.convert_examples_to_arrays(examples, tokenizer, max_seq_length)
    return fine_tuning.predict(model, arrays, batch_size, batching)["logits"], arrays["label_ids"]


def evaluate(model: keras.Model, examples: list[swag.SwagExample],
             tokenizer: tokenization.FullTokenizer, max_seq_length: int, batch_size: int,
             batching: Batching, global_step: int, output_dir: str) -> None:
    """eval_results.txt (eval_accuracy, eval_loss, loss, global_step) and
    eval_predictions.csv."""
    found, label_ids = logits(model, examples, tokenizer, max_seq_length, batch_size, batching)
    per_example_loss = losses.per_example_cross_entropy(found, label_ids).numpy()
    probabilities = tf.nn.softmax(found, axis=-1).numpy()
    results = {"eval_accuracy": swag.accuracy(examples, probabilities),
               **loss_metrics(per_example_loss, np.ones(len(examples)), batch_size),
               "global_step": global_step}
    path = os.path.join(output_dir, "eval_results.txt")
    with written_together():
        write_eval_results(path, results)
        swag.write_predictions(os.path.join(output_dir, "eval_predictions.csv"), examples,
                               probabilities)
    logging.info("***** Eval results (%d questions) written to %s *****", len(examples), path)
    for key in sorted(results):
        logging.info("  %s = %s", key, results[key])


def predict(model: keras.Model, examples: list[swag.SwagExample],
            tokenizer: tokenization.FullTokenizer, max_seq_length: int, batch_size: int,
            batching: Batching, output_dir: str) -> None:
    """predictions.csv: `id,prob0..prob3,prediction`."""
    found, _ = logits(model, examples, tokenizer, max_seq_length, batch_size, batching)
    path = os.path.join(output_dir, "predictions.csv")
    swag.write_predictions(path, examples, tf.nn.softmax(found, axis=-1).numpy())
    logging.info("***** Predictions for %d questions written to %s *****", len(examples), path)


@dataclasses.dataclass(frozen=True)
class Choice:
    """A multiple-choice model's answer: the most probable ending's index and every ending's
    probability."""

    prediction: int
    probabilities: list[float]


class MultipleChoice(TextModel):
    """`context ||| ending ||| ending ||| ending ||| ending` -> the most probable ending, as
    `run_swag.py` scores SWAG's four (each line's endings continue its context; SWAG's `sent2`
    is the start of every ending)."""

    def __init__(self, model: keras.Model, tokenizer: tokenization.FullTokenizer,
                 max_seq_length: int = 128, batch_size: int = 32,
                 batching: Batching = Batching()):
        super().__init__(model, tokenizer, max_seq_length, batch_size, batching)
        self.model = model

    @classmethod
    def from_checkpoint(cls, path: str, vocab_file: str | None = None,
                        bert_config_file: str | None = None, do_lower_case: bool | None = None,
                        **kwargs) -> "MultipleChoice":
        """Reads a fine-tuned multiple-choice model (e.g. run_swag.py's --output_dir)."""
        loaded, tokenizer = read_fine_tuned(
            path, "multiple_choice", "multiple-choice model (cls/multiple_choice/output_weights)",
            vocab_file, bert_config_file, do_lower_case)
        return cls(loaded.model, tokenizer, **kwargs)

    @staticmethod
    def parse(text: str) -> tuple[str, tuple[str, ...]]:
        """(context, endings) of `context ||| ending ||| ...`; raises ValueError unless there
        are four endings."""
        context, *endings = parts(text, "context" + " ||| ending" * swag.NUM_CHOICES)
        return context, tuple(endings)

    def __call__(self, texts: Sequence[str]) -> list[Choice | None]:
        """One answer per text; None for an empty text.

        Raises:
            ValueError: a text is not a context and four endings.
        """
        found = parsed(texts, self.parse)
        examples = [swag.SwagExample(str(index), context, "", endings, None)
                    for index, (context, endings) in found.items()]
        answers: list[Choice | None] = [None] * len(texts)
        if not examples:
            return answers
        scores, _ = logits(self.model, examples, self.tokenizer, self.max_seq_length,
                           self.batch_size, self.batching)
        for index, row in zip(found, tf.nn.softmax(scores, axis=-1).numpy()):
            answers[index] = Choice(int(np.argmax(row)), [float(p) for p in row])
        return answers
