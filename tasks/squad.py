"""Question answering: SQuAD v1.1 and v2.0 (paper section 4.2, 4.3), and new text.

Questions -> windows of their context (`data.squad.features`) -> the span model's start and end
logits -> the answers, by the original's rules (`data.squad.predictions`), one path for
`run_squad.py` and for `QuestionAnswerer`; the span loss for training; the original's output
files and the official evaluation.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import random
import re
import time
from typing import NamedTuple, Sequence

from absl import logging
import keras
import numpy as np

from data import tokenization
from data.squad import metrics as squad_metrics
from data.squad.examples import (SquadExample, load_squad_json, read_squad_examples,
                                 split_context)
from data.squad.features import (check_window_settings, convert_examples_to_features,
                                 features_to_arrays)
from data.squad.predictions import (RawResult, SquadPredictions, compute_predictions,
                                    write_predictions)
from modeling import losses
from modeling.config import BertConfig
from modeling.models.task_models import BertSpanLabeler
from running.batching import FIXED, ArrayExamples, Batching
from tasks.text_model import TextModel, parsed, parts, read_fine_tuned
from training import fine_tuning
from training.periodic_evaluation import EvaluationPlan
from utils.output_files import written_together
from utils.progress import Progress

# The official evaluation's result the best model is chosen by.
MAIN_METRIC = "f1"
# Features stacked into arrays at a time while streaming the training set.
_CHUNK = 4096
# The log line of `predict`'s speed (the fine-tuning benchmark reads it).
TIMING = re.compile(r"predicted (\d+) questions in ([\d.]+) s, ([\d.]+) questions/s "
                    r"\(features ([\d.]+) s, model ([\d.]+) s, answers ([\d.]+) s\)")


@dataclasses.dataclass(frozen=True)
class Windows:
    """How a question and its context become windows of `max_seq_length` tokens."""

    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64

    def check(self, prefix: str = "") -> None:
        check_window_settings(self.max_seq_length, self.max_query_length, self.doc_stride,
                              prefix)


@dataclasses.dataclass(frozen=True)
class AnswerRules:
    """How the windows' logits become an answer (the original's `write_predictions`)."""

    n_best_size: int = 20
    max_answer_length: int = 30
    do_lower_case: bool = True
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a run reads and writes besides its model (run_squad.py's flags)."""

    output_dir: str
    train_file: str | None = None
    predict_file: str | None = None
    windows: Windows = Windows()
    rules: AnswerRules = AnswerRules()
    predict_batch_size: int = 8
    batching: Batching = FIXED
    evaluation: EvaluationPlan = EvaluationPlan(metric=MAIN_METRIC)


class Splits(NamedTuple):
    """The questions a run reads: the training questions, shuffled as the original shuffles
    them, and the questions to predict with their file's JSON (for the official evaluation);
    their windows are made as they are needed, with `tokenizer` (a training set's are many)."""

    train: list[SquadExample]
    predict: list[SquadExample]
    predict_json: dict
    tokenizer: tokenization.FullTokenizer


# The original shuffles the training questions once with this seed before making features.
TRAIN_SHUFFLE_SEED = 12345


