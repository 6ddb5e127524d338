"""Which multiple to round each batch's length up to: the training step's time at every length,
and what each multiple would cost on the GLUE training sets' real batches.

A MiniLM-sized classifier (6 layers, H=384, 12 heads, as the fine-tuning benchmark's model; the
weights do not change the time) takes training steps of 32 sequences at every length from 8 to
128, through the project's `Trainer` step traced once with a dynamic length, as
`run_classifier.py` runs it. Then, for random batches of 32 of each task's training examples
(Google's uncased vocabulary, max_seq_length 128), each candidate multiple m gives the epoch's
time: the sum over batches of the step time at the batch's longest sequence rounded up to m.

    python -m bench.speed.padding_multiple                 # about 5 minutes on 2 cores
    python -m bench.speed.padding_multiple --repeats=5

Prints the table and writes it, with the per-length times, to --output (JSON).
"""
from __future__ import annotations

import os
import time

from absl import flags
import numpy as np

from bench.support import (machine_description, machine_label, results_dir, shared_data_dir,
                           write_json)
from utils import entry_point

FLAGS = flags.FLAGS

MULTIPLES = (1, 4, 8, 16, 32, 128)
# Each task's training folder in ../shared/data/glue (the re-split train where the official one
# is held out).
TASKS = {"CoLA": "CoLA/resplit_from_train", "SST-2": "SST-2/resplit_from_train", "MRPC": "MRPC",
         "STS-B": "STS-B", "RTE": "RTE/resplit_from_train"}
BATCH, MAX_LENGTH = 32, 128


def step_times(lengths: range, repeats: int) -> tuple[dict[int, float], dict]:
    """Median seconds of a training step of BATCH sequences at each length, and the machine."""
    import keras
    import tensorflow as tf

    from modeling import losses
    from modeling.config import BertConfig
    from modeling.models.task_models import BertClassifier
    from training.optimizer import create_optimizer
    from training.trainer import Normaliser

    config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                        num_attention_heads=12, intermediate_size=1536)
    keras.utils.set_random_seed(0)
    model = BertClassifier(config, 2)
    optimizer = create_optimizer(5e-5, 1000, 100)
    optimizer.build(model.trainable_variables)
    spec = {name: tf.TensorSpec([BATCH, None], tf.int32)
            for name in ("input_ids", "input_mask", "segment_ids")}
    spec["label_ids"] = tf.TensorSpec([BATCH], tf.int32)

    @tf.function(input_signature=[spec])
    def step(batch):
        with tf.GradientTape() as tape:
            logits = model(batch, training=True)["logits"]
            loss = losses.mean_cross_entropy(logits, batch["label_ids"],
                                             Normaliser(1).global_batch_size(batch))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(gradients, model.trainable_variables)
        return loss

    rng = np.random.default_rng(0)
    times = {}
    for length in lengths:
        batch = {name: tf.constant(rng.integers(1, 1000, (BATCH, length)), tf.int32)
                 for name in ("input_ids",)}
        batch["input_mask"] = tf.ones([BATCH, length], tf.int32)
        batch["segment_ids"] = tf.zeros([BATCH, length], tf.int32)
        batch["label_ids"] = tf.constant(rng.integers(0, 2, BATCH), tf.int32)
        step(batch)  # the first call at a shape
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            float(step(batch))
            samples.append(time.perf_counter() - start)
        times[length] = float(np.median(samples))
        print(f"length {length}: {times[length] * 1000:.0f} ms a step", flush=True)
    return times, machine_description()


def task_batch_lengths(glue_dir: str, vocab_file: str, seed: int = 1) -> dict[str, np.ndarray]:
    """Each task's random batches of BATCH: the longest WordPiece length of each (<= 128)."""
    from data.classifier import glue_tasks
    from data.classifier.features import example_tokens
    from data.tokenization import FullTokenizer
    tokenizer = FullTokenizer(vocab_file, True)
    found = {}
    for name, path in TASKS.items():
        task = glue_tasks.get_task(name.replace("-", "").lower())
        examples = glue_tasks.read_examples(task, os.path.join(glue_dir, path), "train")
        lengths = np.array([len(example_tokens(e, MAX_LENGTH, tokenizer)[0]) for e in examples])
        order = np.random.default_rng(seed).permutation(len(lengths))
        batches = len(lengths) // BATCH
        found[name] = lengths[order[:batches * BATCH]].reshape(batches, BATCH).max(1)
    return found


def epoch_seconds(batch_lengths: np.ndarray, times: dict[int, float], multiple: int) -> float:
    padded = np.minimum(-(-batch_lengths // multiple) * multiple, MAX_LENGTH)
    return float(sum(times[max(int(length), min(times))] for length in padded))


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    shared = shared_data_dir()
    flags.DEFINE_string("glue_dir", os.path.join(shared, "glue"), "The GLUE tasks' folders.")
    flags.DEFINE_string("vocab_file", os.path.join(shared, "vocab", "uncased_vocab.txt"),
                        "Google's uncased vocabulary.")
    flags.DEFINE_integer("repeats", 3, "Timed steps at each length (their median is kept).")
    flags.DEFINE_string("output", os.path.join(results_dir("padding_multiple"),
                                               "padding_multiple_results.json"),
                        "The table and the per-length times (JSON).")


def main(argv: list[str]) -> None:
    del argv
    batch_lengths = task_batch_lengths(FLAGS.glue_dir, FLAGS.vocab_file)
    times, machine = step_times(range(8, MAX_LENGTH + 1), FLAGS.repeats)
    lines = [machine_label(machine), "",
             "| task | " + " | ".join(f"multiple {m}" for m in MULTIPLES) + " |",
             "|---|" + "---|" * len(MULTIPLES)]
    for name, lengths in batch_lengths.items():
        seconds = [epoch_seconds(lengths, times, m) for m in MULTIPLES]
        lines.append(f"| {name} | " + " | ".join(
            f"{s:.0f} s ({seconds[0] / s:.2f}x)" for s in seconds) + " |")
    table = "\n".join(lines)
    print(table)
    write_json(FLAGS.output, {"machine": machine, "step_seconds": times, "table": table})


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
