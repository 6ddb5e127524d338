"""What every fine-tuning script shares: the recipe (`prepare`, `fine_tune`), in-memory datasets,
training by epochs, batched prediction, and writing the fine-tuned model in both formats.

The recipe: in the strategy's scope, build the task model and its optimizer; unless the run
resumes from a training checkpoint in its output folder (`training.checkpointing.resumes`),
initialise the encoder from `--init_checkpoint`; train to the last step; the chief writes the
fine-tuned model.
"""
from __future__ import annotations

import json
import math
import os
from typing import Callable, NamedTuple
import weakref

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from modeling.checkpoints.errors import CheckpointMismatchError
from modeling.checkpoints.folders import SPEC_FILE
from modeling.checkpoints.formats import checkpoint_step, load_checkpoint
from modeling.checkpoints.heads import model_spec
from modeling.checkpoints.tf1 import save_tf1_checkpoint
from training.checkpointing import resumes
from training.trainer import LossFn, Trainer, TrainingConfig
from training.xla_choice import prefers_xla
from utils.output_files import write_text_atomically


def array_dataset(arrays: dict[str, np.ndarray], batch_size: int) -> tf.data.Dataset:
    """Batches of a dict of equal-length arrays, in order, the last batch smaller (evaluation)."""
    dataset = tf.data.Dataset.from_tensor_slices(arrays)
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def train_steps(num_examples: int, batch_size: int, num_epochs: float) -> int:
    """The original's step count: int(examples / batch * epochs), at least 1."""
    return max(1, int(num_examples / batch_size * num_epochs))


def initialise_encoder(model: keras.Model, init_checkpoint: str | None) -> None:
    """Loads the encoder strictly from a pretrained checkpoint (its heads, if any, are unused)."""
    if init_checkpoint:
        found = load_checkpoint(model.encoder, init_checkpoint)
        logging.info("encoder initialised from %s (%s)", init_checkpoint, found)
    else:
        logging.warning("no --init_checkpoint: the encoder starts from random values")


class Prepared(NamedTuple):
    """A task model and its optimizer, built in a strategy's scope and ready to train."""

    model: keras.Model
    optimizer: keras.optimizers.Optimizer
    resuming: bool  # the output folder holds a training checkpoint to continue from


def prepare(strategy: tf.distribute.Strategy, build_model: Callable[[], keras.Model],
            build_optimizer: Callable[[], keras.optimizers.Optimizer],
            init_checkpoint: str | None, output_dir: str) -> Prepared:
    """The recipe's first half: the model and optimizer in `strategy`'s scope, the encoder
    initialised from `init_checkpoint` unless the run resumes in `output_dir`."""
    with strategy.scope():
        model = build_model()
        optimizer = build_optimizer()
        resuming = resumes(output_dir)
        if not resuming:
            initialise_encoder(model, init_checkpoint)
    return Prepared(model, optimizer, resuming)


def fine_tune(strategy: tf.distribute.Strategy, build_model: Callable[[], keras.Model],
              build_optimizer: Callable[[], keras.optimizers.Optimizer], loss_fn: LossFn,
              arrays: dict[str, np.ndarray], batch_size: int, config: TrainingConfig, seed: int,
              init_checkpoint: str | None, save: bool) -> keras.Model:
    """The whole recipe: `prepare`, `fit` to `config.num_train_steps`, and, when `save` (the
    chief), `save_fine_tuned` in `config.output_dir`. Returns the trained model."""
    prepared = prepare(strategy, build_model, build_optimizer, init_checkpoint, config.output_dir)
    fit(strategy, prepared.model, prepared.optimizer, loss_fn, arrays, batch_size, config, seed)
    if save:
        save_fine_tuned(prepared.model, config.output_dir, config.num_train_steps)
    return prepared.model


def restore_fine_tuned(model: keras.Model, init_checkpoint: str | None, output_dir: str,
                       needs: str) -> int:
    """Loads a fine-tuned model, head included, strictly, to evaluate or predict without training.

    `init_checkpoint` is used when it holds such a model; otherwise (not given, or a pretrained
    checkpoint without the head, as in the original's reruns) the model fine-tuned in `output_dir`.

    Args:
        model: the task model.
        init_checkpoint: `--init_checkpoint`, or None.
        output_dir: the run's output folder.
        needs: what the head must be, for the error message (e.g. "cls/squad/output_weights").

    Returns:
        The training step of the checkpoint loaded.
    """
    error = None
    for path in filter(None, (init_checkpoint, output_dir)):
        try:
            found = load_checkpoint(model, path)
        except (CheckpointMismatchError, FileNotFoundError, ValueError) as failure:
            error = error or failure
            continue
        logging.info("using the fine-tuned model of %s (%s)", path, found)
        return checkpoint_step(path)
    raise type(error)(f"{error}\nWithout --do_train, --init_checkpoint or --output_dir must hold "
                      f"a fine-tuned model ({needs}), not a pretrained checkpoint") from None


