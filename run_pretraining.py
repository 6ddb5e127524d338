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
"""
from utils import entry_point  # first, so that TensorFlow starts quietly

import os

from absl import flags, logging
import tensorflow as tf

import common_flags
from data.pretraining.dataset import (check_pretraining_files, count_records, damaged_records_named,
                                      expand_file_patterns, pretraining_dataset)
from modeling import checkpoints
from modeling.config import BertConfig
from modeling.pretrainer import BertPretrainer, pretraining_losses, pretraining_metric_sums
from training import fine_tuning
from training.evaluation import evaluate
from training.optimizer import optimizer_moments
from utils.output_files import write_eval_results

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "TFRecord files: comma-separated, globs allowed.")
flags.DEFINE_string("output_dir", None, "Where checkpoints, summaries and results go.")
common_flags.define_model_file_flags(vocab_file=False)
flags.DEFINE_string("init_checkpoint", None, "Checkpoint to start from, in any format.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the TFRecords.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked-LM slots per sequence in the TFRecords.")
flags.DEFINE_bool("do_train", False, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate on --input_file and write eval_results.txt.")
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
flags.mark_flags_as_required(["input_file", "output_dir"])


def _check_flags(config: BertConfig):
    common_flags.check_one_action("do_train", "do_eval")
    common_flags.check_max_seq_length(config)
    if FLAGS.do_eval and not FLAGS.eval_single_pass and FLAGS.max_eval_steps < 1:
        raise ValueError(f"--max_eval_steps={FLAGS.max_eval_steps} must be >= 1 (or set "
                         "--eval_single_pass to evaluate every record once)")


def _initialise(model: BertPretrainer, path: str | None):
    """Loads the whole pretrainer, or only its encoder from a checkpoint without these heads;
    without a checkpoint the model keeps its random initialisation."""
    if not path:
        return
    try:
        checkpoints.load_checkpoint(model, path)
    except checkpoints.CheckpointMismatchError:
        # Strict on the encoder: its own mismatch, if any, is the error the user sees.
        checkpoints.load_checkpoint(model.encoder, path)
        logging.warning("%s has no pretraining heads that fit: they start from random values",
                        path)


class _PretrainingRecords:
    """The --input_file records as `fine_tuning.train` reads them."""

    def training_dataset_fn(self, micro_batch: int, seed: int, xla: bool = False):
        # Pretraining sequences fill max_seq_length: the records keep their fixed shapes.
        return lambda context: _dataset(True, micro_batch, context)


def _dataset(is_training: bool, global_batch_size: int, input_context=None):
    """Batches for one input pipeline.

    Every worker reads the same seeded stream of global batches and keeps its slice of each, so a
    run on several workers trains on exactly the batches a one-process run sees.
    """
    pipelines = input_context.num_input_pipelines if input_context else 1
    batch_size = input_context.get_per_replica_batch_size(global_batch_size) \
        if input_context else global_batch_size
    dataset = pretraining_dataset(
        FLAGS.input_file, global_batch_size if pipelines > 1 else batch_size,
        FLAGS.max_seq_length, FLAGS.max_predictions_per_seq, is_training=is_training,
        seed=FLAGS.seed)
    if pipelines > 1:
        share = global_batch_size // pipelines
        begin = input_context.input_pipeline_id * share
        dataset = dataset.map(lambda batch: {k: v[begin:begin + share] for k, v in batch.items()})
        dataset = dataset.unbatch().batch(batch_size, drop_remainder=True)
    return dataset


def _loss_fn(outputs, batch, normaliser):
    return pretraining_losses(
        outputs, batch, normaliser.global_sum(tf.reduce_sum(batch["masked_lm_weights"])),
        normaliser.global_batch_size(batch), FLAGS.use_next_sentence_label)


def _save(trained: fine_tuning.Trained, output_dir: str) -> None:
    """bert_model.ckpt as the original writes it (optimizer moments included), bert_config.json."""
    checkpoints.save_tf1_checkpoint(
        trained.model, os.path.join(output_dir, "bert_model.ckpt"),
        global_step=trained.global_step, moments=optimizer_moments(trained.optimizer),
        update_state_file=False)
    trained.model.config.to_json_file(os.path.join(output_dir, "bert_config.json"))


def _train(strategy, config: BertConfig) -> BertPretrainer:
    task = fine_tuning.FineTuningTask(lambda: BertPretrainer(config), _loss_fn, head="",
                                      initialise=_initialise, save=_save, metric_fn=_accuracy)
    run = common_flags.fine_tuning_run(strategy, default_log_steps=100, optimizer_fn=(
        lambda steps: common_flags.create_optimizer_from_flags(
            FLAGS.learning_rate, steps, FLAGS.num_warmup_steps)))
    with damaged_records_named(FLAGS.input_file):
        return fine_tuning.train(run, task, _PretrainingRecords(), FLAGS.num_train_steps).model


def _accuracy(outputs, batch):
    value, weight = pretraining_metric_sums(outputs, batch)["masked_lm_accuracy"]
    return {"masked_lm_accuracy": value / tf.maximum(weight, 1.0)}


def _eval_dataset() -> tf.data.Dataset:
    """The original's eval input (repeated, full batches), or each record once."""
    repeat = not FLAGS.eval_single_pass
    dataset = pretraining_dataset(
        FLAGS.input_file, FLAGS.eval_batch_size, FLAGS.max_seq_length,
        FLAGS.max_predictions_per_seq, is_training=False, repeat=repeat)
    if repeat:
        examples = FLAGS.max_eval_steps * FLAGS.eval_batch_size
        records = count_records(FLAGS.input_file, limit=examples)
        if records < examples:
            logging.info("eval: %d batches of %d = %d examples from %d records: the records are "
                         "read in order %.2f times, so some are counted more than once (as the "
                         "original; --eval_single_pass counts each once)", FLAGS.max_eval_steps,
                         FLAGS.eval_batch_size, examples, records, examples / records)
    return dataset


def _evaluate(model: BertPretrainer, global_step: int):
    with damaged_records_named(FLAGS.input_file):
        results = _evaluate_records(model)
    results["global_step"] = global_step
    path = os.path.join(FLAGS.output_dir, "eval_results.txt")
    write_eval_results(path, results)
    for key in sorted(results):
        logging.info("eval: %s = %s", key, results[key])


def _evaluate_records(model: BertPretrainer) -> dict:
    return evaluate(
        model, _eval_dataset(), pretraining_metric_sums,
        lambda outputs, batch: pretraining_losses(
            outputs, batch, use_next_sentence_label=FLAGS.use_next_sentence_label)["loss"],
        max_steps=FLAGS.max_eval_steps)


def main(_):
    config = common_flags.config_from_flags()
    _check_flags(config)
    # The strategy first: multi-worker collectives must be set up before any TensorFlow op.
    strategy = common_flags.setup_from_flags()
    # Unreadable or mismatched input fails here, before the output folder is touched.
    check_pretraining_files(expand_file_patterns(FLAGS.input_file), FLAGS.max_seq_length,
                            FLAGS.max_predictions_per_seq)
    tf.io.gfile.makedirs(FLAGS.output_dir)
    model = _train(strategy, config) if FLAGS.do_train else None
    if FLAGS.do_eval:
        if model is None:
            model = BertPretrainer(config)
            _initialise(model, FLAGS.init_checkpoint or FLAGS.output_dir)
        step = checkpoints.checkpoint_step(FLAGS.init_checkpoint or FLAGS.output_dir) \
            if not FLAGS.do_train else FLAGS.num_train_steps
        _evaluate(model, step)


if __name__ == "__main__":
    entry_point.run(main)
