"""Running a trained model over every example in order: batched by length, traced once per model.

Rows of similar lengths are run together, so that each batch is cut to little more than its own
longest sequence (`running.batching.Batching`), and their outputs are put back in the input's
order. Every output axis of the batch's length (a per-token output) is padded back with zeros to
the features' full width, so that callers see the shapes of fixed padding whatever the batches
were.
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator
import weakref

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from running.batching import ArrayExamples, IndexedExamples
from running.xla_choice import prefers_xla

# output_fn(model_outputs, batch) -> the outputs to keep, e.g. the logits of real words only.
OutputFn = Callable[[dict, dict], dict]

# Batches sorted by length together when outputs are streamed (`predict_batches`): the outputs of
# this many batches are held at once.
STREAM_WINDOW = 8


def predict_batches(model: keras.Model, examples: IndexedExamples, batch_size: int,
                    output_fn: OutputFn | None = None,
                    window: int | None = STREAM_WINDOW) -> Iterator[dict[str, np.ndarray]]:
    """Yields the model's outputs (training=False) for the rows of `examples`, in their order.

    Where the examples have lengths, each window of `window` batches' rows (None: all rows) is
    run sorted by length and put back in order; each yield holds the outputs of one window's
    consecutive rows. Otherwise each yield is one batch, in order.

    Args:
        model: a task model, or any Keras model taking the examples' batches.
        examples: the rows to run over; every array they batch is given to the model.
        batch_size: rows per call (the last batch may be smaller).
        output_fn: picks or reshapes the outputs to keep (default: every tensor output); where
            rows are sorted it must keep one output row per input row.
        window: batches sorted together.
    """
    xla = _prefers_xla(model, examples, batch_size)
    width = getattr(examples, "max_length", None)
    if examples.lengths is None or examples.batching.pad_to_max_length:
        batches, spec = _batches(examples, batch_size, None, xla)
        function, run = _traced(model, xla, width, spec)
        for batch, rows in batches:
            yield _outputs(run, batch, rows, output_fn)
        _log_traces(model, function, examples.num_examples, None)
        return
    rows_per_window = examples.num_examples if window is None else window * batch_size
    starts = range(0, examples.num_examples, max(rows_per_window, 1))
    order = np.concatenate([start + np.argsort(examples.lengths[start:start + rows_per_window],
                                               kind="stable") for start in starts]
                           or [np.zeros(0, np.int64)])
    batches, spec = _batches(examples, batch_size, order, xla)
    function, run = _traced(model, xla, width, spec)
    pending: list[dict[str, np.ndarray]] = []
    done = start = 0
    widths: set[int] = set()
    for batch, rows in batches:
        widths.add(int(batch[next(iter(batch))].shape[-1]))
        pending.append(_outputs(run, batch, rows, output_fn))
        done += rows
        if done - start == rows_per_window or done == examples.num_examples:
            inverse = np.argsort(order[start:done], kind="stable")
            yield {key: np.concatenate([outputs[key] for outputs in pending])[inverse]
                   for key in pending[0]}
            pending, start = [], done
    _log_traces(model, function, examples.num_examples, widths)


def predict(model: keras.Model, examples: IndexedExamples, batch_size: int,
            output_fn: OutputFn | None = None) -> dict[str, np.ndarray]:
    """`predict_batches` over all rows at once, each output concatenated over the batches."""
    collected: dict[str, list[np.ndarray]] = {}
    for outputs in predict_batches(model, examples, batch_size, output_fn, window=None):
        for key, value in outputs.items():
            collected.setdefault(key, []).append(value)
    return {key: np.concatenate(values) for key, values in collected.items()}


def _batches(examples: IndexedExamples, batch_size: int, order: np.ndarray | None,
             xla: bool) -> tuple[Iterable[tuple[dict, int]], dict[str, tf.TensorSpec]]:
    """(batch, its number of rows) for the rows in `order` (None: in order), and the batches'
    spec. In-memory features are cut into batches on the host: an input pipeline gains nothing
    over numpy slices there, and on 2 cores its threads could halve the model's speed from one
    call to the next. Under XLA, which compiles each shape anew, such a batch's rows are padded
    with rows of zeros (no real token) to a power of two, at most `batch_size`: calls of any
    number of rows then compile at most log2(batch_size) + 1 row counts of each length."""
    if not isinstance(examples, ArrayExamples):
        dataset = examples.prediction_dataset(batch_size, rows=order, xla=xla)
        return ((batch, int(batch[next(iter(batch))].shape[0])) for batch in dataset), \
            dataset.element_spec
    rows = np.arange(examples.num_examples) if order is None else order

    def batch(start):
        chunk = rows[start:start + batch_size]
        found = examples.host_batch(chunk, xla)
        if xla and len(chunk) & (len(chunk) - 1):
            padded = min(1 << len(chunk).bit_length(), batch_size)
            found = {key: np.concatenate([value, np.zeros((padded - len(chunk),
                                                           *value.shape[1:]), value.dtype)])
                     for key, value in found.items()}
        return found, len(chunk)
    return (batch(start) for start in range(0, len(rows), batch_size)), examples.batch_spec()


def traces(model: keras.Model) -> int:
    """How many times prediction has traced `model` (over every XLA choice and width)."""
    return sum(function.experimental_get_tracing_count()
               for function, _ in _inference_functions.get(model, {}).values())


def _outputs(run, batch: dict, rows: int, output_fn: OutputFn | None) -> dict[str, np.ndarray]:
    """The outputs of the batch's first `rows` rows; rows after them are padding, which
    `output_fn` does not see."""
    outputs = run(batch)
    if rows < len(next(iter(batch.values()))):
        outputs = {key: value[:rows] if isinstance(value, tf.Tensor) else value
                   for key, value in outputs.items()}
        batch = {key: value[:rows] for key, value in batch.items()}
    outputs = output_fn(outputs, batch) if output_fn else outputs
    return {key: value.numpy() for key, value in outputs.items() if isinstance(value, tf.Tensor)}


def _log_traces(model: keras.Model, run, num_rows: int, widths: set[int] | None) -> None:
    lengths = "" if widths is None else f", padded to lengths {sorted(widths)}"
    logging.info("predicted %d rows%s; %s traced %d time(s)", num_rows, lengths, model.name,
                 run.experimental_get_tracing_count())


def _prefers_xla(model: keras.Model, examples: IndexedExamples, batch_size: int) -> bool:
    """The XLA rule for BERT's task models (they carry a config), for the size of the largest
    call these examples make (a few short texts are a small call whatever `batch_size` is) and
    the work of them all (too little pays no compilation); other models run as a graph."""
    config = getattr(model, "config", None)
    if config is None or not isinstance(examples, ArrayExamples):
        return False
    return prefers_xla(model.compute_dtype, examples.largest_batch_tokens(batch_size),
                       config.hidden_size, forward_only=True,
                       total_work=examples.total_tokens() * config.hidden_size ** 2
                       * config.num_hidden_layers)


# One compiled inference function per model, XLA choice and output width, with its traces by
# batch spec, so that repeated evaluations reuse them.
_inference_functions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _traced(model: keras.Model, jit_compile: bool, width: int | None, spec
            ) -> tuple[tf.types.experimental.PolymorphicFunction,
                       tf.types.experimental.ConcreteFunction]:
    """`model(batch, training=False)` as a tf.function, and its trace for the batches' spec,
    kept, and called directly: a tf.function's own dispatch and the trace's lookup would add
    about a millisecond to each call, a tenth of a short text's.

    The spec leaves the batch size (and, with batches cut to their length, the length) unknown,
    so one trace serves every batch; XLA compiles it once per shape. Output axes of unknown size
    after the first (the length) are padded back to `width`.
    """
    functions = _inference_functions.setdefault(model, {})
    if (jit_compile, width) not in functions:
        model_ref = weakref.ref(model)  # the function must not keep the model alive

        def run(batch):
            outputs = model_ref()(batch, training=False)
            return outputs if width is None else tf.nest.map_structure(
                lambda value: _pad_unknown_axes(value, width), outputs)
        functions[jit_compile, width] = tf.function(run, jit_compile=jit_compile,
                                                    autograph=False), {}
    function, traces_by_spec = functions[jit_compile, width]
    key = tuple(sorted(spec.items()))
    if key not in traces_by_spec:
        traces_by_spec[key] = function.get_concrete_function(spec)
    return function, traces_by_spec[key]


def _pad_unknown_axes(value: tf.Tensor, width: int) -> tf.Tensor:
    unknown = [axis for axis in range(1, value.shape.rank or 0) if value.shape[axis] is None]
    if not unknown:
        return value
    shape = tf.shape(value)
    paddings = [[0, width - shape[axis]] if axis in unknown else [0, 0]
                for axis in range(value.shape.rank)]
    padded = tf.pad(value, paddings)
    return tf.ensure_shape(padded, [width if axis in unknown else size
                                    for axis, size in enumerate(value.shape)])
