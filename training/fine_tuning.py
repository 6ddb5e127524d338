"""The one fine-tuning path that every task plugs into.

A task (`FineTuningTask`) supplies what is its own: how its model is built, its loss, what its
fine-tuned head is, and optionally how it is initialised and saved. A run (`FineTuningRun`) holds
what every script's flags say the same way: the strategy, the output folder, `--init_checkpoint`,
the batch size, the seed, the optimizer and the training loop's settings. The runner does the rest
the same way for all:

- `train`: in the strategy's scope, build the model and its optimizer; unless the run resumes from
  a training checkpoint in its output folder (`training.checkpointing.resumes`), initialise it from
  `--init_checkpoint`; train to the last step, pausing where the evaluation plan scores dev
  (`training.periodic_evaluation`: the best model kept, training stopped early if asked); the
  chief saves the fine-tuned model at the optimizer's step.
- `restore`: the fine-tuned model, head included, to evaluate or predict without training.
- `predict`: batched prediction over in-memory features, in order (`running.prediction`).
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Callable, Mapping, NamedTuple, Protocol, Sequence

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from modeling import checkpoints
from modeling.checkpoints.hf.checkpoint import VOCAB_FILE
from running.batching import FIXED, ArrayExamples, Batching, DatasetFn
from running import prediction
from training.checkpointing import resumes
from training.distribution import any_worker
from training.periodic_evaluation import EvaluationPlan, PeriodicEvaluation
from training.trainer import LossFn, Trainer, TrainingConfig, uses_xla
from utils.encoder_inputs import ENCODER_INPUTS
from utils.output_files import AtomicFile


class TrainingData(Protocol):
    """What `train` reads: an infinite, deterministic dataset of micro-batches per input context
    (`running.batching.IndexedExamples` for in-memory features, TFRecords for pretraining)."""

    def training_dataset_fn(self, micro_batch: int, seed: int, xla: bool = False) -> DatasetFn:
        """`xla`: the step is compiled with XLA (which compiles each shape once)."""


class Trained(NamedTuple):
    """A trained model and the optimizer step its weights are at."""

    model: keras.Model
    optimizer: keras.optimizers.Optimizer | None  # None for a restored model
    global_step: int


def initialise_encoder(model: keras.Model, init_checkpoint: str | None) -> None:
    """Loads the encoder strictly from a pretrained checkpoint (its heads, if any, are unused)."""
    if init_checkpoint:
        found = checkpoints.load_checkpoint(model.encoder, init_checkpoint)
        logging.info("encoder initialised from %s (%s)", init_checkpoint, found)
    else:
        logging.warning("no --init_checkpoint: the encoder starts from random values")


def save_fine_tuned(trained: Trained, output_dir: str, labels: Sequence[str] | None = None,
                    do_lower_case: bool | None = None, problem_type: str | None = None) -> str:
    """Writes `model.ckpt` in the original TF1 format, `bert_config.json` and `model_spec.json`.

    The training checkpoints (`ckpt-N`, project format) stay beside them for resumption;
    `model_spec.json` names their head, so `convert_checkpoint.py` can rebuild the model from
    them, the task's label names by id (`labels`), so that predictions can name them, and the
    tokenizer's casing the model was trained with, so that it reads new text the same way, and
    a classifier's problem type where it is not single-label or regression by its width
    (`problem_type`: a multi-label classifier's outputs are a sigmoid each).
    """
    prefix = checkpoints.save_tf1_checkpoint(
        trained.model, os.path.join(output_dir, "model.ckpt"), global_step=trained.global_step,
        update_state_file=False)
    trained.model.config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    checkpoints.write_model_spec(output_dir, checkpoints.model_spec(trained.model),
                                 do_lower_case=do_lower_case, labels=labels,
                                 problem_type=problem_type)
    logging.info("fine-tuned model written to %s (original format)", prefix)
    return prefix


@dataclasses.dataclass(frozen=True)
class FineTuningTask:
    """What a task brings to the fine-tuning path.

    Attributes:
        build_model: builds the task model (called in the strategy's scope).
        loss_fn: `loss_fn(outputs, batch, normaliser)`, see `training.trainer.LossFn`.
        head: what a fine-tuned checkpoint of this task holds, for the error when none does
            (e.g. "SQuAD: cls/squad/output_weights").
        initialise: loads `--init_checkpoint` into a new model; None: the model has nothing
            pretrained to load.
        save: writes the trained model into the output folder (the chief only).
        metric_fn: extra training metrics to log, `metric_fn(outputs, batch)`.
    """

    build_model: Callable[[], keras.Model]
    loss_fn: LossFn
    head: str
    initialise: Callable[[keras.Model, str | None], None] | None = initialise_encoder
    save: Callable[[Trained, str], object] = save_fine_tuned
    metric_fn: Callable[[dict, dict], dict] | None = None


@dataclasses.dataclass(frozen=True)
class FineTuningRun:
    """What every training script's flags say the same way (`common_flags.fine_tuning_run`).

    Attributes:
        strategy: the `tf.distribute` strategy.
        output_dir: checkpoints, the fine-tuned model and results go here.
        init_checkpoint: the pretrained (or, without training, fine-tuned) checkpoint, or None.
        batch_size: global training batch size.
        seed: shuffling seed.
        optimizer_fn: the optimizer for a run of `num_train_steps`.
        config_fn: the training loop's settings for a run of `num_train_steps`.
        num_train_epochs: epochs of training, for `train_steps`.
        is_chief: whether this worker writes the final outputs.
        vocab_file: the model's vocab.txt, copied beside the fine-tuned model so that its folder
            holds a whole model, as Google's releases do; None: not copied.
    """

    strategy: tf.distribute.Strategy
    output_dir: str
    init_checkpoint: str | None
    batch_size: int
    seed: int
    optimizer_fn: Callable[[int], keras.optimizers.Optimizer]
    config_fn: Callable[[int], TrainingConfig]
    num_train_epochs: float = 1.0
    is_chief: bool = True
    vocab_file: str | None = None

    def train_steps(self, num_examples: int) -> int:
        """The original's step count for `num_examples` examples: int(examples / batch *
        epochs), at least 1."""
        return train_steps(num_examples, self.batch_size, self.num_train_epochs)


def train_steps(num_examples: int, batch_size: int, num_epochs: float) -> int:
    """The original's step count: int(examples / batch * epochs), at least 1."""
    return max(1, int(num_examples / batch_size * num_epochs))


def warmup_steps(num_train_steps: int, warmup_proportion: float) -> int:
    return int(math.floor(num_train_steps * warmup_proportion))


def epoch_ends(num_examples: int, batch_size: int, num_epochs: float) -> list[int]:
    """The global step at the end of each epoch (the last possibly partial one included)."""
    return sorted({train_steps(num_examples, batch_size, min(epoch, num_epochs))
                   for epoch in range(1, math.ceil(num_epochs) + 1)})


def train(run: FineTuningRun, task: FineTuningTask, data: TrainingData, num_train_steps: int,
          plan: EvaluationPlan = EvaluationPlan(),
          evaluate: Callable[[keras.Model, int, str], dict] | None = None,
          epoch_examples: int | None = None) -> Trained:
    """Builds, initialises (or resumes), trains and, on the chief, saves a task model.

    Args:
        run: the run's settings.
        task: the task.
        data: the training examples.
        num_train_steps: the last step; the optimizer's schedule spans this many.
        plan: when to score dev during training (`training.periodic_evaluation`); the chief
            scores, keeps the best model with `task.save`, and every worker stops where it says.
        evaluate: `evaluate(model, global_step, suffix)`, the task's scoring of dev.
        epoch_examples: the examples an epoch counts, for the plan's epoch ends (default:
            `data.num_examples`).

    Returns:
        The trained model at the last step, or where the evaluation stopped training.
    """
    logging.info("***** Running training *****: %s examples, batch size %d, %d steps",
                 getattr(data, "num_examples", "streamed"), run.batch_size, num_train_steps)
    with run.strategy.scope():
        model = task.build_model()
        optimizer = run.optimizer_fn(num_train_steps)
        if task.initialise is not None and not resumes(run.output_dir):
            task.initialise(model, run.init_checkpoint)
    config = run.config_fn(num_train_steps)
    micro_batch = run.batch_size // config.gradient_accumulation_steps
    dataset_fn = data.training_dataset_fn(micro_batch, run.seed, uses_xla(config, model))
    trainer = Trainer(run.strategy, model, optimizer, task.loss_fn, config,
                      metric_fn=task.metric_fn)
    if plan.enabled:
        ends = epoch_ends(epoch_examples or data.num_examples, run.batch_size,
                          run.num_train_epochs) if plan.every_epoch else []
        evaluation = PeriodicEvaluation(plan, evaluate, task.save, run.output_dir, ends)

        def score(step: int) -> bool:
            stop = evaluation(Trained(model, optimizer, step), step) if run.is_chief else False
            return any_worker(run.strategy, stop)

        trainer.train(dataset_fn, run.batch_size, evaluation.stops(num_train_steps), score)
    else:
        trainer.train(dataset_fn, run.batch_size)
    trained = Trained(model, optimizer, int(optimizer.iterations.numpy()))
    if run.is_chief:
        task.save(trained, run.output_dir)
        if run.vocab_file:
            copy_vocab(run.vocab_file, run.output_dir)
    return trained


def copy_vocab(vocab_file: str, output_dir: str) -> None:
    """`vocab_file` as `output_dir`/vocab.txt, written atomically (nothing when it is that file)."""
    target = os.path.join(output_dir, VOCAB_FILE)
    if os.path.exists(target) and os.path.samefile(vocab_file, target):
        return
    with open(vocab_file, "rb") as f:
        data = f.read()
    with AtomicFile(target, binary=True) as out:
        out.write(data)


def restore(run: FineTuningRun, task: FineTuningTask) -> Trained:
    """The fine-tuned model, head included, loaded strictly, to evaluate or predict without
    training.

    From `run.init_checkpoint` when it is given: a checkpoint that is missing, damaged or without
    the task's head (a pretrained one) stops the run with its error, so that results never come
    from another model than the one named. Only when it is not given, from the model fine-tuned in
    `run.output_dir`.
    """
    with run.strategy.scope():
        model = task.build_model()
    path = run.init_checkpoint or run.output_dir
    flag = "--init_checkpoint" if run.init_checkpoint else "--output_dir"
    try:
        found = checkpoints.load_checkpoint(model, path)
    except (checkpoints.CheckpointMismatchError, FileNotFoundError) as error:
        raise type(error)(f"{error}\nWithout --do_train, {flag} must hold a fine-tuned model "
                          f"({task.head}), not a pretrained checkpoint") from None
    logging.info("using the fine-tuned model of %s (%s)", path, found)
    return Trained(model, None, checkpoints.checkpoint_step(path))


def predict(model: keras.Model, arrays: Mapping[str, np.ndarray], batch_size: int,
            batching: Batching = FIXED,
            output_fn: prediction.OutputFn | None = None) -> dict[str, np.ndarray]:
    """Runs a BERT task model over in-memory features; returns its outputs, stacked in order.

    Args:
        model: the task model.
        arrays: the features, int32 [N, ...] `input_ids`, `input_mask`, `segment_ids` (other
            arrays are ignored).
        batch_size: examples per call.
        batching: how batches are padded (`common_flags.batching_from_flags`); rows of similar
            lengths are run together unless they are padded to max_seq_length.
        output_fn: see `running.prediction.predict_batches`.
    """
    return prediction.predict(model, ArrayExamples(arrays, ENCODER_INPUTS, batching),
                              batch_size, output_fn)


def predict_spans(model: keras.Model, arrays: Mapping[str, np.ndarray], batch_size: int,
                  batching: Batching = FIXED,
                  output_fn: prediction.OutputFn | None = None) -> dict[str, np.ndarray]:
    """A span model's `start_logits` and `end_logits` float32 [N, max_seq_length], as `predict`.

    Padded to max_seq_length, padding positions keep the logits the model gives them, as the
    original's do (one may take an n-best slot). Cut to their batch's length, they are -inf, so
    that none does, whatever batch its row ran in.
    """
    logits = predict(model, arrays, batch_size, batching, output_fn)
    if not batching.pad_to_max_length:
        for values in logits.values():
            values[arrays["input_mask"] == 0] = -np.inf
    return logits
