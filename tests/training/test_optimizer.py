"""Tests of training/optimizer.py: the original's trajectory, hand-computed steps, PyTorch's AdamW,
resumption, strategies."""
import json
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.checkpoints import names as checkpoint_names
from tests.support.dependencies import require
from tests.support.paths import REPO_ROOT
from training import moment_optimizer
from training.optimizer import (EXCLUDE_FROM_WEIGHT_DECAY, AdamWeightDecay,
                                BiasCorrectedAdamWeightDecay, Lamb, create_optimizer)

# float32 round-off allowance where XLA compiles the update (a real BERT's large variables, or the
# whole step under jit_compile), which may contract a multiply and an add into one rounding. Plain
# TensorFlow ops, eager or in a tf.function, match the original bit for bit.
TOLERANCE = dict(rtol=1e-6, atol=1e-7)
EXACT = dict(rtol=0, atol=0)


def load_golden(fixtures_dir: pathlib.Path):
    """The original optimizer's trajectory: (npz arrays, json metadata, trained variable names)."""
    folder = pathlib.Path(fixtures_dir) / "optimizer"
    arrays = dict(np.load(folder / "optimizer_golden.npz"))
    meta = json.loads((folder / "optimizer_golden.json").read_text())
    names = [name for name, _, trainable in meta["variables_in_graph"] if trainable]
    return arrays, meta, names


def make_variable(path: str, value: np.ndarray) -> keras.Variable:
    """A keras.Variable whose `path` is `path` (nested name scopes, one per `/`)."""
    *scopes, name = path.split("/")
    if not scopes:
        return keras.Variable(value, name=name)
    with keras.name_scope(scopes[0]):
        return make_variable("/".join(scopes[1:] + [name]), value)


def golden_variables(arrays, names):
    return [make_variable(name, arrays[f"init/{name}"]) for name in names]


def golden_grads(arrays, names, step, scale=1.0):
    return [tf.constant(arrays[f"grad/{step}/{name}"] * np.float32(scale)) for name in names]


def assert_matches_step(arrays, names, step, variables, slots, tolerance=TOLERANCE):
    for name, variable in zip(names, variables):
        m, v = slots[name]
        np.testing.assert_allclose(variable.numpy(), arrays[f"value/{step}/{name}"], **tolerance,
                                   err_msg=f"value/{step}/{name}")
        np.testing.assert_allclose(m.numpy(), arrays[f"adam_m/{step}/{name}"], **tolerance,
                                   err_msg=f"adam_m/{step}/{name}")
        np.testing.assert_allclose(v.numpy(), arrays[f"adam_v/{step}/{name}"], **tolerance,
                                   err_msg=f"adam_v/{step}/{name}")


@pytest.fixture(params=["plain_ops", "xla_update"])
def update_kernel(request, monkeypatch):
    """Updates by plain ops (the path of small variables: AdamWeightDecay's and LAMB's excluded
    ones grouped, LAMB's others one by one), or each variable's XLA computation (large ones)."""
    threshold = 1 << 62 if request.param == "plain_ops" else 0
    monkeypatch.setattr(moment_optimizer, "_XLA_UPDATE_MIN_ELEMENTS", threshold)
    return request.param


def original_optimizer(meta):
    params = meta["params"]
    return create_optimizer(params["init_lr"], params["num_train_steps"],
                            params["num_warmup_steps"])


@pytest.mark.parametrize("mode", ["eager", "function", "xla"])
def test_reproduces_original_trajectory(fixtures_dir, mode, update_kernel):
    arrays, meta, names = load_golden(fixtures_dir)
    variables = golden_variables(arrays, names)
    optimizer = original_optimizer(meta)

    def apply(grads):
        optimizer.apply(grads, variables)

    if mode != "eager":
        apply = tf.function(apply, jit_compile=(mode == "xla"))
    tolerance = EXACT if update_kernel == "plain_ops" and mode != "xla" else TOLERANCE
    for step in range(len(meta["steps"])):
        # The update of step t uses the rate of step t (the fixture's `value/*` sequence).
        np.testing.assert_allclose(float(optimizer.learning_rate), arrays["learning_rate"][step],
                                   rtol=1e-7, atol=0, err_msg=f"learning rate of step {step}")
        apply(golden_grads(arrays, names, step))
        assert_matches_step(arrays, names, step, variables, optimizer.moment_slots(), tolerance)


