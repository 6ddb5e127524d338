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
SQuAD head, or when it is not given with the model fine-tuned in --output_dir. With
--eval_every_steps or --eval_every_epoch, the --predict_file (with its answers) is scored during
training by the official evaluation (eval_results_step_N.json) and the model of the best F1 kept
in `best/`; --early_stopping_patience stops after that many scorings without improvement.
"""
from utils import tensorflow_startup  # noqa: F401  (first: TensorFlow starts quietly)
from utils import entry_point

from absl import flags

import common_flags
from tasks import runner, squad

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


def _settings() -> squad.Settings:
    return squad.Settings(
        output_dir=FLAGS.output_dir, train_file=FLAGS.train_file, predict_file=FLAGS.predict_file,
        windows=squad.Windows(FLAGS.max_seq_length, FLAGS.doc_stride, FLAGS.max_query_length),
        rules=squad.AnswerRules(FLAGS.n_best_size, FLAGS.max_answer_length, FLAGS.do_lower_case,
                                FLAGS.version_2_with_negative, FLAGS.null_score_diff_threshold),
        predict_batch_size=FLAGS.predict_batch_size, batching=common_flags.batching_from_flags(),
        evaluation=common_flags.evaluation_plan_from_flags(squad.MAIN_METRIC))


def main(_):
    config = common_flags.config_from_flags()
    common_flags.check_fine_tuning_flags(config)
    runner.fine_tune(squad, _settings(), config, common_flags.tokenizer_from_flags(config),
                     common_flags.roles_from_flags(), common_flags.start_fine_tuning_run,
                     FLAGS.output_dir)


if __name__ == "__main__":
    entry_point.run(main)
