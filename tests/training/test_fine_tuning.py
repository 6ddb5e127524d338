"""Tests of the fine-tuning path: batched prediction (outputs in order, traced once per model),
and the runner driving a task it knows nothing of."""
import dataclasses
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import losses
from modeling.config import BertConfig
from modeling.models.task_models import BertClassifier
from running.batching import FIXED, ArrayExamples, Batching
from running import prediction, xla_choice
from training import fine_tuning
from training.optimizer import create_optimizer
from training.periodic_evaluation import EvaluationPlan
from training.trainer import TrainingConfig

_CONFIG = BertConfig(vocab_size=20, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=16)


def _arrays(num_examples: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    input_mask = (np.arange(8)[None, :] < rng.integers(2, 9, (num_examples, 1))).astype(np.int32)
    return {"input_ids": rng.integers(0, 20, (num_examples, 8)).astype(np.int32) * input_mask,
            "input_mask": input_mask, "segment_ids": np.zeros((num_examples, 8), np.int32)}


def test_predict_returns_every_example_in_order_as_one_call_computes():
    keras.utils.set_random_seed(0)
    model = BertClassifier(_CONFIG, 3)
    arrays = _arrays(11, seed=1)
    logits = fine_tuning.predict(model, arrays, batch_size=4)["logits"]
    expected = model(arrays, training=False)["logits"]
    np.testing.assert_allclose(logits, expected, atol=1e-5)


@pytest.mark.parametrize("batching", [FIXED, Batching(multiple=2)], ids=["fixed", "to_batch"])
def test_repeated_predictions_reuse_the_model_trace(batching):
    """Evaluating every epoch must not trace again (TensorFlow's retracing warning): one trace
    serves every batch size and, when batches are cut to their length, every length."""
    keras.utils.set_random_seed(0)
    model = BertClassifier(_CONFIG, 3)
    for seed, num_examples in enumerate((11, 9, 13, 11)):
        fine_tuning.predict(model, _arrays(num_examples, seed), 4, batching)
    assert prediction.traces(model) == 1
    other = BertClassifier(_CONFIG, 3)
    fine_tuning.predict(other, _arrays(5, 0), 4, batching)
    assert prediction.traces(other) == 1 and prediction.traces(model) == 1


@pytest.mark.parametrize("avx512", [False, True])
def test_prediction_compiles_with_xla_where_the_rule_prefers_it(monkeypatch, avx512):
    """A BERT-Base-sized call: XLA on a CPU without AVX-512, a graph on one with it (the whole
    prediction counted as large enough to repay compiling: the next tests weigh that)."""
    monkeypatch.setattr(tf.config, "list_logical_devices", lambda device_type=None: [])
    monkeypatch.setattr(xla_choice, "_cpu_has_avx512", lambda: avx512)
    monkeypatch.setattr(xla_choice, "UNPAID_COMPILE_WORK", 0)
    keras.utils.set_random_seed(0)
    model = BertClassifier(dataclasses.replace(_CONFIG, hidden_size=768, num_attention_heads=2,
                                               intermediate_size=32), 3)
    arrays = _arrays(40, seed=1)
    logits = fine_tuning.predict(model, arrays, batch_size=32)["logits"]
    assert [jit for jit, _ in prediction._inference_functions[model]] == [not avx512]
    np.testing.assert_allclose(logits, model(arrays, training=False)["logits"], atol=1e-5)


def test_a_few_short_texts_are_a_small_call_for_the_xla_rule(monkeypatch):
    """The rule weighs each call as it is (its rows and their longest length), not batch_size x
    max_seq_length: the BERT-Base-width model above on two short rows compiles with XLA."""
    monkeypatch.setattr(tf.config, "list_logical_devices", lambda device_type=None: [])
    monkeypatch.setattr(xla_choice, "_cpu_has_avx512", lambda: True)
    monkeypatch.setattr(xla_choice, "UNPAID_COMPILE_WORK", 0)
    keras.utils.set_random_seed(0)
    model = BertClassifier(dataclasses.replace(_CONFIG, hidden_size=768, num_attention_heads=2,
                                               intermediate_size=32), 3)
    arrays = {key: value[:2] for key, value in _arrays(40, seed=1).items()}
    logits = fine_tuning.predict(model, arrays, batch_size=32, batching=Batching())["logits"]
    assert [jit for jit, _ in prediction._inference_functions[model]] == [True]
    np.testing.assert_allclose(logits, model(arrays, training=False)["logits"], atol=1e-5)


@pytest.mark.parametrize("unpaid_work, jit", [(None, False), (0, True)])
def test_a_prediction_too_small_to_repay_compiling_runs_as_a_graph(monkeypatch, unpaid_work,
                                                                    jit):
    """On a CPU without AVX-512, where every forward pass is faster with XLA, a prediction whose
    whole work (real tokens x hidden_size^2 x layers) stays below `UNPAID_COMPILE_WORK` runs as
    a graph."""
    monkeypatch.setattr(tf.config, "list_logical_devices", lambda device_type=None: [])
    monkeypatch.setattr(xla_choice, "_cpu_has_avx512", lambda: False)
    if unpaid_work is not None:
        monkeypatch.setattr(xla_choice, "UNPAID_COMPILE_WORK", unpaid_work)
    keras.utils.set_random_seed(0)
    model = BertClassifier(_CONFIG, 3)
    arrays = _arrays(6, seed=2)
    examples = ArrayExamples(arrays, batching=Batching())
    assert examples.total_tokens() == int(arrays["input_mask"].sum())
    assert examples.total_tokens() * 16 ** 2 * 1 < 2 ** 33
    fine_tuning.predict(model, arrays, 4, Batching())
    assert [jit_compile for jit_compile, _ in prediction._inference_functions[model]] == [jit]


def test_under_xla_a_batch_pads_its_rows_to_a_power_of_two(monkeypatch):
    """Calls of any number of rows give XLA only row counts 1, 2, 4, ... up to batch_size (each
    shape compiles once); the padding rows' outputs are dropped before `output_fn` sees them."""
    monkeypatch.setattr(prediction, "_prefers_xla", lambda *args: True)
    keras.utils.set_random_seed(0)
    model = BertClassifier(_CONFIG, 3)
    shapes = []
    outputs = prediction._outputs

    def recording(run, batch, rows, output_fn):
        shapes.append((len(batch["input_ids"]), rows))
        return outputs(run, batch, rows, output_fn)
    monkeypatch.setattr(prediction, "_outputs", recording)
    seen = []

    def count(outputs, batch):
        seen.append((int(outputs["logits"].shape[0]), len(batch["input_ids"])))
        return outputs
    for num_examples in (1, 3, 5, 6, 7, 11):
        arrays = _arrays(num_examples, seed=num_examples)
        logits = fine_tuning.predict(model, arrays, 4, Batching(), output_fn=count)["logits"]
        np.testing.assert_allclose(logits, model(arrays, training=False)["logits"], atol=1e-5)
    assert seen == [(rows, rows) for _, rows in shapes]
    assert {padded for padded, _ in shapes} == {1, 2, 4}
    assert sorted(rows for _, rows in shapes) == sorted(
        [1, 3, 4, 1, 4, 2, 4, 3, 4, 4, 3])
    assert all(padded >= rows for padded, rows in shapes)


# A fifth task, written here as a user would: two labels over a CSV file. It needs its own
# features, model, loss and head description, and nothing in the runner.
_WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "good", "bad", "film", "plot", "very"]