def test_learning_rate_of_next_step_reproduces_the_original_as_it_ran(fixtures_dir):
    """`as_run/*`: every update of the original's run used the learning rate of step t + 1."""
    arrays, meta, names = load_golden(fixtures_dir)
    variables = golden_variables(arrays, names)
    params = meta["params"]
    optimizer = create_optimizer(params["init_lr"], params["num_train_steps"],
                                 params["num_warmup_steps"], learning_rate_step_offset=1)
    apply = tf.function(lambda grads: optimizer.apply(grads, variables))
    for step in range(len(meta["steps"])):
        apply(golden_grads(arrays, names, step))
        for name, variable in zip(names, variables):
            np.testing.assert_allclose(variable.numpy(), arrays[f"as_run/value/{step}/{name}"],
                                       **TOLERANCE, err_msg=f"as_run/value/{step}/{name}")
    # The intended sequence differs from it: the offset is what makes the match.
    assert not np.allclose(arrays[f"as_run/value/0/{names[0]}"], arrays[f"value/0/{names[0]}"],
                           rtol=1e-6, atol=1e-7)


def test_weight_decay_rule_matches_original(fixtures_dir):
    arrays, meta, names = load_golden(fixtures_dir)
    optimizer = original_optimizer(meta)
    optimizer.build(golden_variables(arrays, names))
    assert optimizer.weight_decay_applied() == meta["weight_decay_applied"]
    assert (list(meta["optimizer_kwargs_seen"]["exclude_from_weight_decay"])
            == list(EXCLUDE_FROM_WEIGHT_DECAY))


def test_weight_decay_rule_same_on_model_paths_and_original_names():
    # The rule reads Keras paths; it must decide as the original did on the checkpoint names.
    optimizer = AdamWeightDecay()
    rows = checkpoint_names.ENCODER_TABLE + checkpoint_names.HEAD_TABLE
    tf1_names = [tf1.format(i=0) for tf1, _ in rows]
    keras_paths = [path.format(i=0) for _, path in rows]
    optimizer.build([make_variable(name, np.ones(2, np.float32)) for name in tf1_names])
    by_original_name = optimizer.weight_decay_applied()
    optimizer = AdamWeightDecay()
    optimizer.build([make_variable(path, np.ones(2, np.float32)) for path in keras_paths])
    by_keras_path = optimizer.weight_decay_applied()
    assert [by_original_name[n] for n in tf1_names] == [by_keras_path[p] for p in keras_paths]


def test_loss_scale_wrapper_reproduces_trajectory_and_skips_nonfinite(fixtures_dir):
    arrays, meta, names = load_golden(fixtures_dir)
    variables = golden_variables(arrays, names)
    optimizer = create_optimizer(1e-3, 10, 3, use_loss_scale=True)
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    apply = tf.function(lambda grads: optimizer.apply(grads, variables))
    for step in range(len(meta["steps"])):
        scale = float(optimizer.dynamic_scale) if optimizer.built else optimizer.initial_scale
        apply(golden_grads(arrays, names, step, scale=scale))
        slots = optimizer.inner_optimizer.moment_slots()
        assert_matches_step(arrays, names, step, variables, slots)
        if step == 4:
            # An overflowed step: skipped, the scale halves, no state moves.
            scale = float(optimizer.dynamic_scale)
            grads = golden_grads(arrays, names, step + 1, scale=scale)
            grads[0] = grads[0] + np.inf
            apply(grads)
            assert float(optimizer.dynamic_scale) == scale / 2
            assert int(optimizer.inner_optimizer.iterations) == step + 1
            assert_matches_step(arrays, names, step, variables,
                                optimizer.inner_optimizer.moment_slots())


