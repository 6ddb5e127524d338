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
from utils import tensorflow_startup  # noqa: F401  (first: TensorFlow starts quietly)
from utils import entry_point

import random

from absl import flags, logging
import tensorflow as tf

import common_flags
from data.squad import metrics as squad_metrics
from data.squad.examples import SquadExample, load_squad_json, read_squad_examples
from tasks import squad
from training import fine_tuning

FLAGS = flags.FLAGS
flags.DEFINE_string("train_file", None, "SQuAD JSON for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None, "SQuAD JSON to predict, e.g. dev-v1.1.json.")
common_flags.define_model_flags(
    "Pretrained model to fine-tune, or with --do_predict alone a fine-tuned one.",
    max_seq_length=squad.Windows.max_seq_length,
    max_seq_length_help="Tokens per window: [CLS] question [SEP] text [SEP].",
    output_dir_help="Where the model, predictions and metrics go.")
flags.DEFINE_integer("doc_stride", squad.Windows.doc_stride,
                     "Tokens between the starts of a context's windows.")
flags.DEFINE_integer("max_query_length", squad.Windows.max_query_length,
                     "Question tokens kept; the rest are cut off.")
common_flags.define_fine_tuning_flags(
    {"train": "Fine-tune on --train_file.", "predict": "Predict answers for --predict_file."},
    learning_rate_help="Peak learning rate.")
flags.DEFINE_integer("n_best_size", squad.AnswerRules.n_best_size,
                     "Answers per question in nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", squad.AnswerRules.max_answer_length,
                     "Longest answer, in WordPiece tokens.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD v2.0: some questions have no answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0,
                   "v2.0: answer \"\" when the null score beats the best span by more than this.")
flags.mark_flags_as_required(["output_dir"])

# The original shuffles the training questions once with this seed before making features.
_TRAIN_SHUFFLE_SEED = 12345


def _windows() -> squad.Windows:
    """The windows of the flags, checked; a stride past the context window is only warned of."""
    windows = squad.Windows(FLAGS.max_seq_length, FLAGS.doc_stride, FLAGS.max_query_length)
    windows.check(prefix="--")
    window = FLAGS.max_seq_length - FLAGS.max_query_length - 3
    if FLAGS.doc_stride > window:
        logging.warning("--doc_stride=%d exceeds the context window of long questions (%d "
                        "tokens); such windows follow each other without overlap",
                        FLAGS.doc_stride, window)
    return windows


def _rules() -> squad.AnswerRules:
    return squad.AnswerRules(FLAGS.n_best_size, FLAGS.max_answer_length, FLAGS.do_lower_case,
                             FLAGS.version_2_with_negative, FLAGS.null_score_diff_threshold)


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
    common_flags.check_fine_tuning_flags(config)
    if FLAGS.do_train and not FLAGS.train_file:
        raise ValueError("--do_train needs --train_file")
    if FLAGS.do_predict and not FLAGS.predict_file:
        raise ValueError("--do_predict needs --predict_file")
    windows = _windows()
    tokenizer = common_flags.tokenizer_from_flags(config)
    train_examples, predict_examples, predict_json = _read_inputs()
    strategy = common_flags.setup_from_flags()
    run = common_flags.fine_tuning_run(strategy)
    # Without training, a model that does not fit fails before the output folder is made.
    trained = None if FLAGS.do_train else fine_tuning.restore(
        run, squad.fine_tuning_task(config, FLAGS.do_lower_case))
    tf.io.gfile.makedirs(FLAGS.output_dir)
    if FLAGS.do_train:
        trained = squad.train(run, config, train_examples, tokenizer, windows)
    if FLAGS.do_predict and run.is_chief:
        predictions = squad.predict(trained.model, predict_examples, tokenizer, windows,
                                    _rules(), FLAGS.predict_batch_size,
                                    common_flags.batching_from_flags(), show_progress=True)
        results = squad.write_outputs(predictions, predict_json, FLAGS.output_dir,
                                      FLAGS.version_2_with_negative)
        if results is None:
            logging.info("%s has no gold answers: no evaluation", FLAGS.predict_file)
        else:
            print(squad_metrics.format_eval_results(results), flush=True)


if __name__ == "__main__":
    entry_point.run(main)
