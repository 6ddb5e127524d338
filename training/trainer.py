"""The training loop: distributed steps, gradient accumulation, logging, checkpoints, resumption.

Task code supplies a model and a loss function; this module runs them on a `tf.distribute` strategy.
The loss function returns per-replica losses normalised by global counts (see `modeling.losses`), so
that the replicas' gradients, summed by the strategy, are the gradients of the global batch.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal
import time
from typing import Callable, Collection, Iterator

from absl import logging
import keras
import tensorflow as tf

from running.xla_choice import prefers_xla
from training import keras_internals
from training.checkpointing import TrainingCheckpoints
from training.run_guards import StopSignals, TrainingInterrupted, exclusive_output_dir
from training.step_log import STEP_LOG_FILE, StepLog
from utils.progress import format_seconds
from utils.user_errors import UserError

# loss_fn(model_outputs, batch, normaliser) -> dict of float32 scalars with a "loss" key.
LossFn = Callable[[dict, dict, "Normaliser"], dict]


class Normaliser:
    """Global counts for a replica's share of a loss: sums over replicas and micro-batches."""

    def __init__(self, micro_batches: int):
        self.micro_batches = micro_batches

    def global_sum(self, value: tf.Tensor) -> tf.Tensor:
        """The sum of `value` over all replicas, times the number of accumulated micro-batches."""
        value = tf.cast(value, tf.float32)
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            value = context.all_reduce(tf.distribute.ReduceOp.SUM, value)
        return value * self.micro_batches

    def global_batch_size(self, batch: dict) -> tf.Tensor:
        return self.global_sum(tf.shape(next(iter(batch.values())))[0])


def uses_xla(config: "TrainingConfig", model: keras.Model) -> bool:
    """Whether the training step's forward and backward pass is compiled with XLA."""
    if config.jit_compile is None:
        return prefers_xla(model.compute_dtype)
    return config.jit_compile


class NonFiniteLossError(UserError, RuntimeError):
    """The loss became NaN or infinite; no checkpoint was written after it."""


@dataclasses.dataclass
class TrainingConfig:
    num_train_steps: int
    output_dir: str
    save_checkpoints_steps: int = 1000
    # Steps between progress lines and TensorBoard summaries; None: a tenth of the run, at most
    # 100. Every step goes to `train_log.jsonl` whatever this is.
    log_steps: int | None = None
    gradient_accumulation_steps: int = 1
    keep_checkpoints: int = 3
    # Compile the forward and backward pass with XLA (the optimizer update stays outside); None
    # chooses by compute dtype and device (`running.xla_choice.prefers_xla`).
    jit_compile: bool | None = False


def _meta_optimizer_disabled() -> bool:
    return tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer", False)


@contextlib.contextmanager
def _disable_meta_optimizer(disabled: bool):
    """TensorFlow's graph optimizer (Grappler) on or off inside the block, as before after it."""
    before = _meta_optimizer_disabled()
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": disabled})
    try:
        yield
    finally:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": before})


def _graph_options(model: keras.Model):
    """TensorFlow's graph optimizer (Grappler) off while a float32 model trains on CPU.

    Its passes take about a second of the first step, when the step's graph is instantiated
    (MiniLM at 128 tokens: 3.3 against 4.2 s), and made no step slower without them (MiniLM
    on RTE: 1.93-1.97 s a step either way; BERT-Base at 8 x 128: 3.07-3.13 against 2.99-3.22
    s). They are off for the whole loop because a function called under other options is
    instantiated again. GPUs, TPUs and other dtypes keep them (not measured).
    """
    accelerated = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU")
    if accelerated or model.compute_dtype != "float32":
        return contextlib.nullcontext()
    return _disable_meta_optimizer(True)