def _adam_weight_decay_step(w, m, v, g, lr, decay):
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    update = m / (np.sqrt(v) + 1e-6) + (0.01 * w if decay else 0.0)
    return w - lr * update, m, v


def test_without_clipping_takes_the_raw_gradient_and_sparse_equals_dense():
    rng = np.random.default_rng(0)
    kernel0, table0 = rng.normal(size=(3, 2)), rng.normal(size=(5, 2))
    kernel_grad, rows_grad = 10 * rng.normal(size=(3, 2)), rng.normal(size=(2, 2))
    with keras.name_scope("layer"):
        kernel = keras.Variable(kernel0.astype(np.float32), name="kernel")
    with keras.name_scope("embeddings"):
        table = keras.Variable(table0.astype(np.float32), name="word_embeddings")
    optimizer = AdamWeightDecay(learning_rate=0.1, clip_norm=None)
    sparse = tf.IndexedSlices(tf.constant(rows_grad, tf.float32), tf.constant([3, 1]), [5, 2])
    optimizer.apply([tf.constant(kernel_grad, tf.float32), sparse], [kernel, table])

    dense_table_grad = np.zeros((5, 2))
    dense_table_grad[[3, 1]] = rows_grad
    zeros = np.zeros((3, 2))
    expected_kernel = _adam_weight_decay_step(kernel0, zeros, zeros, kernel_grad, 0.1, True)[0]
    zeros = np.zeros((5, 2))
    expected_table = _adam_weight_decay_step(table0, zeros, zeros, dense_table_grad, 0.1, True)[0]
    np.testing.assert_allclose(kernel.numpy(), expected_kernel, rtol=1e-5)
    np.testing.assert_allclose(table.numpy(), expected_table, rtol=1e-5)


