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

from utils import entry_point  # first, so that TensorFlow starts quietly

import math
import os
from typing import NamedTuple

from absl import flags, logging
import numpy as np
import tensorflow as tf

import common_flags
from data.classifier import glue_tasks
from data.classifier.features import InputExample, convert_examples_to_features, features_to_arrays
from data.classifier.glue_submission import write_submission, write_test_results
from data.classifier.metrics import loss_metrics, task_metrics
from modeling import losses
from modeling.config import BertConfig
from modeling.task_models import BertClassifier
from training import fine_tuning
from training.batching import ArrayExamples
from training.checkpointing import resumes
from training.evaluation import write_eval_summaries
from utils.output_files import write_eval_results, written_together

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "The task's folder of .tsv files (GLUE/XNLI layout).")
flags.DEFINE_string("task_name", None, "The task: " + ", ".join(glue_tasks.TASKS) + ".")
common_flags.define_model_flags(
    "Pretrained checkpoint to fine-tune (the encoder is loaded), or without --do_train a "
    "fine-tuned one to evaluate (default: the newest in --output_dir).")
common_flags.define_fine_tuning_flags(
    {"train": "Fine-tune on the train split.",
     "eval": "Score the dev split(s) and write eval_results.txt.",
     "predict": "Predict the test split(s) and write test_results.tsv and the GLUE submission "
                "file."})
flags.DEFINE_bool("eval_every_epoch", False, "Score dev after each epoch "
                  "(eval_results_epoch_N.txt) and keep the best model in output_dir/best.")
flags.DEFINE_string("xnli_language", "zh", "XNLI: language of the train file and dev rows.")
flags.mark_flags_as_required(["data_dir", "task_name", "output_dir"])

# The result each task is judged by (the BERT paper's Table 1), for --eval_every_epoch.
_MAIN_METRIC = {glue_tasks.ACCURACY: "eval_accuracy", glue_tasks.MATTHEWS: "eval_mcc",
                glue_tasks.F1: "eval_f1", glue_tasks.CORRELATION: "eval_spearman"}
_BEST_DIR = "best"


class _Split(NamedTuple):
    """A split read for the run: its spec, examples and features."""

    spec: glue_tasks.SplitSpec
    examples: list[InputExample]
    arrays: dict[str, np.ndarray]


def _check_flags(task: glue_tasks.GlueTask, config: BertConfig) -> None:
    common_flags.check_fine_tuning_flags(config)
    for flag, role in (("do_train", "train"), ("do_eval", "eval"), ("do_predict", "predict")):
        if FLAGS[flag].value and not task.splits_for(role):
            raise ValueError(f"--{flag}: task {task.name!r} has no {role} split (its splits: "
                             f"{', '.join(s.name for s in task.splits)})")
    if FLAGS.eval_every_epoch and not (FLAGS.do_train and task.splits_for("eval")):
        raise ValueError("--eval_every_epoch needs --do_train and a task with a dev split")


def _read_splits(task: glue_tasks.GlueTask, tokenizer) -> dict[str, _Split]:
    """Reads and featurises every split the run needs, so that bad input fails before anything
    is written (and each split is tokenised once).

    An optional split whose file is absent (MNLI's mismatched files) is left out, with a log line.
    """
    roles = [role for role, wanted in (
        ("train", FLAGS.do_train), ("eval", FLAGS.do_eval or FLAGS.eval_every_epoch),
        ("predict", FLAGS.do_predict)) if wanted]
    splits = {}
    for spec in (spec for role in roles for spec in task.splits_for(role)):
        path = glue_tasks.split_path(task, FLAGS.data_dir, spec.name, FLAGS.xnli_language)
        try:
            examples = glue_tasks.read_examples(task, FLAGS.data_dir, spec.name,
                                                FLAGS.xnli_language)
        except FileNotFoundError:
            if not spec.optional:
                raise
            logging.info("%s %s: %s does not exist; skipping that split", task.name, spec.name,
                         path)
            continue
        if not examples:
            raise ValueError(f"{path}: no {task.name} examples in the {spec.name} file (empty, "
                             "or only a header)")
        features = convert_examples_to_features(examples, task.label_list, FLAGS.max_seq_length,
                                                tokenizer)
        splits[spec.name] = _Split(spec, examples,
                                   features_to_arrays(features, task.is_regression))
    return splits


def _task(task: glue_tasks.GlueTask, config: BertConfig) -> fine_tuning.FineTuningTask:
    loss = losses.mean_squared_error if task.is_regression else losses.mean_cross_entropy

    def loss_fn(outputs, batch, normaliser):
        return {"loss": loss(outputs["logits"], batch["label_ids"],
                             normaliser.global_batch_size(batch))}
    return fine_tuning.FineTuningTask(
        lambda: BertClassifier(config, task.num_labels), loss_fn,
        head=f"a classifier of {task.num_labels} labels: output_weights [{task.num_labels}, "
             f"{config.hidden_size}]", save=_saver(task))


def _saver(task: glue_tasks.GlueTask):
    """Saves the fine-tuned model with the task's label names (none for regression)."""
    return common_flags.fine_tuned_saver(task.labels or None)


def _epoch_ends(num_examples: int) -> list[int]:
    """The global step at the end of each epoch (the last possibly partial one included)."""
    num_epochs = int(np.ceil(FLAGS.num_train_epochs))
    return sorted({fine_tuning.train_steps(num_examples, FLAGS.train_batch_size,
                                           min(epoch, FLAGS.num_train_epochs))
                   for epoch in range(1, num_epochs + 1)})


