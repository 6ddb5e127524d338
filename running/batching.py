"""How a task's examples become batches: shuffled for training, in order for prediction.

Every fine-tuning task holds its features in memory, as rows numbered 0..N-1 (`IndexedExamples`).
Batches are made the same way for all of them: the row numbers are shuffled (training) or taken in
a given order (prediction) and batched in the graph, then each batch of numbers is gathered into
tensors by the examples themselves (`gather_fn`). The iterator state a training checkpoint saves is
therefore a position in a stream of row numbers, small whatever the features are.

The features are stored padded to max_seq_length, as the original writes them; a batch is cut to
its own longest sequence, rounded up to a multiple (`Batching`). The masks make this exact: every
real position's output, and so every loss over real positions, is what the padded batch gives.
"""
from __future__ import annotations

import abc
import dataclasses
from typing import Callable, Mapping

import numpy as np
import tensorflow as tf

from utils.encoder_inputs import INPUT_MASK

DatasetFn = Callable[[tf.distribute.InputContext], tf.data.Dataset]

# Under XLA every padded length is compiled once: the lengths are this many steps of max_length.
XLA_LENGTHS = 8
# ... and below the first of those steps, powers of two from this one.
XLA_SHORTEST = 8
# Rows sorted together for `group_by_length`, in training batches (transformers' mega-batch).
GROUP_BATCHES = 50


