"""Fine-tunes and evaluates BERT on a GLUE task or XNLI, as the original run_classifier.py.

    python run_classifier.py --task_name=MRPC --do_train --do_eval --do_predict \
      --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_DIR/vocab.txt \
      --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
      --output_dir=/tmp/mrpc_output

Tasks: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli, ax (the diagnostic set, predicted
with a model fine-tuned on MNLI) and xnli. Outputs in --output_dir: `eval_results.txt` (MNLI also
`eval_results_mismatched.txt`), `test_results.tsv` (per-class probabilities, one row per test
example), the GLUE server's submission file (`MRPC.tsv`, `MNLI-m.tsv`, ...), and the fine-tuned
model as `model.ckpt` in the original format with its `bert_config.json`. With
`--eval_every_epoch`, dev is scored after each epoch (`eval_results_epoch_N.txt`) and the best model
by the task's metric is kept in `best/`. Without --do_train, --init_checkpoint (default: the
newest checkpoint in --output_dir) must be a fine-tuned classifier, the original's or this one's.
Rerunning an interrupted training command resumes from the newest checkpoint in --output_dir.
"""
from __future__ import annotations

import math
import os

from absl import app, flags, logging
import numpy as np
import tensorflow as tf

import common_flags
from data import tokenization
from data.classifier import glue_tasks
from data.classifier.features import InputExample, convert_examples_to_features, features_to_arrays
from data.classifier.glue_submission import write_submission, write_test_results
from data.classifier.metrics import loss_metrics, task_metrics
from modeling import losses
from modeling.config import BertConfig
from modeling.task_models import BertClassifier
from training.fine_tuning import (fit, predict, prepare, restore_fine_tuned, save_fine_tuned,
                                  train_steps, write_eval_summaries)
from utils.output_files import write_eval_results

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "The task's folder of .tsv files (GLUE/XNLI layout).")
flags.DEFINE_string("bert_config_file", None, "The bert_config.json of the pretrained model.")
flags.DEFINE_string("task_name", None, "The task: " + ", ".join(glue_tasks.TASKS) + ".")
flags.DEFINE_string("vocab_file", None, "The vocab.txt of the pretrained model.")
flags.DEFINE_string("output_dir", None, "Where checkpoints, results and predictions go.")
flags.DEFINE_string("init_checkpoint", None, "Pretrained checkpoint to fine-tune (the encoder is "
                    "loaded), or without --do_train a fine-tuned one to evaluate (default: the "
                    "newest in --output_dir).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_integer("max_seq_length", 128, "Longest sequence after WordPiece tokenization; "
                     "longer ones are truncated, shorter ones padded.")
flags.DEFINE_bool("do_train", False, "Fine-tune on the train split.")
flags.DEFINE_bool("do_eval", False, "Score the dev split(s) and write eval_results.txt.")
flags.DEFINE_bool("do_predict", False, "Predict the test split(s) and write test_results.tsv "
                  "and the GLUE submission file.")
flags.DEFINE_integer("train_batch_size", 32, "Global batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Batch size for evaluation.")
flags.DEFINE_integer("predict_batch_size", 8, "Batch size for prediction.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate of Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Epochs of training (may be fractional).")
flags.DEFINE_float("warmup_proportion", 0.1, "Share of the training steps with a linear warm-up.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Steps between training checkpoints.")
flags.DEFINE_bool("eval_every_epoch", False, "Score dev after each epoch "
                  "(eval_results_epoch_N.txt) and keep the best model in output_dir/best.")
flags.DEFINE_string("xnli_language", "zh", "XNLI: language of the train file and dev rows.")
common_flags.define_training_flags()
flags.mark_flags_as_required(["data_dir", "task_name", "vocab_file", "bert_config_file",
                              "output_dir"])

# The result each task is judged by (the BERT paper's Table 1), for --eval_every_epoch.
_MAIN_METRIC = {glue_tasks.ACCURACY: "eval_accuracy", glue_tasks.MATTHEWS: "eval_mcc",
                glue_tasks.F1: "eval_f1", glue_tasks.CORRELATION: "eval_spearman"}
_BEST_DIR = "best"


def _check_flags(task: glue_tasks.GlueTask, config: BertConfig) -> None:
    common_flags.check_one_action("do_train", "do_eval", "do_predict")
    common_flags.check_max_seq_length(config)
    for flag, role in (("do_train", "train"), ("do_eval", "eval"), ("do_predict", "predict")):
        if FLAGS[flag].value and not task.splits_for(role):
            raise ValueError(f"--{flag}: task {task.name!r} has no {role} split (its splits: "
                             f"{', '.join(s.name for s in task.splits)})")
    if FLAGS.eval_every_epoch and not (FLAGS.do_train and task.splits_for("eval")):
        raise ValueError("--eval_every_epoch needs --do_train and a task with a dev split")
    for name in ("train_batch_size", "eval_batch_size", "predict_batch_size"):
        if FLAGS[name].value < 1:
            raise ValueError(f"--{name}={FLAGS[name].value} must be positive")


