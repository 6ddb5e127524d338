"""Pretrains BERT with the masked-LM and next-sentence losses, as the original run_pretraining.py.

    python run_pretraining.py --input_file=/tmp/tf_examples.tfrecord --output_dir=/tmp/pretraining \
      --do_train --do_eval --bert_config_file=$BERT_DIR/bert_config.json \
      --init_checkpoint=$BERT_DIR/bert_model.ckpt --train_batch_size=32 --max_seq_length=128 \
      --max_predictions_per_seq=20 --num_train_steps=20 --num_warmup_steps=10 --learning_rate=2e-5

Rerunning the same command after an interruption resumes from the newest checkpoint in --output_dir.

--do_eval evaluates as the original does by default: the --input_file records in file order,
repeated without end (after the last record comes the first again), batched in full batches of
--eval_batch_size, for exactly --max_eval_steps batches. On a file shorter than
max_eval_steps x eval_batch_size some records are counted more than once (the log says so); on a
longer one the records past that count are not evaluated. --eval_single_pass evaluates each record
once instead, the last batch partial (at most --max_eval_steps batches; 0: no limit). Either way the
metrics are means over every evaluated example: masked-LM accuracy and loss weighted by
masked_lm_weights, next-sentence accuracy and loss per example; `loss` is the mean of the batch
losses, as the original's Estimator reports it.

--eval_input_file names held-out records (create_pretraining_data.py on text the training records
were not made from): --do_eval then scores them instead of --input_file, and --eval_every_steps
scores them during training (eval_results_step_N.txt, train_log.jsonl, TensorBoard's eval/),
keeping the best model by masked-LM accuracy (--metric_for_best) in output_dir/best;
--early_stopping_patience stops after that many scorings without improvement.
"""
from utils import tensorflow_startup  # noqa: F401  (first: TensorFlow starts quietly)
from utils import entry_point

from absl import flags
import tensorflow as tf

import common_flags
from data.pretraining.dataset import check_pretraining_files, expand_file_patterns
from modeling import checkpoints
from modeling.models.pretrainer import BertPretrainer
from tasks import pretraining

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "TFRecord files: comma-separated, globs allowed.")
flags.DEFINE_string("output_dir", None, "Where checkpoints, summaries and results go.")
common_flags.define_model_file_flags(vocab_file=False)
flags.DEFINE_string("init_checkpoint", None, "Checkpoint to start from, in any format.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the TFRecords.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked-LM slots per sequence in the TFRecords.")
flags.DEFINE_bool("do_train", False, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate on --eval_input_file (default: --input_file, as "
                  "the original) and write eval_results.txt.")
flags.DEFINE_string("eval_input_file", None, "Held-out TFRecord files (comma-separated, globs "
                    "allowed), scored by --do_eval and --eval_every_steps.")
flags.DEFINE_integer("train_batch_size", 32, "Global batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Batch size for evaluation.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
flags.DEFINE_integer("num_train_steps", 100000, "Training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Warm-up steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Steps between checkpoints.")
flags.DEFINE_integer("max_eval_steps", 100,
                     "Eval batches: exactly this many full batches of the repeated input, or at "
                     "most this many with --eval_single_pass (0: every record there).")
flags.DEFINE_bool("eval_single_pass", False,
                  "Evaluate each record once, the last batch partial, instead of the original's "
                  "--max_eval_steps full batches of the input repeated in file order.")
flags.DEFINE_bool("use_next_sentence_label", True,
                  "False drops the next-sentence loss (the paper's 'No NSP' ablation).")
common_flags.define_training_flags()
common_flags.define_evaluation_flags("the --eval_input_file records", epochs=False)
flags.mark_flags_as_required(["input_file", "output_dir"])


def _records(input_file: str) -> pretraining.Records:
    return pretraining.Records(input_file, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
                               FLAGS.use_next_sentence_label)


def _checked_records() -> tuple[pretraining.Records, pretraining.Records]:
    """The training records and those evaluated, checked before the output folder is touched."""
    plan = common_flags.evaluation_plan_from_flags(pretraining.MAIN_METRIC)
    if plan.enabled and not FLAGS.eval_input_file:
        raise ValueError("--eval_every_steps needs --eval_input_file: held-out records to score")
    for flag in ("input_file", "eval_input_file"):
        if FLAGS[flag].value:
            check_pretraining_files(expand_file_patterns(FLAGS[flag].value),
                                    FLAGS.max_seq_length, FLAGS.max_predictions_per_seq)
    return _records(FLAGS.input_file), _records(FLAGS.eval_input_file or FLAGS.input_file)


def _evaluate(model, records: pretraining.Records, step: int, suffix: str = "") -> dict:
    return pretraining.evaluate(model, records, step, FLAGS.output_dir, FLAGS.eval_batch_size,
                                FLAGS.max_eval_steps, FLAGS.eval_single_pass, suffix)


def main(_):
    # The strategy first: multi-worker collectives must be set up before any TensorFlow op.
    strategy = common_flags.setup_from_flags()
    config = common_flags.config_from_flags()
    common_flags.check_one_action("do_train", "do_eval")
    common_flags.check_max_seq_length(config)
    if FLAGS.do_eval and not FLAGS.eval_single_pass and FLAGS.max_eval_steps < 1:
        raise ValueError(f"--max_eval_steps={FLAGS.max_eval_steps} must be >= 1 (or set "
                         "--eval_single_pass to evaluate every record once)")
    # Unreadable or mismatched input fails here, before the output folder is touched.
    records, eval_records = _checked_records()
    tf.io.gfile.makedirs(FLAGS.output_dir)
    model = None
    if FLAGS.do_train:
        run = common_flags.fine_tuning_run(strategy, default_log_steps=100, optimizer_fn=(
            lambda steps: common_flags.create_optimizer_from_flags(
                FLAGS.learning_rate, steps, FLAGS.num_warmup_steps)))
        model = pretraining.train(
            run, config, records, FLAGS.num_train_steps,
            common_flags.evaluation_plan_from_flags(pretraining.MAIN_METRIC),
            lambda scored, step, suffix: _evaluate(scored, eval_records, step, suffix))
    if FLAGS.do_eval:
        if model is None:
            model = BertPretrainer(config)
            pretraining.initialise(model, FLAGS.init_checkpoint or FLAGS.output_dir)
        step = checkpoints.checkpoint_step(FLAGS.init_checkpoint or FLAGS.output_dir) \
            if not FLAGS.do_train else FLAGS.num_train_steps
        _evaluate(model, eval_records, step)


if __name__ == "__main__":
    entry_point.run(main)
