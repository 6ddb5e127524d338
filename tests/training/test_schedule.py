"""Tests of training/schedule.py against the original's learning rates."""
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.support.dependencies import require
from training.schedule import WarmupLinearDecay


def original_graph_rates(init_lr: float, num_train_steps: int, num_warmup_steps: int,
                         steps: np.ndarray) -> np.ndarray:
    """The original `create_optimizer` rate, built as it builds it: a TF1 graph run in a session."""
    tf1 = tf.compat.v1
    with tf.Graph().as_default():
        global_step = tf1.placeholder(tf.int64, [None])
        rate = tf1.train.polynomial_decay(tf.constant(init_lr, tf.float32), global_step,
                                          num_train_steps, end_learning_rate=0.0, power=1.0,
                                          cycle=False)
        if num_warmup_steps:
            step_int = tf.cast(global_step, tf.int32)
            warmup_int = tf.constant(num_warmup_steps, tf.int32)
            percent_done = tf.cast(step_int, tf.float32) / tf.cast(warmup_int, tf.float32)
            warmup_rate = init_lr * percent_done
            is_warmup = tf.cast(step_int < warmup_int, tf.float32)
            rate = (1.0 - is_warmup) * rate + is_warmup * warmup_rate
        with tf1.Session() as session:
            return session.run(rate, {global_step: steps})


def test_fixture_rates_bit_for_bit(fixtures_dir):
    folder = fixtures_dir / "optimizer"
    meta = json.loads((folder / "optimizer_golden.json").read_text())
    expected = np.load(folder / "optimizer_golden.npz")["learning_rate"]
    params = meta["params"]
    schedule = WarmupLinearDecay(params["init_lr"], params["num_train_steps"],
                                 params["num_warmup_steps"])
    steps = tf.range(len(expected), dtype=tf.int64)
    np.testing.assert_array_equal(schedule(steps).numpy(), expected)
    assert [s["learning_rate"] for s in meta["steps"]] == pytest.approx(expected.tolist(), rel=0)


@pytest.mark.parametrize("init_lr,num_train_steps,num_warmup_steps", [
    (5e-5, 1000, 100), (2e-5, 3668, 366), (3e-5, 33, 7), (1e-4, 7, 0), (1e-4, 100, 100)])
@pytest.mark.parametrize("mode", ["eager", "function", "xla"])
def test_matches_original_graph(init_lr, num_train_steps, num_warmup_steps, mode):
    steps = np.arange(num_train_steps + 3, dtype=np.int64)
    expected = original_graph_rates(init_lr, num_train_steps, num_warmup_steps, steps)
    schedule = WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps)
    compute = schedule if mode == "eager" else tf.function(schedule, jit_compile=(mode == "xla"))
    rates = compute(tf.constant(steps)).numpy()
    assert np.all(rates >= 0.0)
    if mode == "xla":
        # XLA may fuse `1 - step * (1 / T)` into one rounding: off by at most init_lr * ulp(1) / 2.
        np.testing.assert_allclose(rates, expected, rtol=1e-6, atol=init_lr * 2.0 ** -24)
    else:
        np.testing.assert_array_equal(rates, expected)


def test_hand_computed_values():
    schedule = WarmupLinearDecay(1e-3, num_train_steps=10, num_warmup_steps=4)
    rates = [float(schedule(step)) for step in [0, 1, 3, 4, 5, 10, 11, 1000]]
    # Warm-up to step 3, then the decay that started at step 0 (not at the end of warm-up).
    assert rates == pytest.approx([0.0, 2.5e-4, 7.5e-4, 6e-4, 5e-4, 0.0, 0.0, 0.0], rel=1e-6)
    no_warmup = WarmupLinearDecay(1e-3, num_train_steps=4)
    assert [float(no_warmup(s)) for s in range(6)] == pytest.approx(
        [1e-3, 7.5e-4, 5e-4, 2.5e-4, 0.0, 0.0], rel=1e-6)


def test_drives_a_keras_optimizer_and_round_trips():
    schedule = WarmupLinearDecay(1e-3, 10, 2, step_offset=1)
    config = keras.optimizers.schedules.serialize(schedule)
    restored = keras.optimizers.schedules.deserialize(config)
    assert isinstance(restored, WarmupLinearDecay)
    assert restored.get_config() == {"init_lr": 1e-3, "num_train_steps": 10, "num_warmup_steps": 2,
                                     "step_offset": 1, "decay_from_peak": False}
    from_peak = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(
        WarmupLinearDecay(1e-3, 10, 2, decay_from_peak=True)))
    assert from_peak.decay_from_peak and float(from_peak(6)) == pytest.approx(5e-4, rel=1e-6)
    # Iteration 0 takes the rate of step 1 (warm-up: 1e-3 * 1 / 2).
    assert float(restored(0)) == pytest.approx(5e-4, rel=1e-6)
    restored = WarmupLinearDecay(1e-3, 10, 2)
    optimizer = keras.optimizers.SGD(learning_rate=restored)
    optimizer.iterations.assign(1)
    assert float(optimizer.learning_rate) == pytest.approx(5e-4, rel=1e-6)


@pytest.mark.parametrize("kwargs,message", [
    (dict(init_lr=1e-4, num_train_steps=0), "num_train_steps=0"),
    (dict(init_lr=1e-4, num_train_steps=10, num_warmup_steps=-1), "num_warmup_steps=-1"),
    (dict(init_lr=-1.0, num_train_steps=10), "init_lr=-1.0"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WarmupLinearDecay(**kwargs)


def test_decay_from_peak_hand_computed_values():
    schedule = WarmupLinearDecay(1e-3, num_train_steps=10, num_warmup_steps=4,
                                 decay_from_peak=True)
    rates = [float(schedule(step)) for step in [0, 1, 3, 4, 5, 7, 10, 11, 1000]]
    # Warm-up to step 3, then from the peak at step 4 down to 0 at step 10.
    assert rates == pytest.approx([0.0, 2.5e-4, 7.5e-4, 1e-3, 1e-3 * 5 / 6, 5e-4, 0.0, 0.0, 0.0],
                                  rel=1e-6, abs=0)
    # Without warm-up it is the original's decay; warm-up to the last step leaves no decay.
    no_warmup = WarmupLinearDecay(1e-3, 4, decay_from_peak=True)
    assert [float(no_warmup(s)) for s in range(6)] == [
        float(WarmupLinearDecay(1e-3, 4)(s)) for s in range(6)]
    all_warmup = WarmupLinearDecay(1e-3, 4, 4, decay_from_peak=True)
    assert [float(all_warmup(s)) for s in range(6)] == pytest.approx(
        [0.0, 2.5e-4, 5e-4, 7.5e-4, 0.0, 0.0], rel=1e-6, abs=0)


@pytest.mark.parametrize("num_train_steps,num_warmup_steps", [(198, 19), (1000, 100), (7, 0),
                                                              (33, 7)])
def test_decay_from_peak_matches_transformers_linear_schedule(num_train_steps, num_warmup_steps):
    torch = require("torch")
    transformers = require("transformers")
    init_lr = 2e-5
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=init_lr)
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, num_warmup_steps,
                                                             num_train_steps)
    expected = []
    for _ in range(num_train_steps + 3):  # the rate of each update, then a step of the schedule
        expected.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    schedule = WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps,
                                 decay_from_peak=True)
    rates = schedule(tf.range(num_train_steps + 3, dtype=tf.int64)).numpy()
    np.testing.assert_allclose(rates, expected, rtol=1e-6, atol=init_lr * 2.0 ** -24)
