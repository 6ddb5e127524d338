"""Fine-tuning here and in transformers in lockstep: every random draw taken out of both.

Dropout off, one classifier head given to both, the same batches of the same features in the
same order: what is left of a fine-tuning run is its arithmetic. This project's side is the
fine-tuning path of `run_classifier.py` (its classifier, loss and training loop) with
`--optimizer=adamw_bias_corrected --adam_epsilon=1e-8 --learning_rate_decay=from_peak`;
transformers' side is `bench/fine_tuning/transformers_run.py`'s loop
(`BertForSequenceClassification`, clipping at 1.0, PyTorch's AdamW with weight decay 0.01 off for
biases and LayerNorm, the linear schedule).
transformers runs twice: with PyTorch's epsilon where PyTorch adds it (to `sqrt(v_hat)`, as its
users run it) and with the epsilon matched to this project's (`epsilon / sqrt(1 - b2^t)` at step
t, see `training.optimizer.BiasCorrectedAdamWeightDecay`), which makes the two the same formula.

The report: each side's training loss at every step, dev accuracy, and how far the dev logits
are apart; on RTE, where seeds of the two frameworks spread differently
(`bench/results/optimizers/optimizer_results_3_epochs.md`), it tells whether the runs differ in
more than their random draws.

    python -m bench.fine_tuning.lockstep --work_dir=/tmp/bert_finetune_bench
        # RTE, all-MiniLM-L6-v2, max_seq_length 128, batch 32, 3 epochs, 2e-5, order of seed 1
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import tempfile
import time

from absl import flags
import numpy as np

from bench.support import (define_shared_data_flag, log, machine_description, machine_label,
                           results_dir, write_report)
from utils import entry_point

FLAGS = flags.FLAGS

BETA_2 = 0.999
EPSILON = 1e-8
WARMUP_PROPORTION = 0.1
LOG_EVERY = 20


def batch_rows(num_examples: int, batch_size: int, num_steps: int, seed: int) -> np.ndarray:
    """int64 [num_steps, batch_size]: the rows of each step, a fresh permutation every epoch,
    batches running on into the next epoch as this project's training data does."""
    rng = np.random.default_rng(seed)
    epochs = math.ceil(num_steps * batch_size / num_examples)
    rows = np.concatenate([rng.permutation(num_examples) for _ in range(epochs)])
    return rows[:num_steps * batch_size].reshape(num_steps, batch_size).astype(np.int64)


def train_ours(hf_dir: str, task, head: tuple[np.ndarray, np.ndarray],
               train: dict[str, np.ndarray], rows: np.ndarray, learning_rate: float,
               work_dir: str, warmup_proportion: float = WARMUP_PROPORTION):
    """This project's fine-tuning of `hf_dir` for the GLUE task `task` on `train`, in the order
    `rows`, no dropout; its training loop writes into `work_dir`.

    Returns (model, training loss of every step).
    """
    import tensorflow as tf
    from modeling import checkpoints
    from modeling.checkpoints.hf.config import bert_config_from_hf
    from tasks.classifier import Settings, Splits, fine_tuning_task
    from running.batching import ArrayExamples
    from training.fine_tuning import warmup_steps
    from training.optimizer import create_optimizer
    from training.step_log import STEP_LOG_FILE
    from training.trainer import Trainer, TrainingConfig

    with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
        config = dataclasses.replace(bert_config_from_hf(json.load(f)), hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0)
    fine_tuned = fine_tuning_task(config, Settings(work_dir, 128, True, task=task),
                                  Splits(task, {}))
    num_steps, batch_size = rows.shape
    strategy = tf.distribute.get_strategy()
    with strategy.scope():
        model = fine_tuned.build_model()
        model.dropout.rate = 0.0
        checkpoints.load_checkpoint(model.encoder, hf_dir)
        model.head.output_weights.assign(head[0])
        model.head.output_bias.assign(head[1])
        optimizer = create_optimizer(
            learning_rate, num_steps, warmup_steps(num_steps, warmup_proportion),
            optimizer_type="adamw_bias_corrected", epsilon=EPSILON, decay_from_peak=True)
    gather = ArrayExamples(train).gather_fn()

    def dataset_fn(context):
        order = tf.data.Dataset.from_tensor_slices(rows)
        return order.map(gather).repeat()
    trainer = Trainer(strategy, model, optimizer, fine_tuned.loss_fn,
                      TrainingConfig(num_steps, work_dir, save_checkpoints_steps=num_steps,
                                     log_steps=LOG_EVERY, jit_compile=None))
    trainer.train(dataset_fn, batch_size)
    with open(os.path.join(work_dir, STEP_LOG_FILE), encoding="utf-8") as f:
        losses = [json.loads(line)["loss"] for line in f]
    return model, np.asarray(losses, np.float64)