def _read_splits(task: glue_tasks.GlueTask) -> dict[str, list[InputExample]]:
    """Reads every split the run needs, so that bad input fails before anything is written.

    An optional split whose file is absent (MNLI's mismatched files) is left out, with a log line.
    """
    roles = [role for role, wanted in (
        ("train", FLAGS.do_train), ("eval", FLAGS.do_eval or FLAGS.eval_every_epoch),
        ("predict", FLAGS.do_predict)) if wanted]
    examples = {}
    for split in (split for role in roles for split in task.splits_for(role)):
        path = glue_tasks.split_path(task, FLAGS.data_dir, split.name, FLAGS.xnli_language)
        if split.optional and not os.path.isfile(path):
            logging.info("%s %s: %s does not exist; skipping that split", task.name, split.name,
                         path)
            continue
        examples[split.name] = glue_tasks.read_examples(task, FLAGS.data_dir, split.name,
                                                        FLAGS.xnli_language)
        if not examples[split.name]:
            raise ValueError(f"{path}: no {task.name} examples in the {split.name} file (empty, "
                             "or only a header)")
    return examples


def _arrays(task: glue_tasks.GlueTask, examples: list[InputExample],
            tokenizer: tokenization.FullTokenizer) -> dict[str, np.ndarray]:
    features = convert_examples_to_features(examples, task.label_list, FLAGS.max_seq_length,
                                            tokenizer)
    return features_to_arrays(features, task.is_regression)


def _loss_fn(task: glue_tasks.GlueTask):
    loss = losses.mean_squared_error if task.is_regression else losses.mean_cross_entropy

    def loss_fn(outputs, batch, normaliser):
        return {"loss": loss(outputs["logits"], batch["label_ids"],
                             normaliser.global_batch_size(batch))}
    return loss_fn


def _epoch_ends(num_examples: int) -> list[int]:
    """The global step at the end of each epoch (the last possibly partial one included)."""
    num_epochs = int(np.ceil(FLAGS.num_train_epochs))
    return sorted({train_steps(num_examples, FLAGS.train_batch_size,
                               min(epoch, FLAGS.num_train_epochs))
                   for epoch in range(1, num_epochs + 1)})


def _train(strategy, task: glue_tasks.GlueTask, config: BertConfig,
           examples: dict[str, list[InputExample]], tokenizer) -> tuple[BertClassifier, int]:
    train_examples = examples["train"]
    arrays = _arrays(task, train_examples, tokenizer)
    num_train_steps = train_steps(len(train_examples), FLAGS.train_batch_size,
                                  FLAGS.num_train_epochs)
    logging.info("***** Running training *****: %d examples, batch size %d, %d steps",
                 len(train_examples), FLAGS.train_batch_size, num_train_steps)
    model, optimizer, resuming = prepare(
        strategy, lambda: BertClassifier(config, task.num_labels),
        lambda: common_flags.fine_tuning_optimizer(num_train_steps), FLAGS.init_checkpoint,
        FLAGS.output_dir)
    ends = _epoch_ends(len(train_examples)) if FLAGS.eval_every_epoch else [num_train_steps]
    dev_split = task.splits_for("eval")[0] if FLAGS.eval_every_epoch else None
    best = _previous_best(task) if resuming else None
    for epoch, end_step in enumerate(ends, start=1):
        fit(strategy, model, optimizer, _loss_fn(task), arrays, FLAGS.train_batch_size,
            common_flags.training_config_from_flags(end_step), FLAGS.seed)
        # A resumed run skips the epochs that ended before its checkpoint.
        if dev_split is not None and int(optimizer.iterations.numpy()) == end_step:
            best = _evaluate_epoch(model, task, dev_split, examples[dev_split.name], tokenizer,
                                   epoch, end_step, best, strategy)
    if common_flags.is_chief(strategy):
        save_fine_tuned(model, FLAGS.output_dir, num_train_steps)
    return model, num_train_steps


def _previous_best(task: glue_tasks.GlueTask) -> float | None:
    """The best dev result of an interrupted run with --eval_every_epoch, if it kept one."""
    path = os.path.join(FLAGS.output_dir, _BEST_DIR, "eval_results.txt")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        results = dict(line.strip().split(" = ", 1) for line in f if " = " in line)
    return float(results[_MAIN_METRIC[task.metric]])