class Trainer:
    """Trains `model` with `optimizer` on `loss_fn` under `strategy` (all built in its scope)."""

    def __init__(self, strategy: tf.distribute.Strategy, model: keras.Model,
                 optimizer: keras.optimizers.Optimizer, loss_fn: LossFn, config: TrainingConfig,
                 metric_fn: Callable[[dict, dict], dict] | None = None):
        self.strategy = strategy
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.metric_fn = metric_fn
        self.config = config

    def _gradients(self, batch, normaliser):
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            outputs = self.model(batch, training=True)
            logs = self.loss_fn(outputs, batch, normaliser)
            loss = logs["loss"]
            if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
                loss = self.optimizer.scale_loss(loss)
        if self.metric_fn is not None:
            logs = {**logs, **self.metric_fn(outputs, batch)}
        return tape.gradient(loss, variables), logs

    def _replica_step(self, micro_batches):
        normaliser = Normaliser(len(micro_batches))
        gradients_fn = tf.function(self._gradients, jit_compile=True, autograph=False) \
            if uses_xla(self.config, self.model) else self._gradients
        gradients, logs = None, {}
        for batch in micro_batches:
            grads, batch_logs = gradients_fn(batch, normaliser)
            gradients = grads if gradients is None else [
                _add_gradients(a, b) for a, b in zip(gradients, grads)]
            for key, value in batch_logs.items():
                # Losses are already normalised by global counts; metrics are averaged.
                share = 1.0 if key.endswith("loss") else 1.0 / len(micro_batches)
                logs[key] = logs.get(key, 0.0) + value * share
        self.optimizer.apply(gradients, self.model.trainable_variables)
        return logs

    def make_step(self) -> Callable[[Iterator], dict]:
        """The compiled training step: `step(iterator)` takes one step's micro-batches from
        `iterator`, applies the update and returns the step's logs (float32 scalars)."""
        accumulation = self.config.gradient_accumulation_steps

        # Without AutoGraph (the step's Python loops run at trace time, and nothing in it
        # branches on a tensor): converting every function the step calls made its trace a
        # third slower (MiniLM: 2.6 against 1.7 s of a 0.5 s step).
        @tf.function(autograph=False)
        def step(iterator):
            micro_batches = [next(iterator) for _ in range(accumulation)]
            logs = self.strategy.run(self._replica_step, args=(micro_batches,))
            return {k: self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                    if k.endswith("loss") else
                    self.strategy.reduce(tf.distribute.ReduceOp.MEAN, v, axis=None)
                    for k, v in logs.items()}
        return step

    def _iterator(self, dataset_fn):
        """One device: a plain iterator, saved in checkpoints. Several: a distributed one."""
        if self.strategy.num_replicas_in_sync == 1 and \
                not keras_internals.is_multi_worker(self.strategy):
            with self.strategy.scope():
                return iter(dataset_fn(tf.distribute.InputContext())), True
        return iter(self.strategy.distribute_datasets_from_function(dataset_fn)), False

    def train(self, dataset_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset],
              examples_per_step: int, pauses: Collection[int] = (),
              on_pause: Callable[[int], bool] | None = None) -> dict:
        """Runs (or resumes) training to `num_train_steps`; returns the last step's logs.

        Args:
            dataset_fn: builds a replica's infinite, deterministic training dataset of
                micro-batches for an input context.
            examples_per_step: the global batch size (for the examples/s figure).
            pauses: steps after which a checkpoint is written and `on_pause(step)` called (also
                at the start, when the run resumes at one of them), with the same input and
                traced step before and after: scoring dev during training costs no new trace.
                SIGTERM and SIGINT do what they do outside training while it runs.
            on_pause: `on_pause(step)` returns whether training stops there; its seconds are
                left out of the examples/s figure.

        Raises:
            OutputDirInUseError: another run trains in the same output folder.
            TrainingInterrupted: SIGTERM or SIGINT arrived; a checkpoint of the step was saved.
            NonFiniteLossError: the loss or the weights became NaN or infinite.
        """
        # One writer of the folder's files: the chief (a strategy's only worker outside
        # multi-worker), which also locks it against a second run.
        chief = self.strategy.extended.should_checkpoint
        lock = exclusive_output_dir(self.config.output_dir) if chief else contextlib.nullcontext()
        with lock, StopSignals() as stop:
            return self._train(dataset_fn, examples_per_step, chief, stop, set(pauses),
                               on_pause)

    def _train(self, dataset_fn, examples_per_step: int, chief: bool, stop: StopSignals,
               pauses: set[int], on_pause: Callable[[int], bool] | None) -> dict:
        iterator, checkpointable = self._iterator(dataset_fn)
        if self.model.trainable_variables:
            # The slots made here, not inside the step's first trace: a tf.function that creates
            # variables is traced twice and lifts each initializer into a conditional, which
            # makes the first step about twice as slow.
            with self.strategy.scope():
                self.optimizer.build(self.model.trainable_variables)
        # Dropout's random-generator states, so that a resumed run draws the same masks.
        weights = {id(w) for w in self.model.weights}
        rng_states = [v for v in self.model.variables if id(v) not in weights]
        objects = dict(model=self.model, optimizer=self.optimizer, rng_states=rng_states)
        if checkpointable:
            objects["iterator"] = iterator
        checkpoints = TrainingCheckpoints(self.config.output_dir, self.config.keep_checkpoints,
                                          **objects)
        checkpoints.restore_latest()
        step = int(self.optimizer.iterations.numpy())
        if step and not checkpointable:
            # A distributed iterator cannot be saved: replay the deterministic input instead.
            logging.info("skipping the %d batches consumed before step %d", step *
                         self.config.gradient_accumulation_steps, step)
            for _ in range(step * self.config.gradient_accumulation_steps):
                next(iterator)
        step_fn = self.make_step()
        writer = tf.summary.create_file_writer(f"{self.config.output_dir}/train")
        # Appending needs a local file system (not `gs://`, whose objects are written whole).
        local = "://" not in self.config.output_dir
        step_log = StepLog(os.path.join(self.config.output_dir, STEP_LOG_FILE), step) \
            if chief and local else None
        log_steps = self.config.log_steps or max(1, min(100, self.config.num_train_steps // 10))
        logs, start, start_step = {}, time.monotonic(), step
        outside = _meta_optimizer_disabled()

        def pause(step: int) -> bool:
            # As outside the loop: what the pause runs is traced under the same graph options,
            # and a stop signal ends it at once (the step's checkpoint is written).
            with _disable_meta_optimizer(outside), stop.suspended():
                return on_pause(step)

        with _graph_options(self.model):
            if step in pauses and on_pause is not None and pause(step):
                return logs
            while step < self.config.num_train_steps:
                step_start = time.monotonic()
                logs = {k: float(v) for k, v in step_fn(iterator).items()}
                step = int(self.optimizer.iterations.numpy())
                if not math.isfinite(logs["loss"]) and not isinstance(
                        self.optimizer, keras.optimizers.LossScaleOptimizer):
                    raise NonFiniteLossError(
                        f"loss became NaN or infinite ({logs['loss']}) at step {step}; the last "
                        f"good checkpoint in {self.config.output_dir} is left as it was")
                now = time.monotonic()
                if step_log is not None:
                    step_log.write(step, logs, self._learning_rate(),
                                   examples_per_step / max(now - step_start, 1e-9))
                if step % log_steps == 0 or step == self.config.num_train_steps:
                    rate = (step - start_step) * examples_per_step / (now - start)
                    eta = (self.config.num_train_steps - step) * (now - start) / (step - start_step)
                    self._log(writer, step, logs, rate, eta)
                if step % self.config.save_checkpoints_steps == 0 or step in pauses or \
                        step == self.config.num_train_steps or stop.received:
                    self._check_weights_finite(step)
                    path = checkpoints.save(step)
                    if step in pauses and on_pause is not None and not stop.received:
                        paused = time.monotonic()
                        if pause(step):
                            break
                        start += time.monotonic() - paused
                    if stop.received:
                        raise TrainingInterrupted(
                            f"interrupted by {signal.Signals(stop.received).name} at step {step}/"
                            f"{self.config.num_train_steps}: checkpoint {path} written; rerun the "
                            f"same command to resume from it")
        logging.info("training step traced %d time(s)", step_fn.experimental_get_tracing_count())
        return logs

    def _check_weights_finite(self, step: int) -> None:
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(v))
                                for v in self.model.trainable_variables])
        if not bool(finite):
            bad = [v.path for v in self.model.trainable_variables
                   if not bool(tf.reduce_all(tf.math.is_finite(v)))]
            raise NonFiniteLossError(
                f"weights became NaN or infinite at step {step} ({', '.join(bad[:5])}); the last "
                f"good checkpoint in {self.config.output_dir} is left as it was")

    def _learning_rate(self) -> float:
        """The schedule at the current iteration count: after step t, the rate of update t+1
        (Keras's convention, also TensorBoard's `learning_rate` here)."""
        return float(self.optimizer.learning_rate.numpy()) \
            if hasattr(self.optimizer.learning_rate, "numpy") else float("nan")

    def _log(self, writer, step, logs, examples_per_second, eta_seconds):
        learning_rate = self._learning_rate()
        shown = ", ".join(f"{k} = {v:.4f}" for k, v in sorted(logs.items()))
        logging.info("step %d/%d: %s, learning_rate = %.3g, %.1f examples/s, ETA %s", step,
                     self.config.num_train_steps, shown, learning_rate, examples_per_second,
                     format_seconds(eta_seconds))
        with writer.as_default(step=step):
            for key, value in logs.items():
                tf.summary.scalar(key, value)
            tf.summary.scalar("learning_rate", learning_rate)
            tf.summary.scalar("examples_per_second", examples_per_second)
        writer.flush()


def _add_gradients(a, b):
    """Sums two micro-batches' gradients of one variable (None: the variable gets no gradient)."""
    if a is None:
        return None
    # Embedding gradients come as IndexedSlices; their sum is taken dense.
    return tf.convert_to_tensor(a) + tf.convert_to_tensor(b)