def read_splits(settings: Settings, roles: Sequence[str],
                tokenizer: tokenization.FullTokenizer) -> Splits:
    """Reads the training questions (--do_train) and the questions to predict (--do_predict,
    or --do_eval: the predict file scored by the official evaluation), checking the windows
    first; a stride past the context window of long questions is only warned of."""
    windows = settings.windows
    windows.check(prefix="--")
    settings.evaluation.check()
    window = windows.max_seq_length - windows.max_query_length - 3
    if windows.doc_stride > window:
        logging.warning("--doc_stride=%d exceeds the context window of long questions (%d "
                        "tokens); such windows follow each other without overlap",
                        windows.doc_stride, window)
    train, predict_examples, predict_json = [], [], {}
    if "train" in roles:
        if not settings.train_file:
            raise ValueError("--do_train needs --train_file")
        train = read_squad_examples(
            settings.train_file, is_training=True,
            version_2_with_negative=settings.rules.version_2_with_negative).examples
        if not train:
            raise ValueError(f"{settings.train_file}: no training questions")
        random.Random(TRAIN_SHUFFLE_SEED).shuffle(train)
    if "predict" in roles or "eval" in roles:
        if not settings.predict_file:
            raise ValueError("--do_predict needs --predict_file" if "predict" in roles else
                             "scoring during training needs --predict_file, with answers")
        predict_json = load_squad_json(settings.predict_file)
        predict_examples = read_squad_examples(settings.predict_file, is_training=False).examples
        if not predict_examples:
            raise ValueError(f"{settings.predict_file}: no questions to predict")
    return Splits(train, predict_examples, predict_json, tokenizer)


def features(examples: Sequence[SquadExample], tokenizer: tokenization.FullTokenizer,
             windows: Windows, is_training: bool, progress: Progress | None = None):
    """Yields the windows of `examples` (`SquadFeatures`), counting examples in `progress`."""
    for feature in convert_examples_to_features(
            examples, tokenizer, windows.max_seq_length, windows.doc_stride,
            windows.max_query_length, is_training):
        if progress is not None:
            progress.update(feature.example_index + 1 - progress.count)
        yield feature


def answer(model: keras.Model, examples: Sequence[SquadExample],
           tokenizer: tokenization.FullTokenizer, windows: Windows, rules: AnswerRules,
           batch_size: int, batching: Batching = FIXED,
           show_progress: bool = False) -> SquadPredictions:
    """The answers to `examples`: windows, the model's logits, the original's answer rules."""
    start = time.monotonic()
    progress = Progress("questions converted to features", len(examples)) \
        if show_progress else None
    found = list(features(examples, tokenizer, windows, False, progress))
    if progress is not None:
        progress.done()
    arrays = features_to_arrays(found, is_training=False)
    if show_progress:
        logging.info("predicting %d questions (%d features), batch size %d", len(examples),
                     len(found), batch_size)
    model_start = time.monotonic()
    counted = Progress("features predicted", len(found)) if show_progress else None

    def count(outputs: dict, batch: dict) -> dict:
        if counted is not None:
            counted.update(int(outputs["start_logits"].shape[0]))
        return outputs
    logits = fine_tuning.predict_spans(model, arrays, batch_size, batching, output_fn=count)
    if counted is not None:
        counted.done()
    answers_start = time.monotonic()
    results = [RawResult(int(unique_id), start_logits, end_logits)
               for unique_id, start_logits, end_logits in
               zip(arrays["unique_ids"], logits["start_logits"], logits["end_logits"])]
    predictions = compute_predictions(examples, found, results, **dataclasses.asdict(rules))
    if show_progress:
        end = time.monotonic()
        logging.info("predicted %d questions in %.1f s, %.1f questions/s (features %.1f s, "
                     "model %.1f s, answers %.1f s)", len(examples), end - start,
                     len(examples) / max(end - start, 1e-9), model_start - start,
                     answers_start - model_start, end - answers_start)
    return predictions


def training_arrays(examples: Sequence[SquadExample], tokenizer: tokenization.FullTokenizer,
                    windows: Windows) -> dict[str, np.ndarray]:
    """Training windows as int32 arrays, stacked chunk by chunk (features are not all kept)."""
    progress = Progress("questions converted to features", len(examples))
    chunks, pending = [], []
    for feature in features(examples, tokenizer, windows, True, progress):
        pending.append(feature)
        if len(pending) == _CHUNK:
            chunks.append(features_to_arrays(pending, is_training=True))
            pending = []
    progress.done()
    if pending:
        chunks.append(features_to_arrays(pending, is_training=True))
    return {key: np.concatenate([chunk[key] for chunk in chunks]) for key in chunks[0]}


