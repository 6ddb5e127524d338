"""Evaluation loops: weighted means of per-batch metric sums over a finite dataset."""
from __future__ import annotations

from typing import Callable

import keras
import tensorflow as tf

# metric_sums_fn(outputs, batch) -> {name: (sum of values, sum of weights)}.
MetricSumsFn = Callable[[dict, dict], dict]


def evaluate(model: keras.Model, dataset: tf.data.Dataset, metric_sums_fn: MetricSumsFn,
             loss_fn: Callable[[dict, dict], tf.Tensor] | None = None,
             max_steps: int | None = None) -> dict[str, float]:
    """Runs the model (training=False) over `dataset` and returns each metric's weighted mean.

    `loss`, when `loss_fn` is given, is the mean over batches of the batch loss, as the original's
    Estimator reports it.
    """
    @tf.function(autograph=False)  # as the training step (`Trainer.make_step`)
    def step(batch):
        outputs = model(batch, training=False)
        sums = metric_sums_fn(outputs, batch)
        loss = loss_fn(outputs, batch) if loss_fn is not None else tf.constant(0.0)
        return sums, loss

    totals: dict[str, list[float]] = {}
    loss_total, batches = 0.0, 0
    for batch in dataset.take(max_steps) if max_steps else dataset:
        sums, loss = step(batch)
        for name, (value, weight) in sums.items():
            total = totals.setdefault(name, [0.0, 0.0])
            total[0] += float(value)
            total[1] += float(weight)
        loss_total += float(loss)
        batches += 1
    results = {name: value / weight if weight else 0.0 for name, (value, weight) in totals.items()}
    if loss_fn is not None:
        results["loss"] = loss_total / max(batches, 1)
    return results



def write_eval_summaries(folder: str, global_step: int, results: dict) -> None:
    """TensorBoard scalars of an evaluation in `folder` (`output_dir/eval`, the original's eval
    folder, beside the training curves of `output_dir/train`)."""
    writer = tf.summary.create_file_writer(folder)
    with writer.as_default(step=global_step):
        for key, value in results.items():
            if key != "global_step":
                tf.summary.scalar(key, float(value))
    writer.flush()