def _evaluate_epoch(model, task, split, examples, tokenizer, epoch: int, step: int,
                    best: float | None, strategy) -> float | None:
    """Scores dev after an epoch and copies the model to output_dir/best when it is the best yet."""
    if not common_flags.is_chief(strategy):
        return best
    results = _evaluate(model, task, split, examples, tokenizer, step, epoch)
    value = results[_MAIN_METRIC[task.metric]]
    if best is None or math.isnan(best) or value > best:
        logging.info("epoch %d: best %s so far (%s); writing %s/", epoch,
                     _MAIN_METRIC[task.metric], value, _BEST_DIR)
        best_dir = os.path.join(FLAGS.output_dir, _BEST_DIR)
        save_fine_tuned(model, best_dir, step)
        write_eval_results(os.path.join(best_dir, "eval_results.txt"), results)
        return value
    return best


def _restore(task: glue_tasks.GlueTask, config: BertConfig) -> tuple[BertClassifier, int]:
    """The fine-tuned classifier to evaluate without training: head included, strictly."""
    model = BertClassifier(config, task.num_labels)
    step = restore_fine_tuned(
        model, FLAGS.init_checkpoint, FLAGS.output_dir,
        f"a classifier of {task.num_labels} labels: output_weights [{task.num_labels}, "
        f"{config.hidden_size}]")
    return model, step


def _model_outputs(model: BertClassifier, task: glue_tasks.GlueTask,
                   arrays: dict[str, np.ndarray], batch_size: int) -> np.ndarray:
    """Class probabilities float32 [N, num_labels], or scores [N] for regression."""
    logits = predict(model, arrays, batch_size)["logits"]
    return logits[:, 0] if task.is_regression else tf.nn.softmax(logits, axis=-1).numpy()


def _evaluate(model, task, split: glue_tasks.SplitSpec, examples, tokenizer, global_step: int,
              epoch: int | None = None) -> dict:
    """Scores a dev split: `eval_results{suffix}.txt` (`..._epoch_N.txt` after an epoch) and
    TensorBoard scalars in `eval{suffix}/`."""
    epoch_suffix = "" if epoch is None else f"_epoch_{epoch}"
    path = os.path.join(FLAGS.output_dir,
                        f"eval_results{split.results_suffix}{epoch_suffix}.txt")
    arrays = _arrays(task, examples, tokenizer)
    logits = predict(model, arrays, FLAGS.eval_batch_size)["logits"]
    labels = arrays["label_ids"]
    if task.is_regression:
        per_example_loss = np.square(logits[:, 0] - labels)
    else:
        per_example_loss = losses.per_example_cross_entropy(logits, labels).numpy()
    results = {**task_metrics(task, logits, labels),
               **loss_metrics(per_example_loss, arrays["is_real_example"], FLAGS.eval_batch_size),
               "global_step": global_step}
    write_eval_results(path, results)
    write_eval_summaries(os.path.join(FLAGS.output_dir, f"eval{split.results_suffix}"),
                         global_step, results)
    logging.info("***** Eval results (%d examples) written to %s *****", len(examples), path)
    for key in sorted(results):
        logging.info("  %s = %s", key, results[key])
    return results


def _predict(model, task, split: glue_tasks.SplitSpec, examples, tokenizer) -> None:
    outputs = _model_outputs(model, task, _arrays(task, examples, tokenizer),
                             FLAGS.predict_batch_size)
    path = os.path.join(FLAGS.output_dir, f"test_results{split.results_suffix}.tsv")
    write_test_results(path, outputs)
    submission = write_submission(FLAGS.output_dir, task, split, examples, outputs)
    logging.info("***** Predictions for %d examples: %s and %s *****", len(examples), path,
                 submission)


def main(_):
    task = glue_tasks.get_task(FLAGS.task_name)
    config = BertConfig.from_json_file(FLAGS.bert_config_file)
    _check_flags(task, config)
    tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
    tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
    examples = _read_splits(task)
    strategy = common_flags.setup_from_flags()
    common_flags.check_batch_size("train_batch_size", FLAGS.train_batch_size, strategy)
    tf.io.gfile.makedirs(FLAGS.output_dir)
    if FLAGS.do_train:
        model, global_step = _train(strategy, task, config, examples, tokenizer)
    else:
        model, global_step = _restore(task, config)
    if not common_flags.is_chief(strategy):
        return
    for split in task.splits_for("eval") if FLAGS.do_eval else ():
        if split.name in examples:
            _evaluate(model, task, split, examples[split.name], tokenizer, global_step)
    for split in task.splits_for("predict") if FLAGS.do_predict else ():
        if split.name in examples:
            _predict(model, task, split, examples[split.name], tokenizer)


if __name__ == "__main__":
    app.run(main)