def fit(strategy: tf.distribute.Strategy, model: keras.Model,
        optimizer: keras.optimizers.Optimizer, loss_fn: LossFn, arrays: dict[str, np.ndarray],
        batch_size: int, config: TrainingConfig, seed: int) -> dict:
    """Trains on in-memory features for `config.num_train_steps` global batches of `batch_size`,
    reshuffled every epoch with `seed`; resumable."""
    micro_batch = batch_size // config.gradient_accumulation_steps

    num_examples = len(next(iter(arrays.values())))

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        # Shuffled indices, not examples: the iterator state saved in checkpoints stays small.
        # Shard before batching: each replica takes every n-th example of the same shuffle.
        tensors = {k: tf.constant(v) for k, v in arrays.items()}
        dataset = tf.data.Dataset.range(num_examples).shuffle(num_examples, seed=seed).repeat()
        dataset = dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
        dataset = dataset.batch(context.get_per_replica_batch_size(micro_batch),
                                drop_remainder=True)
        dataset = dataset.map(lambda index: {k: tf.gather(v, index) for k, v in tensors.items()})
        return dataset.prefetch(tf.data.AUTOTUNE)

    return fit_dataset(strategy, model, optimizer, loss_fn, dataset_fn, batch_size, config)


def fit_dataset(strategy: tf.distribute.Strategy, model: keras.Model,
                optimizer: keras.optimizers.Optimizer, loss_fn: LossFn,
                dataset_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset],
                batch_size: int, config: TrainingConfig) -> dict:
    """Trains for `config.num_train_steps` global batches of `batch_size` on the micro-batches of
    `dataset_fn` (an infinite, deterministic dataset per input context); resumable."""
    return Trainer(strategy, model, optimizer, loss_fn, config).train(dataset_fn, batch_size)


def predict(model: keras.Model, arrays: dict[str, np.ndarray], batch_size: int,
            input_keys: tuple[str, ...] = ("input_ids", "input_mask", "segment_ids"),
            output_fn: Callable[[dict], dict] | None = None) -> dict[str, np.ndarray]:
    """Runs the model (training=False) over all examples in order; returns stacked outputs."""
    inputs = {k: arrays[k] for k in input_keys}
    config = getattr(model, "config", None)  # BERT's task models; others run as a graph
    jit_compile = config is not None and prefers_xla(
        model.compute_dtype, batch_size * int(np.prod(inputs[input_keys[0]].shape[1:])),
        config.hidden_size, forward_only=True)
    run = _inference_function(model, jit_compile)
    collected: dict[str, list[np.ndarray]] = {}
    for batch in array_dataset(inputs, batch_size):
        outputs = run(batch)
        outputs = output_fn(outputs) if output_fn else outputs
        for key, value in outputs.items():
            if isinstance(value, tf.Tensor):
                collected.setdefault(key, []).append(value.numpy())
    return {key: np.concatenate(values) for key, values in collected.items()}


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


def save_fine_tuned(model: keras.Model, output_dir: str, global_step: int) -> str:
    """Writes `model.ckpt` in the original TF1 format, `bert_config.json` and `model_spec.json`.

    The training checkpoints (`ckpt-N`, project format) stay beside them for resumption;
    `model_spec.json` names their head, so `convert_checkpoint.py` can rebuild the model from them.
    """
    prefix = save_tf1_checkpoint(model, os.path.join(output_dir, "model.ckpt"),
                                 global_step=global_step, update_state_file=False)
    model.config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    write_text_atomically(os.path.join(output_dir, SPEC_FILE),
                          json.dumps(model_spec(model).to_dict(), indent=2, sort_keys=True) + "\n")
    logging.info("fine-tuned model written to %s (original format)", prefix)
    return prefix


def write_eval_summaries(folder: str, global_step: int, results: dict) -> None:
    """TensorBoard scalars of an evaluation in `folder` (`output_dir/eval`, the original's eval
    folder, beside the training curves of `output_dir/train`)."""
    writer = tf.summary.create_file_writer(folder)
    with writer.as_default(step=global_step):
        for key, value in results.items():
            if key != "global_step":
                tf.summary.scalar(key, float(value))
    writer.flush()


def warmup_steps(num_train_steps: int, warmup_proportion: float) -> int:
    return int(math.floor(num_train_steps * warmup_proportion))