@pytest.mark.parametrize("optimizer_type", ["adamw", "adamw_bias_corrected", "lamb"])
def test_clipping_scales_every_gradient_once_as_clip_by_global_norm(optimizer_type):
    """The clipping scale, applied in each update (dense gradients) or to a sparse gradient's
    values, gives bit for bit the step on `tf.clip_by_global_norm`'s gradients: a large variable
    (its update compiled), small ones (updated together), an embedding table's rows (one row
    twice)."""
    rng = np.random.default_rng(7)
    shapes = {"layer/kernel": (300, 256), "layer/bias": (256,),
              "layer_norm/gamma": (256,), "embeddings/word_embeddings": (40, 8)}
    init = {path: rng.normal(size=shape).astype(np.float32) for path, shape in shapes.items()}
    clipped = create_optimizer(1e-2, 10, 0, optimizer_type)
    unclipped = create_optimizer(1e-2, 10, 0, optimizer_type, clip_norm=None)
    variables = [[make_variable(path, value) for path, value in init.items()] for _ in range(2)]

    def gradients():
        dense = [tf.constant(rng.normal(size=shape).astype(np.float32))
                 for shape in list(shapes.values())[:3]]
        rows = tf.constant(rng.normal(size=(3, 8)).astype(np.float32))
        return dense + [tf.IndexedSlices(rows, tf.constant([5, 2, 5]), tf.constant([40, 8]))]

    @tf.function
    def steps(grads):
        clipped.apply(grads, variables[0])
        unclipped.apply(tf.clip_by_global_norm(grads, 1.0)[0], variables[1])

    for _ in range(2):
        grads = gradients()
        assert tf.linalg.global_norm(grads) > 10.0  # clipped
        steps(grads)
    slots = [optimizer.moment_slots() for optimizer in (clipped, unclipped)]
    for path in shapes:
        for a, b in zip(slots[0][path], slots[1][path]):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    for a, b in zip(*variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert not np.array_equal(a.numpy(), init[a.path])


@pytest.mark.parametrize("optimizer_type", ["adamw", "adamw_bias_corrected", "lamb"])
def test_grouped_update_of_small_variables_equals_one_update_each(optimizer_type):
    """Small variables updated together, over their concatenation, get bit for bit the values of
    one update each; 1-D and 2-D, decayed and excluded, a sparse gradient among them."""
    rng = np.random.default_rng(3)
    paths = ["layer_0/attention/query/bias", "layer_0/output_layer_norm/gamma",
             "embeddings/token_type_embeddings", "classifier/output_weights",
             "layer_0/output/bias"]
    shapes = [(3,), (3,), (2, 3), (2, 3), (4,)]
    init = [rng.normal(size=s).astype(np.float32) for s in shapes]
    steps = [[rng.normal(size=s).astype(np.float32) * (t + 1) for s in shapes]
             for t in range(3)]

    def gradients(values):  # the token-type table's gradient as sparse rows, as a lookup's
        return [tf.IndexedSlices(tf.constant(g[1:]), tf.constant([1]),
                                 tf.constant([2, 3])) if i == 2
                else tf.constant(g) for i, g in enumerate(values)]

    results = {}
    for grouped in (True, False):
        variables = [make_variable(p, w) for p, w in zip(paths, init)]
        optimizer = create_optimizer(0.01, 10, 0, optimizer_type=optimizer_type)
        if not grouped:
            optimizer._elementwise = lambda index: False
        step = tf.function(lambda g: optimizer.apply(g, variables))
        for values in steps:
            step(gradients(values))
        slots = optimizer.moment_slots()
        results[grouped] = [(v.numpy(), *(s.numpy() for s in slots[v.path])) for v in variables]
    for path, got, want in zip(paths, results[True], results[False]):
        for name, a, b in zip(("value", "adam_m", "adam_v"), got, want):
            np.testing.assert_array_equal(a, b, err_msg=f"{name} of {path}")
    # The three steps moved every variable.
    assert all(not np.array_equal(got[0], w) for got, w in zip(results[True], init))


def _lamb_reference(values, grads_per_step, lrs, excluded, clip_norm=1.0):
    """LAMB in float64 numpy (You et al. 2019, Algorithm 2, phi = identity)."""
    values = [w.astype(np.float64) for w in values]
    ms = [np.zeros_like(w) for w in values]
    vs = [np.zeros_like(w) for w in values]
    for t, (grads, lr) in enumerate(zip(grads_per_step, lrs), start=1):
        norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads))
        grads = [g * clip_norm / max(norm, clip_norm) for g in grads]
        for i, g in enumerate(grads):
            ms[i] = 0.9 * ms[i] + 0.1 * g
            vs[i] = 0.999 * vs[i] + 0.001 * g * g
            update = (ms[i] / (1 - 0.9 ** t)) / (np.sqrt(vs[i] / (1 - 0.999 ** t)) + 1e-6)
            ratio = 1.0
            if not excluded[i]:
                update = update + 0.01 * values[i]
                w_norm, u_norm = np.linalg.norm(values[i]), np.linalg.norm(update)
                ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
            values[i] = values[i] - lr * ratio * update
    return values


def test_lamb_matches_hand_computed_steps(update_kernel):
    rng = np.random.default_rng(1)
    paths = ["layer_0/attention/query/kernel", "layer_0/attention/query/bias",
             "layer_0/output_layer_norm/gamma", "classifier/output_weights"]
    shapes = [(4, 3), (3,), (3,), (2, 3)]
    init = [rng.normal(size=s).astype(np.float32) for s in shapes]
    init[3] = np.zeros((2, 3), np.float32)  # ||w|| = 0: trust ratio 1 on the first step.
    grads = [[(rng.normal(size=s) * (5.0 if t == 1 else 0.1)).astype(np.float32) for s in shapes]
             for t in range(3)]
    variables = [make_variable(p, w) for p, w in zip(paths, init)]
    optimizer = create_optimizer(0.01, 10, 2, optimizer_type="lamb")
    assert isinstance(optimizer, Lamb)
    lrs = []
    step = tf.function(lambda g: optimizer.apply(g, variables), jit_compile=True)
    for t in range(3):
        lrs.append(float(optimizer.learning_rate))
        step([tf.constant(g) for g in grads[t]])
    assert lrs == pytest.approx([0.0, 0.005, 0.01 * (1 - 2 / 10)], rel=1e-6)
    expected = _lamb_reference(init, grads, lrs, excluded=[False, True, True, False])
    for variable, want in zip(variables, expected):
        np.testing.assert_allclose(variable.numpy(), want, rtol=2e-5, atol=1e-7)
    assert optimizer.weight_decay_applied() == dict(zip(paths, [True, False, False, True]))


