"""Pretraining: the masked LM and next sentence prediction (paper section 3.1) on TFRecords.

The records (`data.pretraining.dataset`), the pretrainer and its losses
(`modeling.models.pretrainer`), initialisation from any checkpoint, the original's `bert_model.ckpt`
with its optimizer moments, and the evaluation the original's Estimator ran
(`eval_results.txt`). Fill-mask on new text is `tasks.fill_mask`.
"""
from __future__ import annotations

import dataclasses
import os

from absl import logging
import tensorflow as tf

from data.pretraining.dataset import count_records, damaged_records_named, pretraining_dataset
from modeling import checkpoints
from modeling.config import BertConfig
from modeling.models.pretrainer import (BertMaskedLM, BertPretrainer, pretraining_losses,
                                        pretraining_metric_sums)
from training import fine_tuning
from training.evaluation import evaluate as evaluate_batches
from training.optimizer import optimizer_moments
from training.periodic_evaluation import EvaluationPlan
from utils.output_files import write_eval_results


@dataclasses.dataclass(frozen=True)
class Records:
    """The pretraining TFRecords: files (comma-separated, globs allowed) and their shapes."""

    input_file: str
    max_seq_length: int
    max_predictions_per_seq: int
    use_next_sentence_label: bool = True

    def training_dataset_fn(self, micro_batch: int, seed: int, xla: bool = False):
        """What `fine_tuning.train` reads. Pretraining sequences fill max_seq_length: the
        records keep their fixed shapes."""
        return lambda context: self._training_batches(micro_batch, seed, context)

    def _training_batches(self, global_batch_size: int, seed: int, input_context=None):
        """Batches for one input pipeline.

        Every worker reads the same seeded stream of global batches and keeps its slice of
        each, so a run on several workers trains on exactly the batches a one-process run sees.
        """
        pipelines = input_context.num_input_pipelines if input_context else 1
        batch_size = input_context.get_per_replica_batch_size(global_batch_size) \
            if input_context else global_batch_size
        dataset = pretraining_dataset(
            self.input_file, global_batch_size if pipelines > 1 else batch_size,
            self.max_seq_length, self.max_predictions_per_seq, is_training=True, seed=seed)
        if pipelines > 1:
            share = global_batch_size // pipelines
            begin = input_context.input_pipeline_id * share
            dataset = dataset.map(
                lambda batch: {k: v[begin:begin + share] for k, v in batch.items()})
            dataset = dataset.unbatch().batch(batch_size, drop_remainder=True)
        return dataset

    def loss_fn(self, outputs, batch, normaliser):
        return pretraining_losses(
            outputs, batch, normaliser.global_sum(tf.reduce_sum(batch["masked_lm_weights"])),
            normaliser.global_batch_size(batch), self.use_next_sentence_label)


def initialise(model: BertPretrainer, path: str | None) -> None:
    """Loads the whole pretrainer; from a checkpoint with the masked-LM head alone (Hugging
    Face's `BertForMaskedLM`, a TF-Hub encoder with its masked LM), the encoder and that head;
    from one without these heads, the encoder. Heads not found start from random values;
    without a checkpoint the model keeps its random initialisation."""
    if not path:
        return
    try:
        checkpoints.load_checkpoint(model, path)
        return
    except checkpoints.CheckpointMismatchError:
        pass
    masked_lm = BertMaskedLM(model.config)
    try:
        checkpoints.load_checkpoint(masked_lm, path)
    except checkpoints.CheckpointMismatchError:
        # Strict on the encoder: its own mismatch, if any, is the error the user sees.
        checkpoints.load_checkpoint(model.encoder, path)
        logging.warning("%s has no pretraining heads that fit: they start from random values",
                        path)
        return
    for target, source in ((model.encoder, masked_lm.encoder),
                           (model.masked_lm, masked_lm.masked_lm)):
        for variable, value in zip(target.weights, source.weights):
            variable.assign(value)
    logging.warning("%s has the masked-LM head but no next-sentence head: that one starts from "
                    "random values", path)


def save(trained: fine_tuning.Trained, output_dir: str) -> None:
    """bert_model.ckpt as the original writes it (optimizer moments included), bert_config.json."""
    checkpoints.save_tf1_checkpoint(
        trained.model, os.path.join(output_dir, "bert_model.ckpt"),
        global_step=trained.global_step, moments=optimizer_moments(trained.optimizer),
        update_state_file=False)
    trained.model.config.to_json_file(os.path.join(output_dir, "bert_config.json"))


def _accuracy(outputs, batch):
    value, weight = pretraining_metric_sums(outputs, batch)["masked_lm_accuracy"]
    return {"masked_lm_accuracy": value / tf.maximum(weight, 1.0)}


# The result the best model is chosen by, when held-out records are scored during training.
MAIN_METRIC = "masked_lm_accuracy"


def train(run: fine_tuning.FineTuningRun, config: BertConfig, records: Records,
          num_train_steps: int, evaluation: EvaluationPlan = EvaluationPlan(),
          evaluate_records=None) -> BertPretrainer:
    """Pretrains for `num_train_steps` (resuming from the output folder's checkpoints), scoring
    `evaluate_records(model, step, suffix)` (held-out records) as `evaluation` says."""
    task = fine_tuning.FineTuningTask(lambda: BertPretrainer(config), records.loss_fn, head="",
                                      initialise=initialise, save=save, metric_fn=_accuracy)
    with damaged_records_named(records.input_file):
        return fine_tuning.train(
            run, task, records, num_train_steps,
            dataclasses.replace(evaluation, metric=evaluation.metric or MAIN_METRIC),
            evaluate_records).model


def _eval_dataset(records: Records, batch_size: int, max_steps: int,
                  single_pass: bool) -> tf.data.Dataset:
    """The original's eval input (repeated, full batches), or each record once."""
    dataset = pretraining_dataset(
        records.input_file, batch_size, records.max_seq_length, records.max_predictions_per_seq,
        is_training=False, repeat=not single_pass)
    if not single_pass:
        examples = max_steps * batch_size
        found = count_records(records.input_file, limit=examples)
        if found < examples:
            logging.info("eval: %d batches of %d = %d examples from %d records: the records are "
                         "read in order %.2f times, so some are counted more than once (as the "
                         "original; --eval_single_pass counts each once)", max_steps,
                         batch_size, examples, found, examples / found)
    return dataset


def evaluate(model: BertPretrainer, records: Records, global_step: int, output_dir: str,
             batch_size: int, max_steps: int, single_pass: bool = False,
             suffix: str = "") -> dict:
    """Masked-LM and next-sentence accuracy and loss over the records, in
    eval_results{suffix}.txt."""
    with damaged_records_named(records.input_file):
        results = evaluate_batches(
            model, _eval_dataset(records, batch_size, max_steps, single_pass),
            pretraining_metric_sums,
            lambda outputs, batch: pretraining_losses(
                outputs, batch, use_next_sentence_label=records.use_next_sentence_label)["loss"],
            max_steps=max_steps)
    results["global_step"] = global_step
    path = os.path.join(output_dir, f"eval_results{suffix}.txt")
    write_eval_results(path, results)
    for key in sorted(results):
        logging.info("eval: %s = %s", key, results[key])
    return results
