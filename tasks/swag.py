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
from typing import NamedTuple, Sequence

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from data import tokenization
from data.classifier.metrics import loss_metrics
from data.swag import examples as swag
from modeling import losses
from modeling.config import BertConfig
from modeling.models.task_models import BertMultipleChoice
from running.batching import FIXED, ArrayExamples, Batching
from tasks.text_model import TextModel, parsed, parts, read_fine_tuned
from training import fine_tuning
from training.periodic_evaluation import EvaluationPlan
from utils.output_files import write_eval_results, written_together

# The files of the SWAG distribution, by role.
FILES = {"train": "train.csv", "eval": "val.csv", "predict": "test.csv"}
# The result the best model is chosen by.
MAIN_METRIC = "eval_accuracy"


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a run reads and writes besides its model (run_swag.py's flags)."""

    data_dir: str
    output_dir: str
    max_seq_length: int = 128
    do_lower_case: bool = True
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    batching: Batching = Batching()
    evaluation: EvaluationPlan = EvaluationPlan(metric=MAIN_METRIC)

    def check(self) -> None:
        self.evaluation.check()


class Split(NamedTuple):
    """A file read for the run: its questions and their four sequences each."""

    examples: list[swag.SwagExample]
    arrays: dict[str, np.ndarray]


def read_splits(settings: Settings, roles: Sequence[str],
                tokenizer: tokenization.FullTokenizer) -> dict[str, Split]:
    """Reads and featurises the file of every role, so that bad input fails before anything is
    written."""
    settings.check()
    splits = {}
    for role in roles:
        path = os.path.join(settings.data_dir, FILES[role])
        if not os.path.isfile(path):
            raise FileNotFoundError(f"--do_{role}: {path} does not exist (--data_dir)")
        examples = swag.read_swag_examples(path, require_labels=role != "predict")
        splits[role] = Split(examples, swag.convert_examples_to_arrays(
            examples, tokenizer, settings.max_seq_length))
    return splits


def _loss_fn(outputs, batch, normaliser):
    return {"loss": losses.mean_cross_entropy(outputs["logits"], batch["label_ids"],
                                              normaliser.global_batch_size(batch))}


def fine_tuning_task(config: BertConfig, settings: Settings,
                     splits: dict[str, Split] | None = None) -> fine_tuning.FineTuningTask:
    """The multiple-choice model (`cls/multiple_choice/...`) and its cross-entropy."""
    del splits
    return fine_tuning.FineTuningTask(
        lambda: BertMultipleChoice(config), _loss_fn,
        head="SWAG: cls/multiple_choice/output_weights",
        save=functools.partial(fine_tuning.save_fine_tuned, do_lower_case=settings.do_lower_case))


def train(run: fine_tuning.FineTuningRun, config: BertConfig, settings: Settings,
          splits: dict[str, Split]) -> fine_tuning.Trained:
    """Fine-tunes on train.csv, int(questions / batch * epochs) steps."""
    data = ArrayExamples(splits["train"].arrays, batching=settings.batching)
    return fine_tuning.train(
        run, fine_tuning_task(config, settings, splits), data,
        run.train_steps(data.num_examples), settings.evaluation,
        lambda model, step, suffix: evaluate(model, settings, splits, step, suffix))


def logits(model: keras.Model, arrays: dict[str, np.ndarray], batch_size: int,
           batching: Batching = FIXED) -> np.ndarray:
    """Per-ending logits float32 [N, 4] of featurised questions."""
    return fine_tuning.predict(model, arrays, batch_size, batching)["logits"]


def evaluate(model: keras.Model, settings: Settings, splits: dict[str, Split],
             global_step: int, suffix: str = "") -> dict:
    """eval_results.txt (eval_accuracy, eval_loss, loss, global_step) and
    eval_predictions.csv, for val.csv; with `suffix` (a scoring during training),
    eval_results{suffix}.txt alone."""
    examples, arrays = splits["eval"]
    found = logits(model, arrays, settings.eval_batch_size, settings.batching)
    per_example_loss = losses.per_example_cross_entropy(found, arrays["label_ids"]).numpy()
    probabilities = tf.nn.softmax(found, axis=-1).numpy()
    results = {"eval_accuracy": swag.accuracy(examples, probabilities),
               **loss_metrics(per_example_loss, np.ones(len(examples)),
                              settings.eval_batch_size),
               "global_step": global_step}
    path = os.path.join(settings.output_dir, f"eval_results{suffix}.txt")
    with written_together():
        write_eval_results(path, results)
        if not suffix:
            swag.write_predictions(os.path.join(settings.output_dir, "eval_predictions.csv"),
                                   examples, probabilities)
    logging.info("***** Eval results (%d questions) written to %s *****", len(examples), path)
    for key in sorted(results):
        logging.info("  %s = %s", key, results[key])
    return results


def predict(model: keras.Model, settings: Settings, splits: dict[str, Split],
            global_step: int) -> None:
    """predictions.csv for test.csv: `id,prob0..prob3,prediction`."""
    del global_step
    examples, arrays = splits["predict"]
    found = logits(model, arrays, settings.predict_batch_size, settings.batching)
    path = os.path.join(settings.output_dir, "predictions.csv")
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
        scores = logits(self.model, swag.convert_examples_to_arrays(
            examples, self.tokenizer, self.max_seq_length), self.batch_size, self.batching)
        for index, row in zip(found, tf.nn.softmax(scores, axis=-1).numpy()):
            answers[index] = Choice(int(np.argmax(row)), [float(p) for p in row])
        return answers
