"""Batches padded to their own length give the outputs, losses and weights of fixed padding, on
the original code's tiny checkpoints and recorded outputs."""
import dataclasses
import json

from absl import logging
import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import checkpoints, losses
from modeling.models.task_models import BertClassifier, BertSpanLabeler
from running.batching import FIXED, ArrayExamples, Batching
from running import prediction
from tests.support.modeling_fixtures import golden, tiny_config, tiny_dir
from training import fine_tuning
from training.optimizer import create_optimizer
from training.step_log import STEP_LOG_FILE
from training.trainer import TrainingConfig

TO_BATCH = Batching(multiple=8)


def _fixture_arrays(fixtures_dir) -> dict[str, np.ndarray]:
    """The recorded inputs at length 64 (real lengths 64, 59 and 31)."""
    values = golden(fixtures_dir, 64)
    return {key: values[f"inputs/{key}"].astype(np.int32)
            for key in ("input_ids", "input_mask", "segment_ids")}, values


@pytest.mark.parametrize("batch_size", [1, 2, 3])
def test_classifier_logits_are_the_originals_whatever_the_batches(fixtures_dir, batch_size):
    arrays, values = _fixture_arrays(fixtures_dir)
    model = BertClassifier(tiny_config(fixtures_dir), 3)
    checkpoints.load_checkpoint(model, str(tiny_dir(fixtures_dir) / "classifier/model.ckpt"))
    cut = fine_tuning.predict(model, arrays, batch_size, TO_BATCH)["logits"]
    fixed = fine_tuning.predict(model, arrays, batch_size, FIXED)["logits"]
    np.testing.assert_allclose(cut, values["classifier_logits"], atol=1e-5)
    # Round-off: prediction compiles this tiny model with XLA, whose CPU dot products of small
    # matrices round differently from those of larger ones; the packed encoder's matrices have
    # as many rows as a batch's real tokens (rounded up to a bucket), fewer than the padded's.
    np.testing.assert_allclose(cut, fixed, atol=2e-6)


def test_span_logits_are_the_originals_at_every_real_position(fixtures_dir):
    arrays, values = _fixture_arrays(fixtures_dir)
    model = BertSpanLabeler(tiny_config(fixtures_dir))
    checkpoints.load_checkpoint(model, str(tiny_dir(fixtures_dir) / "squad/model.ckpt"))
    outputs = fine_tuning.predict(model, arrays, 1, TO_BATCH)
    real = arrays["input_mask"] > 0
    for name in ("start_logits", "end_logits"):
        assert outputs[name].shape == (3, 64)           # padded back to max_seq_length
        np.testing.assert_allclose(outputs[name][real], values[f"squad_{name}"][real], atol=1e-5)
    # The third example (31 tokens) ran cut to 32 positions; past them its outputs are zeros.
    assert not outputs["start_logits"][2, 32:].any()


def _training_arrays(fixtures_dir) -> dict[str, np.ndarray]:
    """Eight examples from the recorded ones, cut to lengths from 5 to 64."""
    arrays, _ = _fixture_arrays(fixtures_dir)
    lengths = [64, 59, 31, 12, 7, 20, 5, 40]
    rows = {key: np.stack([value[i % 3] for i in range(8)]) for key, value in arrays.items()}
    mask = (np.arange(64)[None] < np.array(lengths)[:, None]).astype(np.int32)
    rows = {key: value * mask for key, value in rows.items()}
    rows["input_mask"] = mask
    rows["label_ids"] = np.array([0, 1, 2, 1, 0, 2, 1, 0], np.int32)
    return rows


def _train(fixtures_dir, output_dir, batching: Batching, packed: bool = True,
           jit_compile: bool = False):
    config = dataclasses.replace(tiny_config(fixtures_dir), hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0)

    def loss_fn(outputs, batch, normaliser):
        return {"loss": losses.mean_cross_entropy(outputs["logits"], batch["label_ids"],
                                                  normaliser.global_batch_size(batch))}
    task = fine_tuning.FineTuningTask(
        lambda: BertClassifier(config, 3, packed=packed), loss_fn, head="3 labels",
        initialise=lambda model, path: checkpoints.load_checkpoint(model, path))
    run = fine_tuning.FineTuningRun(
        strategy=tf.distribute.OneDeviceStrategy("/cpu:0"), output_dir=str(output_dir),
        init_checkpoint=str(tiny_dir(fixtures_dir) / "classifier/model.ckpt"), batch_size=2,
        seed=3, optimizer_fn=lambda steps: create_optimizer(1e-3, steps, 1),
        config_fn=lambda steps: TrainingConfig(steps, str(output_dir), log_steps=1,
                                               jit_compile=jit_compile))
    keras.utils.set_random_seed(0)
    examples = ArrayExamples(_training_arrays(fixtures_dir), batching=batching)
    trained = fine_tuning.train(run, task, examples, num_train_steps=8)
    with open(output_dir / STEP_LOG_FILE, encoding="utf-8") as f:
        step_losses = [json.loads(line)["loss"] for line in f]
    return trained.model, step_losses