def _train(run: fine_tuning.FineTuningRun, task: glue_tasks.GlueTask, config: BertConfig,
           splits: dict[str, _Split]) -> fine_tuning.Trained:
    train = ArrayExamples(splits["train"].arrays, batching=common_flags.batching_from_flags())
    if not FLAGS.eval_every_epoch:
        return fine_tuning.train(run, _task(task, config), train,
                                 run.train_steps(train.num_examples))
    dev = splits[task.splits_for("eval")[0].name]
    best = [_previous_best(task) if resumes(FLAGS.output_dir) else None]

    def at_epoch_end(trained: fine_tuning.Trained, epoch: int) -> None:
        if run.is_chief:
            best[0] = _evaluate_epoch(trained, task, dev, epoch, best[0])
    return fine_tuning.train(run, _task(task, config), train,
                             run.train_steps(train.num_examples),
                             stops=_epoch_ends(train.num_examples), at_stop=at_epoch_end)


def _previous_best(task: glue_tasks.GlueTask) -> float | None:
    """The best dev result of an interrupted run with --eval_every_epoch, if it kept one."""
    path = os.path.join(FLAGS.output_dir, _BEST_DIR, "eval_results.txt")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        results = dict(line.strip().split(" = ", 1) for line in f if " = " in line)
    return float(results[_MAIN_METRIC[task.metric]])


def _evaluate_epoch(trained: fine_tuning.Trained, task: glue_tasks.GlueTask, dev: _Split,
                    epoch: int, best: float | None) -> float | None:
    """Scores dev after an epoch and copies the model to output_dir/best when it is the best yet."""
    results = _evaluate(trained.model, task, dev, trained.global_step, epoch)
    value = results[_MAIN_METRIC[task.metric]]
    if best is None or math.isnan(best) or value > best:
        logging.info("epoch %d: best %s so far (%s); writing %s/", epoch,
                     _MAIN_METRIC[task.metric], value, _BEST_DIR)
        best_dir = os.path.join(FLAGS.output_dir, _BEST_DIR)
        _saver(task)(trained, best_dir)
        write_eval_results(os.path.join(best_dir, "eval_results.txt"), results)
        return value
    return best


def _evaluate(model, task: glue_tasks.GlueTask, split: _Split, global_step: int,
              epoch: int | None = None) -> dict:
    """Scores a dev split: `eval_results{suffix}.txt` (`..._epoch_N.txt` after an epoch) and
    TensorBoard scalars in `eval{suffix}/`."""
    suffix = split.spec.results_suffix
    epoch_suffix = "" if epoch is None else f"_epoch_{epoch}"
    path = os.path.join(FLAGS.output_dir, f"eval_results{suffix}{epoch_suffix}.txt")
    logits = fine_tuning.predict(model, split.arrays, FLAGS.eval_batch_size,
                                 common_flags.batching_from_flags())["logits"]
    labels = split.arrays["label_ids"]
    if task.is_regression:
        per_example_loss = np.square(logits[:, 0] - labels)
    else:
        per_example_loss = losses.per_example_cross_entropy(logits, labels).numpy()
    results = {**task_metrics(task, logits, labels),
               **loss_metrics(per_example_loss, split.arrays["is_real_example"],
                              FLAGS.eval_batch_size),
               "global_step": global_step}
    write_eval_results(path, results)
    write_eval_summaries(os.path.join(FLAGS.output_dir, f"eval{suffix}"), global_step, results)
    logging.info("***** Eval results (%d examples) written to %s *****", len(split.examples),
                 path)
    for key in sorted(results):
        logging.info("  %s = %s", key, results[key])
    return results


def _predict(model, task: glue_tasks.GlueTask, split: _Split) -> None:
    """test_results{suffix}.tsv: class probabilities [N, num_labels], or scores for regression;
    and the GLUE server's submission file."""
    logits = fine_tuning.predict(model, split.arrays, FLAGS.predict_batch_size,
                                 common_flags.batching_from_flags())["logits"]
    outputs = logits[:, 0] if task.is_regression else tf.nn.softmax(logits, axis=-1).numpy()
    path = os.path.join(FLAGS.output_dir, f"test_results{split.spec.results_suffix}.tsv")
    with written_together():
        write_test_results(path, outputs)
        submission = write_submission(FLAGS.output_dir, task, split.spec, split.examples,
                                      outputs)
    logging.info("***** Predictions for %d examples: %s and %s *****", len(split.examples),
                 path, submission)


def main(_):
    task = glue_tasks.get_task(FLAGS.task_name)
    config = common_flags.config_from_flags()
    _check_flags(task, config)
    tokenizer = common_flags.tokenizer_from_flags(config)
    splits = _read_splits(task, tokenizer)
    strategy = common_flags.setup_from_flags()
    run = common_flags.fine_tuning_run(strategy)
    tf.io.gfile.makedirs(FLAGS.output_dir)
    if FLAGS.do_train:
        trained = _train(run, task, config, splits)
    else:
        trained = fine_tuning.restore(run, _task(task, config))
    if not run.is_chief:
        return
    for spec in task.splits_for("eval") if FLAGS.do_eval else ():
        if spec.name in splits:
            _evaluate(trained.model, task, splits[spec.name], trained.global_step)
    for spec in task.splits_for("predict") if FLAGS.do_predict else ():
        if spec.name in splits:
            _predict(trained.model, task, splits[spec.name])


if __name__ == "__main__":
    entry_point.run(main)
