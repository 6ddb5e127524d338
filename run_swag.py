"""Fine-tunes and evaluates BERT on SWAG (paper section 4.4), in the style of run_classifier.py.

    python run_swag.py --data_dir=$SWAG_DIR --vocab_file=$BERT_DIR/vocab.txt \
      --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
      --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=16 \
      --learning_rate=2e-5 --num_train_epochs=3.0 --output_dir=/tmp/swag_output

--data_dir holds the SWAG distribution's train.csv, val.csv and test.csv. Each question becomes
four sequences `[CLS] sent1 [SEP] sent2 ending_i [SEP]`; one learned vector scores each pooled
output and a softmax runs over the four (the paper's defaults: learning rate 2e-5, batch 16, 3
epochs). Outputs in --output_dir: `eval_results.txt` (eval_accuracy, eval_loss, loss, global_step)
and `eval_predictions.csv` for val.csv, `predictions.csv` for test.csv (`id,prob0..prob3,
prediction`), and the fine-tuned model as `model.ckpt` (original format) with its
`bert_config.json`, beside the training checkpoints (`ckpt-N`, this project's format). Without
--do_train, --init_checkpoint (default: the newest checkpoint in --output_dir) must be a fine-tuned
SWAG model. Rerunning an interrupted training command resumes from --output_dir.
"""
from __future__ import annotations

from utils import entry_point  # first, so that TensorFlow starts quietly

import os

from absl import flags, logging
import numpy as np
import tensorflow as tf

import common_flags
from data.swag import examples as swag
from data.classifier.metrics import loss_metrics
from modeling import losses
from modeling.config import BertConfig
from modeling.task_models import BertMultipleChoice
from training import fine_tuning
from training.batching import ArrayExamples
from utils.output_files import write_eval_results, written_together

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "Folder of the SWAG CSVs: train.csv, val.csv, test.csv.")
common_flags.define_model_flags(
    "Pretrained checkpoint to fine-tune (the encoder is loaded), or without --do_train a "
    "fine-tuned one to evaluate (default: the newest in --output_dir).",
    max_seq_length_help="Tokens per choice; longer ones are cut longest part first, shorter "
    "ones padded.")
common_flags.define_fine_tuning_flags(
    {"train": "Fine-tune on train.csv.", "eval": "Score val.csv and write eval_results.txt.",
     "predict": "Predict test.csv and write predictions.csv."},
    train_batch_size=16, learning_rate=2e-5)
flags.mark_flags_as_required(["data_dir", "output_dir"])

_FILES = {"train": "train.csv", "eval": "val.csv", "predict": "test.csv"}


def _read_splits() -> dict[str, list[swag.SwagExample]]:
    """Reads every file the run needs, so that bad input fails before anything is written."""
    examples = {}
    for role, wanted in (("train", FLAGS.do_train), ("eval", FLAGS.do_eval),
                         ("predict", FLAGS.do_predict)):
        if wanted:
            path = os.path.join(FLAGS.data_dir, _FILES[role])
            if not os.path.isfile(path):
                raise FileNotFoundError(f"--do_{role}: {path} does not exist (--data_dir)")
            examples[role] = swag.read_swag_examples(path, require_labels=role != "predict")
    return examples


def _loss_fn(outputs, batch, normaliser):
    return {"loss": losses.mean_cross_entropy(outputs["logits"], batch["label_ids"],
                                              normaliser.global_batch_size(batch))}


def _task(config: BertConfig) -> fine_tuning.FineTuningTask:
    return fine_tuning.FineTuningTask(lambda: BertMultipleChoice(config), _loss_fn,
                                      save=common_flags.fine_tuned_saver(),
                                      head="SWAG: cls/multiple_choice/output_weights")


def _arrays(examples: list[swag.SwagExample], tokenizer) -> dict[str, np.ndarray]:
    return swag.convert_examples_to_arrays(examples, tokenizer, FLAGS.max_seq_length)


def _logits(model: BertMultipleChoice, examples: list[swag.SwagExample], tokenizer,
            batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-ending logits float32 [N, 4] and the label ids int32 [N] (0 for unlabelled)."""
    arrays = _arrays(examples, tokenizer)
    return fine_tuning.predict(model, arrays, batch_size,
                               common_flags.batching_from_flags())["logits"], arrays["label_ids"]


def _evaluate(model, examples: list[swag.SwagExample], tokenizer, global_step: int) -> None:
    logits, label_ids = _logits(model, examples, tokenizer, FLAGS.eval_batch_size)
    per_example_loss = losses.per_example_cross_entropy(logits, label_ids).numpy()
    probabilities = tf.nn.softmax(logits, axis=-1).numpy()
    results = {"eval_accuracy": swag.accuracy(examples, probabilities),
               **loss_metrics(per_example_loss, np.ones(len(examples)), FLAGS.eval_batch_size),
               "global_step": global_step}
    path = os.path.join(FLAGS.output_dir, "eval_results.txt")
    with written_together():
        write_eval_results(path, results)
        swag.write_predictions(os.path.join(FLAGS.output_dir, "eval_predictions.csv"), examples,
                               probabilities)
    logging.info("***** Eval results (%d questions) written to %s *****", len(examples), path)
    for key in sorted(results):
        logging.info("  %s = %s", key, results[key])


def _predict(model, examples: list[swag.SwagExample], tokenizer) -> None:
    logits, _ = _logits(model, examples, tokenizer, FLAGS.predict_batch_size)
    path = os.path.join(FLAGS.output_dir, "predictions.csv")
    swag.write_predictions(path, examples, tf.nn.softmax(logits, axis=-1).numpy())
    logging.info("***** Predictions for %d questions written to %s *****", len(examples), path)


def main(_):
    config = common_flags.config_from_flags()
    common_flags.check_fine_tuning_flags(config)
    tokenizer = common_flags.tokenizer_from_flags(config)
    examples = _read_splits()
    tf.io.gfile.makedirs(FLAGS.output_dir)
    strategy = common_flags.setup_from_flags()
    run = common_flags.fine_tuning_run(strategy)
    if FLAGS.do_train:
        train = ArrayExamples(_arrays(examples["train"], tokenizer),
                              batching=common_flags.batching_from_flags())
        trained = fine_tuning.train(run, _task(config), train,
                                    run.train_steps(train.num_examples))
    else:
        trained = fine_tuning.restore(run, _task(config))
    if not run.is_chief:
        return
    if FLAGS.do_eval:
        _evaluate(trained.model, examples["eval"], tokenizer, trained.global_step)
    if FLAGS.do_predict:
        _predict(trained.model, examples["predict"], tokenizer)


if __name__ == "__main__":
    entry_point.run(main)
