"""The training loop: gradient accumulation, resumption and the step log, on a tiny classifier."""
import json
import resource
import signal
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import losses
from modeling.config import BertConfig
from modeling.models.task_models import BertClassifier, BertSpanLabeler
from running.batching import ArrayExamples
from training import trainer
from training.checkpointing import CheckpointWriteError
from training.optimizer import create_optimizer
from training.step_log import STEP_LOG_FILE
from training.trainer import TrainingConfig


def _arrays():
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 30, (48, 8)).astype(np.int32)
    return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": 0 * ids,
            "label_ids": (ids[:, 0] > 15).astype(np.int32)}


def _loss(outputs, batch, normaliser):
    return {"loss": losses.mean_cross_entropy(outputs["logits"], batch["label_ids"],
                                              normaliser.global_batch_size(batch))}


def _fit(strategy, model, optimizer, loss_fn, arrays, config: TrainingConfig, batch_size=8,
         pauses=(), on_pause=None):
    """Trains on shuffled batches of `arrays` (seed 3), as the fine-tuning path batches them."""
    dataset_fn = ArrayExamples(arrays).training_dataset_fn(
        batch_size // config.gradient_accumulation_steps, seed=3)
    return trainer.Trainer(strategy, model, optimizer, loss_fn, config).train(
        dataset_fn, batch_size, pauses, on_pause)


def _train(output_dir, steps, dropout=0.1, accumulation=1, total_steps=12, pauses=(),
           on_pause=None):
    keras.utils.set_random_seed(7)
    config = BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32,
                        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = BertClassifier(config, 2)
        model.dropout.rate = dropout
        optimizer = create_optimizer(1e-3, total_steps, 2)
    # Training stops at `steps`; the schedule spans `total_steps`, as a rerun of the same command.
    _fit(strategy, model, optimizer, _loss, _arrays(), TrainingConfig(
        steps, str(output_dir), save_checkpoints_steps=3,
        gradient_accumulation_steps=accumulation), pauses=pauses, on_pause=on_pause)
    return [v.numpy() for v in model.weights]


def _step_log(output_dir) -> list[dict]:
    with open(output_dir / STEP_LOG_FILE, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_accumulated_micro_batches_equal_one_batch(tmp_path):
    whole = _train(tmp_path / "whole", 6, dropout=0.0)
    accumulated = _train(tmp_path / "accumulated", 6, dropout=0.0, accumulation=2)
    for a, b in zip(whole, accumulated):
        np.testing.assert_allclose(a, b, atol=2e-6)


def test_resumed_training_equals_uninterrupted_training_with_dropout(tmp_path):
    straight = _train(tmp_path / "straight", 12)
    _train(tmp_path / "resumed", 6)
    resumed = _train(tmp_path / "resumed", 12)
    for a, b in zip(straight, resumed):
        np.testing.assert_allclose(a, b, atol=1e-6)
    moved = _train(tmp_path / "other_seed_check", 12, dropout=0.0)
    assert max(np.abs(a - b).max() for a, b in zip(straight, moved)) > 1e-4


def test_accumulation_with_variables_that_get_no_gradient(tmp_path):
    keras.utils.set_random_seed(7)
    config = BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = BertSpanLabeler(config)  # the pooler is unused: its gradients are None
        optimizer = create_optimizer(1e-3, 4, 1)
    arrays = _arrays()
    arrays["start_positions"] = arrays["end_positions"] = arrays.pop("label_ids")
    pooler_before = model.encoder.get_layer("pooler").weights[0].numpy().copy()

    def span_loss(outputs, batch, normaliser):
        return {"loss": losses.span_loss(outputs["start_logits"], outputs["end_logits"],
                                         batch["start_positions"], batch["end_positions"],
                                         normaliser.global_batch_size(batch))}
    _fit(strategy, model, optimizer, span_loss, arrays,
         TrainingConfig(4, str(tmp_path), gradient_accumulation_steps=2))
    assert int(optimizer.iterations.numpy()) == 4
    np.testing.assert_array_equal(model.encoder.get_layer("pooler").weights[0].numpy(),
                                  pooler_before)


def test_every_step_is_logged_once_with_its_learning_rate_even_after_a_crash(tmp_path):
    straight = tmp_path / "straight"
    started = time.time()
    _train(straight, 12)
    records = _step_log(straight)
    assert [r["step"] for r in records] == list(range(1, 13))
    # create_optimizer(1e-3, 12 steps, 2 warm-up steps): warm-up, then linear decay to 0.
    np.testing.assert_allclose([r["learning_rate"] for r in records][:3],
                               [1e-3 * 1 / 2, 1e-3 * (1 - 2 / 12), 1e-3 * (1 - 3 / 12)],
                               rtol=1e-6)
    assert all(r["loss"] > 0 and r["examples_per_second"] > 0 for r in records)
    times = [r["wall_time"] for r in records]  # when each step ended
    assert started <= times[0] and times == sorted(times) and times[-1] <= time.time()
    # A run killed after step 5 whose newest checkpoint is step 3 logged steps 4 and 5, the last
    # line cut off: the rerun redoes them, logged once.
    crashed = tmp_path / "crashed"
    _train(crashed, 3)
    with open(crashed / STEP_LOG_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps({"step": 4, "loss": 9.0}) + "\n" + '{"step": 5, "lo')
    _train(crashed, 12)
    resumed = _step_log(crashed)
    assert [r["step"] for r in resumed] == list(range(1, 13))
    np.testing.assert_allclose([r["loss"] for r in resumed], [r["loss"] for r in records],
                               atol=1e-5)


def test_a_checkpoint_that_cannot_be_written_is_named_and_the_previous_one_stays(tmp_path):
    """A full disk or a file-size limit (RLIMIT_FSIZE, EFBIG) while saving step 6."""
    _train(tmp_path, 3)
    (data_file,) = tmp_path.glob("ckpt-3.data-*")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (data_file.stat().st_size // 2, hard))
    try:
        with pytest.raises(CheckpointWriteError, match=rf"writing checkpoint {tmp_path}/ckpt-6 "
                                                        r"failed: .*File too large.*ckpt-3"):
            _train(tmp_path, 6)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert not list(tmp_path.glob("ckpt-6*"))
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-3")
    tf.train.load_checkpoint(str(tmp_path / "ckpt-3")).get_variable_to_shape_map()


@pytest.fixture
def steps(monkeypatch) -> list:
    """The training steps the Trainers make (`Trainer.make_step`), in order."""
    made = []
    make_step = trainer.Trainer.make_step

    def recording_make_step(self):
        made.append(make_step(self))
        return made[-1]

    monkeypatch.setattr(trainer.Trainer, "make_step", recording_make_step)
    return made


def test_the_training_step_is_traced_once(tmp_path, steps):
    """The optimizer's slots exist before the step's first trace: a tf.function that creates
    variables is traced a second time, which doubled the first step's cost."""
    _train(tmp_path, 3)
    assert len(steps) == 1
    assert steps[0].experimental_get_tracing_count() == 1


def test_pauses_keep_the_input_and_the_traced_step_and_can_stop_training(tmp_path, steps):
    """Scoring dev during training pauses the loop: the weights are those of a run without
    pauses, the step is traced once, and each pause runs after a checkpoint of its step is
    written, under the graph options and the signal handlers outside the loop."""
    straight = _train(tmp_path / "straight", 12)
    before = tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer", False)
    paused_dir = tmp_path / "paused"
    seen = []
    outside = signal.getsignal(signal.SIGTERM)

    def on_pause(step):
        seen.append((step, tf.train.latest_checkpoint(str(paused_dir)).split("/")[-1],
                     tf.config.optimizer.get_experimental_options().get(
                         "disable_meta_optimizer", False),
                     signal.getsignal(signal.SIGTERM) is outside))
        return False

    paused = _train(paused_dir, 12, pauses=[4, 8], on_pause=on_pause)
    assert seen == [(4, "ckpt-4", before, True), (8, "ckpt-8", before, True)]
    assert steps[-1].experimental_get_tracing_count() == 1 and len(steps) == 2
    for a, b in zip(straight, paused):
        np.testing.assert_array_equal(a, b)
    # Stopped at step 4; a rerun resumes there and pauses at once, which stops it again.
    stopped_dir = tmp_path / "stopped"
    asked = []
    _train(stopped_dir, 12, pauses=[4, 8], on_pause=lambda step: asked.append(step) or True)
    _train(stopped_dir, 12, pauses=[4, 8], on_pause=lambda step: asked.append(step) or True)
    assert asked == [4, 4]
    assert [r["step"] for r in _step_log(stopped_dir)] == [1, 2, 3, 4]


def test_graph_optimizations_are_off_while_a_float32_model_trains_on_cpu_then_back(tmp_path):
    """Grappler's passes took about a second of the first step and made no CPU step faster:
    they are off while the step is traced and run, and the options are as before afterwards."""
    seen = []

    def loss(outputs, batch, normaliser):  # runs as the step is traced
        seen.append(tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer"))
        return _loss(outputs, batch, normaliser)

    before = tf.config.optimizer.get_experimental_options()
    keras.utils.set_random_seed(7)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = BertClassifier(BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1,
                                          num_attention_heads=2, intermediate_size=32), 2)
        optimizer = create_optimizer(1e-3, 2, 0)
    _fit(strategy, model, optimizer, loss, _arrays(), TrainingConfig(2, str(tmp_path)))
    assert seen == [True]
    assert tf.config.optimizer.get_experimental_options() == before
