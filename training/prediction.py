"""Running a trained model over every example in order: batched, traced once per model."""
from __future__ import annotations

from typing import Callable, Iterator
import weakref

import keras
import numpy as np
import tensorflow as tf

from training.batching import ArrayExamples, IndexedExamples
from training.xla_choice import prefers_xla

# output_fn(model_outputs, batch) -> the outputs to keep, e.g. the logits of real words only.
OutputFn = Callable[[dict, dict], dict]


def predict_batches(model: keras.Model, examples: IndexedExamples, batch_size: int,
                    output_fn: OutputFn | None = None) -> Iterator[dict[str, np.ndarray]]:
    """Yields the model's outputs (training=False) for each batch of `examples`, in order.

    Args:
        model: a task model, or any Keras model taking the examples' batches.
        examples: the rows to run over; every array they batch is given to the model.
        batch_size: rows per call (the last batch may be smaller).
        output_fn: picks or reshapes the outputs to keep (default: every tensor output).
    """
    run = _inference_function(model, _prefers_xla(model, examples, batch_size))
    for batch in examples.prediction_dataset(batch_size):
        outputs = run(batch)
        outputs = output_fn(outputs, batch) if output_fn else outputs
        yield {key: value.numpy() for key, value in outputs.items()
               if isinstance(value, tf.Tensor)}


def predict(model: keras.Model, examples: IndexedExamples, batch_size: int,
            output_fn: OutputFn | None = None) -> dict[str, np.ndarray]:
    """`predict_batches`, each output concatenated over the batches."""
    collected: dict[str, list[np.ndarray]] = {}
    for outputs in predict_batches(model, examples, batch_size, output_fn):
        for key, value in outputs.items():
            collected.setdefault(key, []).append(value)
    return {key: np.concatenate(values) for key, values in collected.items()}


def _prefers_xla(model: keras.Model, examples: IndexedExamples, batch_size: int) -> bool:
    """The XLA rule for BERT's task models (they carry a config); other models run as a graph."""
    config = getattr(model, "config", None)
    if config is None or not isinstance(examples, ArrayExamples):
        return False
    tokens = batch_size * int(np.prod(examples.row_shape))
    return prefers_xla(model.compute_dtype, tokens, config.hidden_size, forward_only=True)


# One compiled inference function per model (and XLA choice), so that repeated evaluations reuse
# its traces.
_inference_functions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _inference_function(model: keras.Model, jit_compile: bool) -> Callable[[dict], dict]:
    """`model(batch, training=False)` as a tf.function traced once per input signature.

    The batch dimension is left unknown, so that the last, smaller batch reuses the trace (XLA
    compiles it once more for its shape).
    """
    functions = _inference_functions.setdefault(model, {})
    if jit_compile not in functions:
        model_ref = weakref.ref(model)  # the function must not keep the model alive

        def run(batch):
            return model_ref()(batch, training=False)
        functions[jit_compile] = tf.function(run, reduce_retracing=True, jit_compile=jit_compile)
    return functions[jit_compile]