@dataclasses.dataclass(frozen=True)
class Batching:
    """How far a batch's token axis is padded, and which rows share a training batch.

    Attributes:
        pad_to_max_length: pad every batch to max_seq_length, the original's fixed shapes.
        multiple: otherwise pad each batch to its longest sequence rounded up to a multiple of
            this (transformers' `pad_to_multiple_of`).
        group_by_length: training batches take rows of similar lengths, as transformers'
            `group_by_length`: the shuffled rows are cut into groups of `GROUP_BATCHES` batches
            (fewer where that leaves under four groups), each sorted by length, longest first.
            This changes which examples share a batch (not which are seen in an epoch).
    """

    pad_to_max_length: bool = False
    multiple: int = 1
    group_by_length: bool = False

    def __post_init__(self):
        if self.multiple < 1:
            raise ValueError(f"the padding multiple must be at least 1, got {self.multiple}")

    def padded_lengths(self, max_length: int, xla: bool = False) -> tuple[int, ...]:
        """The lengths a batch may be padded to, ascending, the last `max_length`.

        Without XLA, every multiple of `multiple`, since one trace serves them all. Under XLA,
        which compiles each shape anew, `XLA_LENGTHS` steps of max_length / XLA_LENGTHS (rounded
        up to the multiple) and, below the first step, powers of two from `XLA_SHORTEST`: a
        short text is not padded to a step (a sentence of 12 tokens to 32 of 256 would take a
        third longer).
        """
        if self.pad_to_max_length:
            return (max_length,)
        if not xla:
            return tuple(range(self.multiple, max_length, self.multiple)) + (max_length,)
        step = _round_up(-(-max_length // XLA_LENGTHS), self.multiple)
        short, power = set(), XLA_SHORTEST
        while power < step:
            short.add(_round_up(power, self.multiple))
            power *= 2
        return tuple(sorted(short - {step})) + tuple(range(step, max_length, step)) + \
            (max_length,)


FIXED = Batching(pad_to_max_length=True)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def sequence_lengths(input_mask: np.ndarray) -> np.ndarray:
    """int32 [N]: one past the last real position of each row (of any of its sequences).

    Args:
        input_mask: [N, ..., T], nonzero at real tokens.
    """
    real = np.asarray(input_mask).reshape(len(input_mask), -1, input_mask.shape[-1]) != 0
    width = real.shape[-1]
    last = np.where(real.any(-1), width - np.argmax(real[..., ::-1], axis=-1), 0)
    return last.max(-1, initial=0).astype(np.int32)


class IndexedExamples(abc.ABC):
    """Features of `num_examples` rows, gathered into a batch by row numbers.

    `lengths`, where the examples have them, are the rows' sequence lengths (int32 [N]):
    prediction takes rows of similar lengths together and `group_by_length` training groups them.
    """

    num_examples: int
    lengths: np.ndarray | None = None
    batching: Batching = FIXED

    @abc.abstractmethod
    def gather_fn(self, xla: bool = False) -> Callable[[tf.Tensor], dict[str, tf.Tensor]]:
        """A function from int64 [B] row numbers to the batch's tensors, for `Dataset.map`.

        Called once per dataset, in the context that builds it (tensors it creates, such as
        constants of the features, belong to that dataset). `xla`: the batches are for a function
        compiled with XLA (`Batching.padded_lengths`).
        """

    def training_dataset_fn(self, micro_batch: int, seed: int, xla: bool = False) -> DatasetFn:
        """An infinite dataset of micro-batches of `micro_batch` (global) rows, reshuffled every
        epoch with `seed`, per input context of a `tf.distribute` strategy.

        Each replica takes every n-th row of the same shuffle (shard before batching), so the
        replicas together see exactly the batches one device would.
        """
        def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
            gather = self.gather_fn(xla)
            batch_size = context.get_per_replica_batch_size(micro_batch)
            dataset = tf.data.Dataset.range(self.num_examples)
            dataset = dataset.shuffle(self.num_examples, seed=seed)
            if self.batching.group_by_length and self.lengths is not None:
                # Each epoch's shuffle grouped on its own, before the replicas take their
                # rows: a group never mixes two epochs, and every replica's rows of a group
                # are sorted too.
                dataset = self._grouped_by_length(dataset, micro_batch)
            dataset = dataset.repeat()
            dataset = dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
            dataset = dataset.batch(batch_size, drop_remainder=True)
            return _with_options(dataset.map(gather)).prefetch(tf.data.AUTOTUNE)
        return dataset_fn

    def _grouped_by_length(self, rows: tf.data.Dataset, batch_size: int) -> tf.data.Dataset:
        """`rows` (one epoch's) in groups of `GROUP_BATCHES` batches of `batch_size`, each
        sorted by length, longest first; the last group holds what is left."""
        batches = min(GROUP_BATCHES, self.num_examples // (4 * batch_size)) or 1
        lengths = tf.constant(self.lengths)

        def longest_first(group):
            return tf.gather(group, tf.argsort(-tf.gather(lengths, group), stable=True))
        return rows.batch(batches * batch_size).map(longest_first).unbatch()

    def prediction_dataset(self, batch_size: int, rows: np.ndarray | None = None,
                           xla: bool = False) -> tf.data.Dataset:
        """Every row once, in order (or in the order of `rows`), in batches of `batch_size` (the
        last one smaller)."""
        rows = tf.data.Dataset.range(self.num_examples) if rows is None else \
            tf.data.Dataset.from_tensor_slices(np.asarray(rows, np.int64))
        dataset = rows.batch(batch_size)
        return _with_options(dataset.map(self.gather_fn(xla))).prefetch(tf.data.AUTOTUNE)


def _with_options(dataset: tf.data.Dataset) -> tf.data.Dataset:
    options = tf.data.Options()
    # A gather reads fixed features (memory or files): a saved iterator position is all there
    # is to restore.
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    return dataset.with_options(options)


class ArrayExamples(IndexedExamples):
    """Features as a dict of equal-length numpy arrays (the first axis is the row).

    Each batch of them is cut to its own padded length (`batching`): every array shaped as
    `input_mask` ([N, ..., T]) is cut on its last axis.

    Args:
        arrays: e.g. int32 [N, T] `input_ids`, `input_mask`, `segment_ids` and int32 [N]
            `label_ids`.
        keys: the arrays to batch (default: all of them), e.g. only the model's inputs.
        batching: how batches are padded and grouped; `FIXED` (the default) pads them to T. Without
            an `input_mask` array every batch keeps its full width.
    """

    def __init__(self, arrays: Mapping[str, np.ndarray], keys: tuple[str, ...] | None = None,
                 batching: Batching = FIXED):
        self.arrays = {key: arrays[key] for key in (keys or tuple(arrays))}
        lengths = {key: len(value) for key, value in self.arrays.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"arrays of different lengths: {lengths}")
        self.num_examples = next(iter(lengths.values()))
        self.batching = batching
        mask = self.arrays.get(INPUT_MASK)
        self.lengths = None if mask is None else sequence_lengths(mask)
        self.max_length = None if mask is None else mask.shape[-1]
        self.token_keys = () if mask is None else tuple(
            key for key, value in self.arrays.items() if value.shape == mask.shape)

    def gather_fn(self, xla: bool = False) -> Callable[[tf.Tensor], dict[str, tf.Tensor]]:
        tensors = {key: tf.constant(value) for key, value in self.arrays.items()}
        if self.lengths is None or self.batching.pad_to_max_length:
            return lambda rows: {key: tf.gather(value, rows) for key, value in tensors.items()}
        lengths = tf.constant(self.lengths)
        padded_lengths = tf.constant(self.batching.padded_lengths(self.max_length, xla))

        def gather(rows):
            longest = tf.reduce_max(tf.gather(lengths, rows))
            width = padded_lengths[tf.searchsorted(padded_lengths, longest[None])[0]]
            return {key: tf.gather(value, rows)[..., :width] if key in self.token_keys
                    else tf.gather(value, rows) for key, value in tensors.items()}
        return gather

    def host_batch(self, rows: np.ndarray, xla: bool = False) -> dict[str, np.ndarray]:
        """The batch of `rows`, cut as `gather_fn` would cut it, made in numpy (prediction
        over in-memory features needs no input pipeline)."""
        batch = {key: value[rows] for key, value in self.arrays.items()}
        if self.lengths is None or self.batching.pad_to_max_length or not len(rows):
            return batch
        width = self._padded_width(int(self.lengths[rows].max()), xla)
        return {key: value[..., :width] if key in self.token_keys else value
                for key, value in batch.items()}

    def _padded_width(self, longest: int, xla: bool = False) -> int:
        """The length a batch whose longest row has `longest` tokens is padded to."""
        padded_lengths = self.batching.padded_lengths(self.max_length, xla)
        return padded_lengths[int(np.searchsorted(padded_lengths, longest))]

    def batch_spec(self) -> dict[str, tf.TensorSpec]:
        """The spec of the batches `gather_fn` makes: any number of rows and, unless batches are
        padded to max_seq_length, any length."""
        cut = self.lengths is not None and not self.batching.pad_to_max_length
        return {key: tf.TensorSpec(
            [None, *value.shape[1:-1], None if cut and key in self.token_keys else
             value.shape[-1]][:value.ndim], tf.as_dtype(value.dtype))
            for key, value in self.arrays.items()}

    def largest_batch_tokens(self, batch_size: int) -> int:
        """Token positions in the largest batch of at most `batch_size` rows that `host_batch`
        makes of these rows: their number times the longest row's padded length (times any
        axes between, e.g. a multiple-choice example's endings)."""
        rows = min(batch_size, self.num_examples)
        if self.max_length is None:
            return rows * int(np.prod(self.row_shape))
        mask = self.arrays[INPUT_MASK]
        width = self._padded_width(int(self.lengths.max())) if self.num_examples else 0
        return rows * int(np.prod(mask.shape[1:-1])) * width

    def total_tokens(self) -> int:
        """Token positions the model runs over for all rows: their real lengths where known (rows
        are batched by length), else their full width."""
        if self.lengths is None or self.batching.pad_to_max_length:
            return self.num_examples * int(np.prod(self.row_shape))
        return int(self.lengths.sum()) * int(np.prod(self.arrays[INPUT_MASK].shape[1:-1]))

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

    def gather_fn(self, xla: bool = False) -> Callable[[tf.Tensor], dict[str, tf.Tensor]]:
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
