"""Fine-tunes BERT on SQuAD v1.1 / v2.0 and predicts answers, as the original run_squad.py.

    python run_squad.py --vocab_file=$BERT_DIR/vocab.txt \
      --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
      --do_train --train_file=$SQUAD_DIR/train-v1.1.json \
      --do_predict --predict_file=$SQUAD_DIR/dev-v1.1.json \
      --train_batch_size=12 --learning_rate=3e-5 --num_train_epochs=2.0 \
      --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad_base

Writes the original's predictions.json, nbest_predictions.json and, with
--version_2_with_negative, null_odds.json; the fine-tuned model as model.ckpt (original format)
and bert_config.json. When the predict file has gold answers, the official evaluation runs
in-process: its metrics go to eval_results.json, under the official scripts' key names, and to
stdout. --do_predict without --do_train predicts with --init_checkpoint, which must then hold a
SQuAD head, or when it is not given with the model fine-tuned in --output_dir.
"""
from utils import entry_point  # first, so that TensorFlow starts quietly

import os
import random
import time

from absl import flags, logging
import numpy as np
import tensorflow as tf

import common_flags
from data.squad import metrics as squad_metrics
from data.squad.examples import SquadExample, load_squad_json, read_squad_examples
from data.squad.features import SquadFeatures, convert_examples_to_features, features_to_arrays
from data.squad.predictions import (RawResult, SquadPredictions, compute_predictions,
                                    write_predictions)
from data.tokenization import FullTokenizer
from modeling import losses
from modeling.config import BertConfig
from modeling.task_models import BertSpanLabeler
from training import fine_tuning
from training.batching import ArrayExamples
from utils.output_files import written_together
from utils.progress import Progress