# ----------------------------------------------------------------------- bias-corrected AdamW

def _bias_corrected_reference(values, grads_per_step, lrs, decayed, clip_norm=1.0,
                              weight_decay_rate=0.01, epsilon=1e-6, epsilon_on="sqrt_v"):
    """Bias-corrected AdamW in float64 numpy, the weights decayed before the step.

    `epsilon_on`: "sqrt_v" adds epsilon to sqrt(v) of the uncorrected v (Keras, Model Garden:
    BiasCorrectedAdamWeightDecay); "sqrt_v_hat" adds it to sqrt(v_hat) (torch.optim.AdamW).
    """
    values = [w.astype(np.float64) for w in values]
    ms = [np.zeros_like(w) for w in values]
    vs = [np.zeros_like(w) for w in values]
    for t, (grads, lr) in enumerate(zip(grads_per_step, lrs), start=1):
        if clip_norm is not None:
            norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads))
            grads = [g * clip_norm / max(norm, clip_norm) for g in grads]
        for i, g in enumerate(grads):
            ms[i] = 0.9 * ms[i] + 0.1 * g
            vs[i] = 0.999 * vs[i] + 0.001 * g * g
            m_hat, v_hat = ms[i] / (1 - 0.9 ** t), vs[i] / (1 - 0.999 ** t)
            if epsilon_on == "sqrt_v":
                step = m_hat / (np.sqrt(v_hat) + epsilon / np.sqrt(1 - 0.999 ** t))
            else:
                step = m_hat / (np.sqrt(v_hat) + epsilon)
            decay = weight_decay_rate * values[i] if decayed[i] else 0.0
            values[i] = values[i] - lr * decay - lr * step
    return values


_PATHS = ["layer_0/attention/query/kernel", "layer_0/attention/query/bias",
          "layer_0/output_layer_norm/gamma", "classifier/output_weights"]
_DECAYED = [True, False, False, True]


def _gradients(rng, shapes, steps, scales=(1e-4, 1e-2, 1.0, 5.0)):
    """`steps` lists of gradients, each variable at its own scale (the small ones where epsilon
    matters), the step's scale changing so that some steps are clipped and some are not."""
    return [[(rng.normal(size=shape) * scale * (0.05 if t % 2 else 1.0)).astype(np.float32)
             for shape, scale in zip(shapes, scales)] for t in range(steps)]


def _run_bias_corrected(init, grads, weight_decay_rate=0.01, clip_norm=1.0, jit_compile=False):
    """Our optimizer over `grads`: (final values, the learning rate of each step)."""
    variables = [make_variable(p, w) for p, w in zip(_PATHS, init)]
    optimizer = create_optimizer(0.01, 10, 2, optimizer_type="adamw_bias_corrected",
                                 weight_decay_rate=weight_decay_rate, clip_norm=clip_norm)
    assert isinstance(optimizer, BiasCorrectedAdamWeightDecay)
    optimizer.build(variables)  # before the trace, as the training loop builds it
    step = tf.function(lambda g: optimizer.apply(g, variables), jit_compile=jit_compile)
    lrs = []
    for values in grads:
        lrs.append(float(optimizer.learning_rate))
        step([tf.constant(g) for g in values])
    return [v.numpy() for v in variables], lrs


@pytest.mark.parametrize("weight_decay_rate,clip_norm", [(0.01, 1.0), (0.0, 1.0), (0.01, None)],
                         ids=["decay_and_clipping", "no_decay", "no_clipping"])