def _loss_fn(outputs: dict, batch: dict, normaliser) -> dict:
    return {"loss": losses.span_loss(outputs["start_logits"], outputs["end_logits"],
                                     batch["start_positions"], batch["end_positions"],
                                     normaliser.global_batch_size(batch))}


def fine_tuning_task(config: BertConfig, settings: Settings,
                     splits: Splits | None = None) -> fine_tuning.FineTuningTask:
    """The span model (`cls/squad/...`) and the original's span loss."""
    del splits
    return fine_tuning.FineTuningTask(
        lambda: BertSpanLabeler(config), _loss_fn, head="SQuAD: cls/squad/output_weights",
        save=functools.partial(fine_tuning.save_fine_tuned,
                               do_lower_case=settings.rules.do_lower_case))


def train(run: fine_tuning.FineTuningRun, config: BertConfig, settings: Settings,
          splits: Splits) -> fine_tuning.Trained:
    """Fine-tunes for int(questions / batch * epochs) steps, on every window of the questions."""
    # Padded to max_seq_length whatever --pad_to_max_length says: the original's loss is a
    # softmax over every position, the padded ones included, so a shorter batch would change it.
    data = ArrayExamples(training_arrays(splits.train, splits.tokenizer, settings.windows))
    logging.info("training on %d questions (%d features)", len(splits.train), data.num_examples)
    # Epochs are the original's: questions, not windows, make the steps.
    return fine_tuning.train(
        run, fine_tuning_task(config, settings), data, run.train_steps(len(splits.train)),
        settings.evaluation,
        lambda model, step, suffix: evaluate(model, settings, splits, step, suffix),
        epoch_examples=len(splits.train))


def predict(model: keras.Model, settings: Settings, splits: Splits,
            global_step: int | None = None) -> dict | None:
    """Answers the predict file's questions: the original's files and, where the file has gold
    answers, the official evaluation (`write_outputs`), printed; returns its results or None."""
    del global_step
    predictions = answer(model, splits.predict, splits.tokenizer, settings.windows,
                         settings.rules, settings.predict_batch_size, settings.batching,
                         show_progress=True)
    results = write_outputs(predictions, splits.predict_json, settings.output_dir,
                            settings.rules.version_2_with_negative)
    if results is None:
        logging.info("%s has no gold answers: no evaluation", settings.predict_file)
    else:
        print(squad_metrics.format_eval_results(results), flush=True)
    return results


def evaluate(model: keras.Model, settings: Settings, splits: Splits, global_step: int,
             suffix: str = "") -> dict:
    """`predict`, on a predict file that must have gold answers; returns the official results.
    With `suffix` (a scoring during training), only `eval_results{suffix}.json` is written.

    Raises:
        ValueError: the predict file has no gold answers to score.
    """
    if not suffix:
        results = predict(model, settings, splits, global_step)
    else:
        results = official_results(
            answer(model, splits.predict, splits.tokenizer, settings.windows, settings.rules,
                   settings.predict_batch_size, settings.batching),
            splits.predict_json, settings.rules.version_2_with_negative)
    if results is None:
        raise ValueError(f"{settings.predict_file} has no gold answers to evaluate")
    if suffix:
        squad_metrics.write_eval_results(
            os.path.join(settings.output_dir, f"eval_results{suffix}.json"), results)
    return results


def evaluation_version(dataset_json: dict, version_2_with_negative: bool) -> str | None:
    """The official evaluation to run on a predict file; None when it has no gold answers."""
    try:
        gold = [answers for _, answers in squad_metrics.iter_questions(dataset_json["data"])]
    except ValueError:  # questions without an "answers" list
        return None
    if version_2_with_negative or (
            squad_metrics.detect_version(dataset_json) == squad_metrics.VERSION_2):
        return squad_metrics.VERSION_2 if any(gold) else None
    return squad_metrics.VERSION_1 if all(gold) else None