FLAGS = flags.FLAGS
flags.DEFINE_string("train_file", None, "SQuAD JSON for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None, "SQuAD JSON to predict, e.g. dev-v1.1.json.")
common_flags.define_model_flags(
    "Pretrained model to fine-tune, or with --do_predict alone a fine-tuned one.",
    max_seq_length=384,
    max_seq_length_help="Tokens per window: [CLS] question [SEP] text [SEP].",
    output_dir_help="Where the model, predictions and metrics go.")
flags.DEFINE_integer("doc_stride", 128, "Tokens between the starts of a context's windows.")
flags.DEFINE_integer("max_query_length", 64, "Question tokens kept; the rest are cut off.")
common_flags.define_fine_tuning_flags(
    {"train": "Fine-tune on --train_file.", "predict": "Predict answers for --predict_file."},
    learning_rate_help="Peak learning rate.")
flags.DEFINE_integer("n_best_size", 20, "Answers per question in nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in WordPiece tokens.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD v2.0: some questions have no answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0,
                   "v2.0: answer \"\" when the null score beats the best span by more than this.")
flags.mark_flags_as_required(["output_dir"])

# The original shuffles the training questions once with this seed before making features.
_TRAIN_SHUFFLE_SEED = 12345
# Features stacked into arrays at a time while streaming the training set.
_CHUNK = 4096


def _check_flags(config: BertConfig) -> None:
    """The original's checks, plus the flags that would leave no room for the context."""
    common_flags.check_fine_tuning_flags(config)
    if FLAGS.do_train and not FLAGS.train_file:
        raise ValueError("--do_train needs --train_file")
    if FLAGS.do_predict and not FLAGS.predict_file:
        raise ValueError("--do_predict needs --predict_file")
    if FLAGS.max_seq_length <= FLAGS.max_query_length + 3:
        raise ValueError(f"--max_seq_length={FLAGS.max_seq_length} leaves no room for the "
                         f"context: it must exceed --max_query_length={FLAGS.max_query_length}"
                         " + 3 ([CLS] and two [SEP])")
    if FLAGS.doc_stride < 1:
        raise ValueError(f"--doc_stride={FLAGS.doc_stride} must be at least 1")
    window = FLAGS.max_seq_length - FLAGS.max_query_length - 3
    if FLAGS.doc_stride > window:
        logging.warning("--doc_stride=%d exceeds the context window of long questions (%d "
                        "tokens); such windows follow each other without overlap",
                        FLAGS.doc_stride, window)


def _features(examples: list[SquadExample], tokenizer: FullTokenizer, is_training: bool):
    """Yields the features of `examples`, logging progress over the examples."""
    progress = Progress("questions converted to features", len(examples))
    for feature in convert_examples_to_features(
            examples, tokenizer, FLAGS.max_seq_length, FLAGS.doc_stride, FLAGS.max_query_length,
            is_training):
        progress.update(feature.example_index + 1 - progress.count)
        yield feature
    progress.done()


def _training_arrays(examples: list[SquadExample],
                     tokenizer: FullTokenizer) -> dict[str, np.ndarray]:
    """Training features as int32 arrays, stacked chunk by chunk (features are not all kept)."""
    chunks, pending = [], []
    for feature in _features(examples, tokenizer, is_training=True):
        pending.append(feature)
        if len(pending) == _CHUNK:
            chunks.append(features_to_arrays(pending, is_training=True))
            pending = []
    if pending:
        chunks.append(features_to_arrays(pending, is_training=True))
    return {key: np.concatenate([chunk[key] for chunk in chunks]) for key in chunks[0]}


def _loss_fn(outputs: dict, batch: dict, normaliser) -> dict:
    return {"loss": losses.span_loss(outputs["start_logits"], outputs["end_logits"],
                                     batch["start_positions"], batch["end_positions"],
                                     normaliser.global_batch_size(batch))}


def _task(config: BertConfig) -> fine_tuning.FineTuningTask:
    return fine_tuning.FineTuningTask(lambda: BertSpanLabeler(config), _loss_fn,
                                      save=common_flags.fine_tuned_saver(),
                                      head="SQuAD: cls/squad/output_weights")


def _train(run: fine_tuning.FineTuningRun, config: BertConfig, examples: list[SquadExample],
           tokenizer: FullTokenizer) -> fine_tuning.Trained:
    """Fine-tunes for int(questions / batch * epochs) steps, on every window of the questions."""
    # Padded to max_seq_length whatever --pad_to_max_length says: the original's loss is a
    # softmax over every position, the padded ones included, so a shorter batch would change it.
    features = ArrayExamples(_training_arrays(examples, tokenizer))
    logging.info("training on %d questions (%d features)", len(examples), features.num_examples)
    return fine_tuning.train(run, _task(config), features, run.train_steps(len(examples)))


def _predict(model: BertSpanLabeler, examples: list[SquadExample],
             tokenizer: FullTokenizer) -> SquadPredictions:
    start = time.monotonic()
    features: list[SquadFeatures] = list(_features(examples, tokenizer, is_training=False))
    arrays = features_to_arrays(features, is_training=False)
    logging.info("predicting %d questions (%d features), batch size %d", len(examples),
                 len(features), FLAGS.predict_batch_size)
    progress = Progress("features predicted", len(features))

    def count(outputs: dict, batch: dict) -> dict:
        progress.update(int(outputs["start_logits"].shape[0]))
        return outputs

    model_start = time.monotonic()
    batching = common_flags.batching_from_flags()
    logits = fine_tuning.predict_spans(model, arrays, FLAGS.predict_batch_size, batching,
                                       output_fn=count)
    progress.done()
    answers_start = time.monotonic()
    results = [RawResult(int(unique_id), start_logits, end_logits)
               for unique_id, start_logits, end_logits in
               zip(arrays["unique_ids"], logits["start_logits"], logits["end_logits"])]
    predictions = compute_predictions(examples, features, results, FLAGS.n_best_size,
                                      FLAGS.max_answer_length, FLAGS.do_lower_case,
                                      FLAGS.version_2_with_negative,
                                      FLAGS.null_score_diff_threshold)
    end = time.monotonic()
    logging.info("predicted %d questions in %.1f s, %.1f questions/s (features %.1f s, model "
                 "%.1f s, answers %.1f s)", len(examples), end - start,
                 len(examples) / max(end - start, 1e-9), model_start - start,
                 answers_start - model_start, end - answers_start)
    return predictions


def _evaluation_version(dataset_json: dict) -> str | None:
    """The official evaluation to run on the predict file; None when it has no gold answers."""
    try:
        gold = [answers for _, answers in squad_metrics.iter_questions(dataset_json["data"])]
    except ValueError:  # questions without an "answers" list
        return None
    if FLAGS.version_2_with_negative or (
            squad_metrics.detect_version(dataset_json) == squad_metrics.VERSION_2):
        return squad_metrics.VERSION_2 if any(gold) else None
    return squad_metrics.VERSION_1 if all(gold) else None


def _write_outputs(predictions: SquadPredictions, dataset_json: dict) -> None:
    """predictions.json, nbest_predictions.json, null_odds.json (v2.0), eval_results.json, which
    take their final names together."""
    folder = FLAGS.output_dir
    version = _evaluation_version(dataset_json)
    with written_together():
        write_predictions(
            predictions, os.path.join(folder, "predictions.json"),
            os.path.join(folder, "nbest_predictions.json"),
            os.path.join(folder, "null_odds.json") if FLAGS.version_2_with_negative else None)
        if version is None:
            logging.info("%s has no gold answers: no evaluation", FLAGS.predict_file)
            return
        null_odds = predictions.null_odds if FLAGS.version_2_with_negative else None
        results = squad_metrics.evaluate(dataset_json, predictions.predictions, version,
                                         null_odds)
        squad_metrics.write_eval_results(os.path.join(folder, "eval_results.json"), results)
    print(squad_metrics.format_eval_results(results), flush=True)


def _read_inputs() -> tuple[list[SquadExample], list[SquadExample], dict]:
    """Training questions (shuffled as the original), predict questions and the predict JSON."""
    train_examples, predict_examples, predict_json = [], [], {}
    if FLAGS.do_train:
        train_examples = read_squad_examples(
            FLAGS.train_file, is_training=True,
            version_2_with_negative=FLAGS.version_2_with_negative).examples
        if not train_examples:
            raise ValueError(f"{FLAGS.train_file}: no training questions")
        random.Random(_TRAIN_SHUFFLE_SEED).shuffle(train_examples)
    if FLAGS.do_predict:
        predict_json = load_squad_json(FLAGS.predict_file)
        predict_examples = read_squad_examples(FLAGS.predict_file, is_training=False).examples
        if not predict_examples:
            raise ValueError(f"{FLAGS.predict_file}: no questions to predict")
    return train_examples, predict_examples, predict_json


def main(_):
    config = common_flags.config_from_flags()
    _check_flags(config)
    tokenizer = common_flags.tokenizer_from_flags(config)
    train_examples, predict_examples, predict_json = _read_inputs()
    strategy = common_flags.setup_from_flags()
    run = common_flags.fine_tuning_run(strategy)
    # Without training, a model that does not fit fails before the output folder is made.
    trained = None if FLAGS.do_train else fine_tuning.restore(run, _task(config))
    tf.io.gfile.makedirs(FLAGS.output_dir)
    if FLAGS.do_train:
        trained = _train(run, config, train_examples, tokenizer)
    if FLAGS.do_predict and run.is_chief:
        _write_outputs(_predict(trained.model, predict_examples, tokenizer), predict_json)


if __name__ == "__main__":
    entry_point.run(main)