def _csv_task_arrays(path) -> dict[str, np.ndarray]:
    rows = [line.rstrip("\n").split(",") for line in open(path, encoding="utf-8")][1:]
    ids = np.zeros((len(rows), 8), np.int32)
    for row, (text, _) in enumerate(rows):
        tokens = ["[CLS]", *text.split(), "[SEP]"]
        ids[row, :len(tokens)] = [_WORDS.index(token) for token in tokens]
    return {"input_ids": ids, "input_mask": (ids > 0).astype(np.int32),
            "segment_ids": np.zeros_like(ids),
            "label_ids": np.array([int(label) for _, label in rows], np.int32)}


def _csv_task(config: BertConfig) -> fine_tuning.FineTuningTask:
    def loss_fn(outputs, batch, normaliser):
        return {"loss": losses.mean_cross_entropy(outputs["logits"], batch["label_ids"],
                                                  normaliser.global_batch_size(batch))}
    return fine_tuning.FineTuningTask(lambda: BertClassifier(config, 2), loss_fn,
                                      head="two labels: output_weights [2, 16]")


def _csv_run(output_dir) -> fine_tuning.FineTuningRun:
    return fine_tuning.FineTuningRun(
        strategy=tf.distribute.OneDeviceStrategy("/cpu:0"), output_dir=str(output_dir),
        init_checkpoint=None, batch_size=4, seed=1,
        optimizer_fn=lambda steps: create_optimizer(1e-3, steps, 1),
        config_fn=lambda steps: TrainingConfig(steps, str(output_dir)), num_train_epochs=3)


def test_a_new_task_trains_saves_resumes_and_restores_through_the_runner(tmp_path):
    rng = np.random.default_rng(0)
    lines = ["text,label"] + [
        f"{rng.choice(['good', 'bad'])} {rng.choice(['film', 'plot'])} very,{int(i % 2)}"
        for i in range(10)]
    (tmp_path / "train.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    arrays = _csv_task_arrays(tmp_path / "train.csv")
    config = dataclasses.replace(_CONFIG, vocab_size=len(_WORDS))
    keras.utils.set_random_seed(0)
    run, task = _csv_run(tmp_path / "out"), _csv_task(config)
    scored = []

    def evaluate(model, step, suffix):
        scored.append((suffix, step))
        return {"eval_step": step}
    trained = fine_tuning.train(run, task, ArrayExamples(arrays), run.train_steps(10),
                                EvaluationPlan(every_epoch=True, metric="eval_step"), evaluate)
    assert run.train_steps(10) == 7  # int(10 / 4 * 3)
    assert trained.global_step == 7
    assert scored == [("_epoch_1", 2), ("_epoch_2", 5), ("_epoch_3", 7)]
    assert (tmp_path / "out" / "best" / "model_spec.json").is_file()
    with open(tmp_path / "out" / "model_spec.json", encoding="utf-8") as f:
        assert json.load(f)["head"] == "classifier"
    assert (tmp_path / "out" / "bert_config.json").is_file()

    restored = fine_tuning.restore(run, task)
    assert restored.global_step == 7
    expected = fine_tuning.predict(trained.model, arrays, batch_size=3)["logits"]
    np.testing.assert_allclose(fine_tuning.predict(restored.model, arrays, 3)["logits"],
                               expected, atol=1e-6)
    untrained = task.build_model()
    assert np.abs(fine_tuning.predict(untrained, arrays, 3)["logits"] - expected).max() > 1e-4

    again = fine_tuning.train(run, task, ArrayExamples(arrays), 7)  # resumes: already done
    assert again.global_step == 7
    for a, b in zip(again.model.weights, trained.model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_restoring_without_a_fine_tuned_model_names_the_head(tmp_path):
    config = dataclasses.replace(_CONFIG, vocab_size=len(_WORDS))
    (tmp_path / "out").mkdir()
    with pytest.raises(FileNotFoundError, match=r"two labels: output_weights \[2, 16\]"):
        fine_tuning.restore(_csv_run(tmp_path / "out"), _csv_task(config))