def test_bias_corrected_adamw_matches_hand_computed_steps(update_kernel, weight_decay_rate,
                                                         clip_norm):
    rng = np.random.default_rng(5)
    shapes = [(4, 3), (3,), (3,), (2, 3)]
    init = [rng.normal(size=s).astype(np.float32) for s in shapes]
    grads = _gradients(rng, shapes, 5)
    got, lrs = _run_bias_corrected(init, grads, weight_decay_rate, clip_norm,
                                   jit_compile=update_kernel == "xla_update")
    assert lrs == pytest.approx([0.0, 0.005, 0.01 * (1 - 2 / 10), 0.01 * (1 - 3 / 10),
                                 0.01 * (1 - 4 / 10)], rel=1e-6)
    expected = _bias_corrected_reference(init, grads, lrs, _DECAYED, clip_norm, weight_decay_rate)
    for path, value, want in zip(_PATHS, got, expected):
        np.testing.assert_allclose(value, want, rtol=2e-5, atol=1e-7, err_msg=path)


def test_first_step_is_the_learning_rate_where_the_originals_is_three_times_it():
    """Bias correction: the first update moves each weight by lr (for gradients well above
    epsilon), whatever their scale; the original's moves it by lr * 0.1 / sqrt(0.001) = 3.16 lr."""
    gradient = tf.constant([0.05, -0.5, 2.0])
    moved = {}
    for optimizer_class in (BiasCorrectedAdamWeightDecay, AdamWeightDecay):
        variable = make_variable("layer/bias", np.zeros(3, np.float32))
        optimizer_class(learning_rate=0.01, clip_norm=None).apply([gradient], [variable])
        moved[optimizer_class] = -variable.numpy() / np.sign(gradient.numpy())
    np.testing.assert_allclose(moved[BiasCorrectedAdamWeightDecay], 0.01, rtol=1e-3)
    np.testing.assert_allclose(moved[AdamWeightDecay], 0.01 * 0.1 / np.sqrt(0.001), rtol=1e-3)


@pytest.mark.parametrize("optimizer_type,correction",
                         [("adamw", 1.0), ("adamw_bias_corrected", np.sqrt(0.001) / 0.1)])
@pytest.mark.parametrize("epsilon", [1e-6, 1e-8])
def test_epsilon_damps_the_first_step_of_small_gradients(optimizer_type, correction, epsilon):
    """`create_optimizer(epsilon=...)` reaches the update: a first step moves a weight by
    lr * c * 0.1 g / (sqrt(0.001) |g| + epsilon), c = sqrt(1 - b2) / (1 - b1) with bias
    correction and 1 without; for |g| = 1e-6, 3% of lr (bias-corrected) at epsilon 1e-6 and 76%
    at PyTorch's 1e-8."""
    gradient = np.array([1e-6, -1e-6, 1e-2], np.float32)
    variable = make_variable("layer/bias", np.zeros(3, np.float32))
    optimizer = create_optimizer(0.01, 10, 0, optimizer_type, clip_norm=None, epsilon=epsilon)
    optimizer.apply([tf.constant(gradient)], [variable])
    moved = -variable.numpy() / np.sign(gradient)
    magnitude = np.abs(gradient.astype(np.float64))
    want = 0.01 * correction * 0.1 * magnitude / (np.sqrt(0.001) * magnitude + epsilon)
    np.testing.assert_allclose(moved, want, rtol=1e-4)


def test_epsilon_must_be_positive():
    with pytest.raises(ValueError, match="epsilon must be positive, got epsilon=0"):
        create_optimizer(0.01, 10, 0, "adamw_bias_corrected", epsilon=0.0)


def _torch_adamw(init, grads, lrs, epsilon_at_step):
    """torch.optim.AdamW over the same gradients, clipped by torch.nn.utils.clip_grad_norm_, the
    decayed and the excluded variables in two parameter groups."""
    torch = require("torch")
    params = [torch.nn.Parameter(torch.tensor(w)) for w in init]
    optimizer = torch.optim.AdamW(
        [{"params": [p for p, d in zip(params, _DECAYED) if d], "weight_decay": 0.01},
         {"params": [p for p, d in zip(params, _DECAYED) if not d], "weight_decay": 0.0}],
        lr=0.0, betas=(0.9, 0.999), eps=1e-6)
    for t, (values, lr) in enumerate(zip(grads, lrs), start=1):
        for param, g in zip(params, values):
            param.grad = torch.tensor(g)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        for group in optimizer.param_groups:
            group["lr"], group["eps"] = lr, epsilon_at_step(t)
        optimizer.step()
    return [p.detach().numpy() for p in params]


