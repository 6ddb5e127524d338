"""How a task's examples become batches: shuffled for training, in order for prediction.

Every fine-tuning task holds its features in memory, as rows numbered 0..N-1 (`IndexedExamples`).
Batches are made the same way for all of them: the row numbers are shuffled (training) or taken in
order (prediction) and batched in the graph, then each batch of numbers is gathered into tensors by
the examples themselves (`gather_fn`). The iterator state a training checkpoint saves is therefore
a position in a stream of row numbers, small whatever the features are.
"""
from __future__ import annotations

import abc
from typing import Callable, Mapping

import numpy as np
import tensorflow as tf

DatasetFn = Callable[[tf.distribute.InputContext], tf.data.Dataset]


class IndexedExamples(abc.ABC):
    """Features of `num_examples` rows, gathered into a batch by row numbers."""

    num_examples: int

    @abc.abstractmethod
    def gather_fn(self) -> Callable[[tf.Tensor], dict[str, tf.Tensor]]:
        """A function from int64 [B] row numbers to the batch's tensors, for `Dataset.map`.

        Called once per dataset, in the context that builds it (tensors it creates, such as
        constants of the features, belong to that dataset).
        """

    def training_dataset_fn(self, micro_batch: int, seed: int) -> DatasetFn:
        """An infinite dataset of micro-batches of `micro_batch` (global) rows, reshuffled every
        epoch with `seed`, per input context of a `tf.distribute` strategy.

        Each replica takes every n-th row of the same shuffle (shard before batching), so the
        replicas together see exactly the batches one device would.
        """
        def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
            gather = self.gather_fn()
            dataset = tf.data.Dataset.range(self.num_examples)
            dataset = dataset.shuffle(self.num_examples, seed=seed).repeat()
            dataset = dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
            dataset = dataset.batch(context.get_per_replica_batch_size(micro_batch),
                                    drop_remainder=True)
            return _with_options(dataset.map(gather)).prefetch(tf.data.AUTOTUNE)
        return dataset_fn

    def prediction_dataset(self, batch_size: int) -> tf.data.Dataset:
        """Every row once, in order, in batches of `batch_size` (the last one smaller)."""
        dataset = tf.data.Dataset.range(self.num_examples).batch(batch_size)
        return _with_options(dataset.map(self.gather_fn())).prefetch(tf.data.AUTOTUNE)


def _with_options(dataset: tf.data.Dataset) -> tf.data.Dataset:
    options = tf.data.Options()
    # A gather reads fixed features (memory or files): a saved iterator position is all there
    # is to restore.
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    return dataset.with_options(options)


class ArrayExamples(IndexedExamples):
    """Features as a dict of equal-length numpy arrays (the first axis is the row).

    Args:
        arrays: e.g. int32 [N, T] `input_ids`, `input_mask`, `segment_ids` and int32 [N]
            `label_ids`.
        keys: the arrays to batch (default: all of them), e.g. only the model's inputs.
    """

    def __init__(self, arrays: Mapping[str, np.ndarray], keys: tuple[str, ...] | None = None):
        self.arrays = {key: arrays[key] for key in (keys or tuple(arrays))}
        lengths = {key: len(value) for key, value in self.arrays.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"arrays of different lengths: {lengths}")
        self.num_examples = next(iter(lengths.values()))

    def gather_fn(self) -> Callable[[tf.Tensor], dict[str, tf.Tensor]]:
        tensors = {key: tf.constant(value) for key, value in self.arrays.items()}
        return lambda rows: {key: tf.gather(value, rows) for key, value in tensors.items()}

    @property
    def row_shape(self) -> tuple[int, ...]:
        """The shape of one row of the first array (e.g. (T,) for input_ids)."""
        return next(iter(self.arrays.values())).shape[1:]


class HostExamples(IndexedExamples):
    """Features gathered on the host by a Python function, e.g. from memory-mapped files.

    Args:
        num_examples: rows 0..N-1.
        batch_fn: `batch_fn(rows: list[int]) -> {name: numpy array}`, the rows' batch; it may pad
            to the batch's own width.
        signature: {name: (dtype, shape of one row)}, numpy or TensorFlow dtypes; None for a
            dimension that varies from batch to batch (so that a training step is traced once).
    """

    def __init__(self, num_examples: int, batch_fn: Callable[[list[int]], dict],
                 signature: Mapping[str, tuple[object, tuple[int | None, ...]]]):
        self.num_examples = num_examples
        self.batch_fn = batch_fn
        self.signature = {name: (tf.as_dtype(dtype), tuple(shape))
                          for name, (dtype, shape) in signature.items()}

    def gather_fn(self) -> Callable[[tf.Tensor], dict[str, tf.Tensor]]:
        names = list(self.signature)

        def gather(rows: np.ndarray) -> list[np.ndarray]:
            batch = self.batch_fn(rows.tolist())
            return [batch[name] for name in names]

        def to_batch(rows: tf.Tensor) -> dict[str, tf.Tensor]:
            values = tf.numpy_function(gather, [rows], [self.signature[n][0] for n in names],
                                       stateful=False)
            for value, name in zip(values, names):
                value.set_shape([rows.shape[0], *self.signature[name][1]])
            return dict(zip(names, values))
        return to_batch