def train_theirs(hf_dir: str, head: tuple[np.ndarray, np.ndarray], train: dict[str, np.ndarray],
                 rows: np.ndarray, learning_rate: float, matched_epsilon: bool,
                 warmup_proportion: float = WARMUP_PROPORTION):
    """transformers' fine-tuning of `hf_dir` on the same rows, no dropout; with
    `matched_epsilon`, PyTorch's epsilon at step t is `EPSILON / sqrt(1 - b2^t)`.

    Returns (model, training loss of every step).
    """
    import torch
    import transformers
    from bench.fine_tuning.transformers_run import adamw_and_schedule, torch_inputs, train_step

    model = transformers.BertForSequenceClassification.from_pretrained(
        hf_dir, num_labels=len(head[1]), hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, classifier_dropout=0.0)
    with torch.no_grad():
        model.classifier.weight.copy_(torch.from_numpy(head[0]))
        model.classifier.bias.copy_(torch.from_numpy(head[1]))
    num_steps = len(rows)
    optimizer, scheduler = adamw_and_schedule(model, learning_rate, warmup_proportion, num_steps)
    inputs = torch_inputs(train)
    model.train()
    losses, start = [], time.perf_counter()
    for step, index in enumerate(rows, start=1):
        if matched_epsilon:
            for group in optimizer.param_groups:
                group["eps"] = EPSILON / math.sqrt(1 - BETA_2 ** step)
        losses.append(train_step(model, {k: v[torch.from_numpy(index)] for k, v in inputs.items()},
                                 optimizer, scheduler))
        if step % LOG_EVERY == 0 or step == num_steps:
            log(f"  transformers step {step}/{num_steps}: loss {losses[-1]:.4f}, "
                f"{time.perf_counter() - start:.0f} s")
    return model, np.asarray(losses, np.float64)


def logits_ours(model, arrays: dict[str, np.ndarray]) -> np.ndarray:
    from training.fine_tuning import predict
    return predict(model, arrays, 64)["logits"]


def logits_theirs(model, arrays: dict[str, np.ndarray]) -> np.ndarray:
    from bench.fine_tuning.transformers_run import model_outputs, torch_inputs
    return model_outputs(model, torch_inputs(arrays), 64, "max_length")["logits"]


def compare(losses: dict[str, np.ndarray], logits: dict[str, np.ndarray],
            labels: np.ndarray) -> dict:
    """Each transformers side against this project's: loss gaps and dev predictions."""
    ours = "this_project"
    result = {"accuracy": {side: float(np.mean(np.argmax(value, -1) == labels))
                           for side, value in logits.items()},
              "final_loss": {side: float(value[-1]) for side, value in losses.items()}}
    for side in (s for s in losses if s != ours):
        gap = np.abs(losses[side] - losses[ours])
        apart = np.flatnonzero(gap > 1e-3)
        result[side] = {
            "max_loss_gap": float(gap.max()),
            "first_step_loss_gap_over_1e-3": int(apart[0]) + 1 if len(apart) else None,
            "max_dev_logit_gap": float(np.abs(logits[side] - logits[ours]).max()),
            "dev_predictions_that_differ": int(np.sum(
                np.argmax(logits[side], -1) != np.argmax(logits[ours], -1)))}
    return result