def write_outputs(predictions: SquadPredictions, dataset_json: dict, output_dir: str,
                  version_2_with_negative: bool) -> dict | None:
    """predictions.json, nbest_predictions.json, null_odds.json (v2.0) and, where the file has
    gold answers, eval_results.json, which take their final names together. Returns the
    evaluation's results, or None."""
    with written_together():
        write_predictions(
            predictions, os.path.join(output_dir, "predictions.json"),
            os.path.join(output_dir, "nbest_predictions.json"),
            os.path.join(output_dir, "null_odds.json") if version_2_with_negative else None)
        results = official_results(predictions, dataset_json, version_2_with_negative)
        if results is not None:
            squad_metrics.write_eval_results(os.path.join(output_dir, "eval_results.json"),
                                             results)
    return results


def official_results(predictions: SquadPredictions, dataset_json: dict,
                     version_2_with_negative: bool) -> dict | None:
    """The official evaluation of the predictions (with the null odds for v2.0), or None
    where the file has no gold answers."""
    version = evaluation_version(dataset_json, version_2_with_negative)
    if version is None:
        return None
    null_odds = predictions.null_odds if version_2_with_negative else None
    return squad_metrics.evaluate(dataset_json, predictions.predictions, version, null_odds)


@dataclasses.dataclass(frozen=True)
class Answer:
    """A span model's answer to one question: its text ("" when SQuAD v2.0's rule finds none),
    and the n-best entry's probability and logits, as `nbest_predictions.json` has them."""

    text: str
    probability: float
    start_logit: float
    end_logit: float


class QuestionAnswerer(TextModel):
    """`question ||| context` -> the answer span, by `run_squad.py --do_predict`'s rules and
    code (`predict`)."""

    def __init__(self, model: keras.Model, tokenizer: tokenization.FullTokenizer,
                 windows: Windows = Windows(), rules: AnswerRules = AnswerRules(),
                 batch_size: int = 32, batching: Batching = Batching()):
        super().__init__(model, tokenizer, windows.max_seq_length, batch_size, batching)
        windows.check()
        self.model = model
        self.windows = windows
        self.rules = rules

    @classmethod
    def from_checkpoint(cls, path: str, vocab_file: str | None = None,
                        bert_config_file: str | None = None, do_lower_case: bool | None = None,
                        windows: Windows = Windows(), rules: AnswerRules = AnswerRules(),
                        **kwargs) -> "QuestionAnswerer":
        """Reads a fine-tuned SQuAD model (e.g. run_squad.py's --output_dir); the answer rules'
        casing is the tokenizer's."""
        loaded, tokenizer = read_fine_tuned(
            path, "squad", "SQuAD model (cls/squad/output_weights)", vocab_file,
            bert_config_file, do_lower_case)
        rules = dataclasses.replace(rules, do_lower_case=tokenizer.basic_tokenizer.do_lower_case)
        return cls(loaded.model, tokenizer, windows, rules, **kwargs)

    @staticmethod
    def parse(text: str) -> tuple[str, str]:
        """(question, context) of `question ||| context`; raises ValueError for other texts."""
        question, context = parts(text, "question ||| context")
        return question, context

    def __call__(self, texts: Sequence[str]) -> list[Answer | None]:
        """One answer per text; None for an empty text.

        Raises:
            ValueError: a text is not `question ||| context`.
        """
        examples = [SquadExample(str(index), question, split_context(context)[0])
                    for index, (question, context) in parsed(texts, self.parse).items()]
        answers: list[Answer | None] = [None] * len(texts)
        if not examples:
            return answers
        found = answer(self.model, examples, self.tokenizer, self.windows, self.rules,
                       self.batch_size, self.batching)
        for example in examples:
            text = found.predictions[example.qas_id]
            entry = next(e for e in found.nbest[example.qas_id] if e["text"] == text)
            answers[int(example.qas_id)] = Answer(text, entry["probability"],
                                                  entry["start_logit"], entry["end_logit"])
        return answers