@pytest.fixture
def logged(monkeypatch) -> list[str]:
    """The absl INFO lines logged during the test."""
    lines = []
    info = logging.info

    def record(message, *args, **kwargs):
        lines.append(message % args if args else message)
        info(message, *args, **kwargs)
    monkeypatch.setattr(logging, "info", record)
    return lines


def test_training_on_cut_batches_takes_the_steps_of_fixed_padding(fixtures_dir, tmp_path,
                                                                  logged):
    """Dropout off (its draws follow the batch's shape): every step's loss and every weight
    after eight steps (two epochs) agree to float32 round-off; one trace serves every length."""
    fixed_model, fixed_losses = _train(fixtures_dir, tmp_path / "fixed", FIXED)
    logged.clear()
    cut_model, cut_losses = _train(fixtures_dir, tmp_path / "cut", TO_BATCH)
    assert "training step traced 1 time(s)" in logged
    assert len(fixed_losses) == 8
    np.testing.assert_allclose(cut_losses, fixed_losses, rtol=1e-5)
    for fixed, cut in zip(fixed_model.weights, cut_model.weights):
        assert fixed.path == cut.path
        np.testing.assert_allclose(cut.numpy(), fixed.numpy(), atol=1e-6, err_msg=fixed.path)
    # The weights did move (a learning rate of 1e-3 over eight steps), on batches that were cut.
    start = BertClassifier(tiny_config(fixtures_dir), 3)
    checkpoints.load_checkpoint(start, str(tiny_dir(fixtures_dir) / "classifier/model.ckpt"))
    assert max(np.abs(a.numpy() - b.numpy()).max()
               for a, b in zip(start.weights, cut_model.weights)) > 1e-3
    dataset = ArrayExamples(_training_arrays(fixtures_dir), batching=TO_BATCH).training_dataset_fn(
        2, seed=3)(tf.distribute.InputContext())
    widths = [int(batch["input_ids"].shape[1]) for batch in dataset.take(8)]
    assert min(widths) < 64 and max(widths) == 64


@pytest.mark.parametrize("jit_compile", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_the_packed_encoder_takes_the_steps_of_the_padded_one(fixtures_dir, tmp_path,
                                                              jit_compile):
    """Dropout off: every step's loss and the weights after eight steps agree to float32
    round-off, on batches cut to their longest sequence (under XLA, the packed encoder runs
    every row of a training step: `modeling.layers.packing`)."""
    padded_model, padded_losses = _train(fixtures_dir, tmp_path / "padded", TO_BATCH,
                                         packed=False, jit_compile=jit_compile)
    packed_model, packed_losses = _train(fixtures_dir, tmp_path / "packed", TO_BATCH,
                                         jit_compile=jit_compile)
    assert packed_model.encoder.packed and not padded_model.encoder.packed
    np.testing.assert_allclose(packed_losses, padded_losses, rtol=1e-5)
    for padded, packed in zip(padded_model.weights, packed_model.weights):
        assert padded.path == packed.path
        np.testing.assert_allclose(packed.numpy(), padded.numpy(), atol=1e-6, err_msg=padded.path)


def test_under_xla_prediction_traces_once_and_compiles_only_the_bucket_lengths(
        fixtures_dir, monkeypatch, logged):
    monkeypatch.setattr(prediction, "_prefers_xla", lambda *args: True)
    arrays = _training_arrays(fixtures_dir)
    model = BertClassifier(tiny_config(fixtures_dir), 3)
    checkpoints.load_checkpoint(model, str(tiny_dir(fixtures_dir) / "classifier/model.ckpt"))
    logits = fine_tuning.predict(model, arrays, 1, Batching(multiple=1))["logits"]
    assert prediction.traces(model) == 1
    # Lengths 5, 7, 12, 20, 31, 40, 59, 64 one by one, under XLA in steps of 64 / 8.
    assert any("padded to lengths [8, 16, 24, 32, 40, 64]" in line for line in logged)
    monkeypatch.setattr(prediction, "_prefers_xla", lambda *args: False)
    np.testing.assert_allclose(logits, fine_tuning.predict(model, arrays, 1, FIXED)["logits"],
                               atol=1e-5)