def test_bias_corrected_adamw_equals_torch_adamw_but_for_where_epsilon_goes():
    """Against the real torch.optim.AdamW on the same gradients. The formulas agree but for
    epsilon, added to sqrt(v) here and to sqrt(v_hat) by PyTorch: given epsilon / sqrt(1 - b2^t)
    at step t, PyTorch takes our steps to float32 round-off; given our epsilon, it differs by
    what the formula says, most on the variable whose gradients are 1e-4."""
    rng = np.random.default_rng(6)
    shapes = [(4, 3), (3,), (3,), (2, 3)]
    init = [rng.normal(size=s).astype(np.float32) for s in shapes]
    grads = _gradients(rng, shapes, 6)
    ours, lrs = _run_bias_corrected(init, grads)
    matched = _torch_adamw(init, grads, lrs, lambda t: 1e-6 / np.sqrt(1 - 0.999 ** t))
    # Weights of about 1 moved by about 1e-2 in 6 steps: a few float32 ulps apart.
    for path, a, b in zip(_PATHS, ours, matched):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=5e-7, err_msg=path)
    same_epsilon = _torch_adamw(init, grads, lrs, lambda t: 1e-6)
    expected_difference = [
        a - b for a, b in zip(_bias_corrected_reference(init, grads, lrs, _DECAYED),
                              _bias_corrected_reference(init, grads, lrs, _DECAYED,
                                                        epsilon_on="sqrt_v_hat"))]
    for path, a, b, want in zip(_PATHS, ours, same_epsilon, expected_difference):
        np.testing.assert_allclose(a - b, want, rtol=0, atol=1e-6, err_msg=path)
    assert np.abs(expected_difference[0]).max() > 1e-3  # the 1e-4 gradients: a real difference


def _train_tiny_classifier(output_dir, steps, total_steps=8):
    """A tiny classifier trained by the training loop with adamw_bias_corrected, stopping at
    `steps` of a schedule of `total_steps` (a rerun of the same command resumes)."""
    from modeling import losses
    from modeling.config import BertConfig
    from modeling.models.task_models import BertClassifier
    from running.batching import ArrayExamples
    from training import trainer

    keras.utils.set_random_seed(7)
    config = BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    ids = np.random.default_rng(0).integers(1, 30, (32, 8)).astype(np.int32)
    arrays = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": 0 * ids,
              "label_ids": (ids[:, 0] > 15).astype(np.int32)}

    def loss_fn(outputs, batch, normaliser):
        return {"loss": losses.mean_cross_entropy(outputs["logits"], batch["label_ids"],
                                                  normaliser.global_batch_size(batch))}
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = BertClassifier(config, 2)
        optimizer = create_optimizer(1e-3, total_steps, 2, optimizer_type="adamw_bias_corrected")
    dataset_fn = ArrayExamples(arrays).training_dataset_fn(8, seed=3)
    trainer.Trainer(strategy, model, optimizer, loss_fn, trainer.TrainingConfig(
        steps, str(output_dir), save_checkpoints_steps=2)).train(dataset_fn, 8)
    return [v.numpy() for v in model.weights], optimizer


def test_bias_corrected_adamw_resumed_run_equals_an_uninterrupted_one(tmp_path):
    """The step count of the bias correction is the optimizer's, restored with it: a run stopped
    at step 4 and rerun ends where an uninterrupted one does."""
    straight, _ = _train_tiny_classifier(tmp_path / "straight", 8)
    _train_tiny_classifier(tmp_path / "resumed", 4)
    resumed, optimizer = _train_tiny_classifier(tmp_path / "resumed", 8)
    assert int(optimizer.iterations.numpy()) == 8
    for a, b in zip(straight, resumed):
        np.testing.assert_allclose(a, b, atol=1e-6)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(restored, BiasCorrectedAdamWeightDecay)
    assert restored.get_config() == optimizer.get_config()