def report_markdown(results: dict) -> str:
    setup = results["setup"]
    names = {"this_project": "this project", "transformers_matched_epsilon":
             "transformers, epsilon matched", "transformers": "transformers, PyTorch's epsilon"}
    comparison = results["comparison"]
    lines = ["# Fine-tuning in lockstep with transformers", "",
             f"{setup['model']}, {setup['task']}, {setup['train_examples']} training examples, "
             f"{setup['dev_examples']} dev, max_seq_length {setup['max_seq_length']}, batch "
             f"{setup['batch_size']}, {setup['steps']} steps, learning rate "
             f"{setup['learning_rate']}, 10% warm-up then linear decay from the peak; dropout "
             "off, one classifier head, the same batches in the same order. Command: "
             f"`{setup['command']}`. Machine: {setup['machine']}.", "",
             "| side | final training loss | dev accuracy | largest training-loss gap to this "
             "project | first step apart by 1e-3 | largest dev logit gap | dev predictions that "
             "differ |", "|---|---|---|---|---|---|---|"]
    for side, name in names.items():
        row = comparison.get(side, {})
        first = row.get("first_step_loss_gap_over_1e-3", "")
        cells = [name, f"{comparison['final_loss'][side]:.4f}",
                 f"{100 * comparison['accuracy'][side]:.1f}",
                 f"{row['max_loss_gap']:.2e}" if row else "",
                 "never" if row and first is None else str(first or ""),
                 f"{row['max_dev_logit_gap']:.2e}" if row else "",
                 str(row.get("dev_predictions_that_differ", ""))]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines)


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    flags.DEFINE_string("work_dir", "/tmp/bert_finetune_bench",
                        "The model and RTE's data, as the fine-tuning benchmark prepares them.")
    define_shared_data_flag()
    flags.DEFINE_float("learning_rate", 2e-5, "Peak learning rate of both sides.")
    flags.DEFINE_integer("epochs", 3, "Training epochs.")
    flags.DEFINE_integer("seed", 1, "Seeds the batch order and the head.")
    flags.DEFINE_string("output", os.path.join(results_dir("lockstep"), "finetune_lockstep"),
                        "The results' path without its extension (.json, .md).")


def main(argv: list[str]) -> None:
    del argv

    from bench.fine_tuning.runs import TRAIN_BATCH_SIZE, hf_model_dir, prepare_data
    from data import tokenization
    from data.classifier import glue_tasks
    from tasks.classifier import Settings, read_splits

    hf_dir = hf_model_dir()
    data_dir = prepare_data(FLAGS.shared_data, FLAGS.work_dir)["rte"]
    task = glue_tasks.get_task("rte")
    tokenizer = tokenization.FullTokenizer(os.path.join(hf_dir, "vocab.txt"), do_lower_case=True)
    splits = read_splits(Settings(FLAGS.work_dir, 128, True, task=task, data_dir=data_dir),
                         ("train", "eval"), tokenizer)
    train, dev = splits.by_name["train"].arrays, splits.by_name["dev"].arrays
    num_examples = len(train["label_ids"])
    num_steps = int(num_examples / TRAIN_BATCH_SIZE * FLAGS.epochs)
    rows = batch_rows(num_examples, TRAIN_BATCH_SIZE, num_steps, FLAGS.seed)
    rng = np.random.default_rng(FLAGS.seed)
    with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
        hidden = json.load(f)["hidden_size"]
    head = (rng.normal(0.0, 0.02, (task.num_labels, hidden)).astype(np.float32),
            np.zeros(task.num_labels, np.float32))

    losses, logits = {}, {}
    with tempfile.TemporaryDirectory() as run_dir:
        log(f"this project: {num_steps} steps")
        model, losses["this_project"] = train_ours(hf_dir, task, head, train, rows,
                                                   FLAGS.learning_rate, run_dir)
        logits["this_project"] = logits_ours(model, dev)
    for side, matched in (("transformers_matched_epsilon", True), ("transformers", False)):
        log(f"{side}: {num_steps} steps")
        model, losses[side] = train_theirs(hf_dir, head, train, rows, FLAGS.learning_rate, matched)
        logits[side] = logits_theirs(model, dev)
    comparison = compare(losses, logits, dev["label_ids"])
    results = {
        "setup": {"model": "all-MiniLM-L6-v2", "task": "RTE", "train_examples": num_examples,
                  "dev_examples": len(dev["label_ids"]), "max_seq_length": 128,
                  "batch_size": TRAIN_BATCH_SIZE, "steps": num_steps,
                  "learning_rate": FLAGS.learning_rate, "seed": FLAGS.seed,
                  "command": "python -m bench.fine_tuning.lockstep " + " ".join(sys.argv[1:]),
                  "machine": machine_label(machine_description())},
        "comparison": comparison,
        "losses": {side: value.tolist() for side, value in losses.items()}}
    write_report(FLAGS.output, results, report_markdown(results))
    log(f"report: {FLAGS.output}.md")
    print(report_markdown(results))


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