def test_config_round_trip():
    optimizer = create_optimizer(2e-5, 100, 10, optimizer_type="lamb", weight_decay_rate=0.02,
                                 clip_norm=None, exclude_from_weight_decay=["bias"])
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(restored, Lamb)
    assert restored.get_config() == optimizer.get_config()
    assert float(restored.learning_rate) == float(optimizer.learning_rate) == 0.0


def test_bad_arguments_name_the_value_and_the_choices():
    with pytest.raises(ValueError, match=r"optimizer_type='adam'.*"
                                         r"\('adamw', 'adamw_bias_corrected', 'lamb'\)"):
        create_optimizer(1e-4, 10, 1, optimizer_type="adam")
    with pytest.raises(ValueError, match="global_clipnorm.*clip_norm"):
        AdamWeightDecay(global_clipnorm=1.0)
    with pytest.raises(ValueError, match="clip_norm=0"):
        AdamWeightDecay(clip_norm=0)


def mirrored_trajectory_check(fixtures_dir: str, xla_update_min_elements: int) -> None:
    """Two replicas each given half of every gradient reproduce the one-device trajectory, and
    each replica's copies of the variables and slots stay equal.

    Runs in a fresh process: the two logical CPUs must be declared before TF initialises.
    """
    moment_optimizer._XLA_UPDATE_MIN_ELEMENTS = xla_update_min_elements
    in_place_updates = []  # one per replica and variable, where the in-place path is taken
    in_place = moment_optimizer._in_place
    moment_optimizer._in_place = lambda values_fn: lambda *args: (
        in_place_updates.append(args[0].device), in_place(values_fn)(*args))
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    arrays, meta, names = load_golden(fixtures_dir)
    for use_loss_scale in (False, True):
        with strategy.scope():
            variables = golden_variables(arrays, names)
            optimizer = create_optimizer(1e-3, 10, 3, use_loss_scale=use_loss_scale)
            optimizer.build(variables)
        inner = optimizer.inner_optimizer if use_loss_scale else optimizer

        @tf.function
        def train_step(grads):
            strategy.run(lambda g: optimizer.apply(g, variables), args=(grads,))

        for step in range(len(meta["steps"])):
            scale = float(optimizer.dynamic_scale.numpy()) if use_loss_scale else 1.0
            halves = golden_grads(arrays, names, step, scale=scale / 2)
            train_step(strategy.experimental_distribute_values_from_function(lambda _: halves))
            assert_matches_step(arrays, names, step, variables, inner.moment_slots())
        slots = [slot for pair in inner.moment_slots().values() for slot in pair]
        for variable in variables + slots:
            replicas = strategy.experimental_local_results(variable.value)
            np.testing.assert_array_equal(replicas[0].numpy(), replicas[1].numpy())
    if xla_update_min_elements == 0:
        assert len(set(in_place_updates)) == 2, in_place_updates
    # A slot without a copy on the variable's device: no in-place update (the plain ops instead).
    with tf.device("/cpu:1"):
        elsewhere = tf.Variable(0.0)
    with tf.device("/cpu:0"):
        slot = keras.Variable(0.0)
    assert moment_optimizer._on_device_of(elsewhere, slot) is None
    (found,) = moment_optimizer._on_device_of(slot.value, slot)
    assert found is slot.value


@pytest.mark.slow
@pytest.mark.parametrize("xla_update_min_elements", [1 << 62, 0], ids=["plain_ops", "xla_update"])
def test_mirrored_strategy_two_replicas_match_one_device(fixtures_dir, xla_update_min_elements):
    code = ("import sys; sys.path[:0] = [sys.argv[1]]; "
            "from tests.training import test_optimizer; "
            "test_optimizer.mirrored_trajectory_check(sys.argv[2], int(sys.argv[3]))")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, "-c", code, str(REPO_ROOT), str(fixtures_dir),
                             str(xla_update_min_elements)],
                            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
