"""Tests of training/fine_tuning.py's batched prediction: outputs in order, traced once per model."""
import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.config import BertConfig
from modeling.task_models import BertClassifier
from training import fine_tuning, xla_choice

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


def test_repeated_predictions_reuse_the_model_traces():
    """Evaluating every epoch must not trace again (TensorFlow's retracing warning)."""
    keras.utils.set_random_seed(0)
    model = BertClassifier(_CONFIG, 3)
    for seed, num_examples in enumerate((11, 9, 13, 11)):
        fine_tuning.predict(model, _arrays(num_examples, seed), batch_size=4)
    # A full batch, then the batch dimension relaxed for the smaller last batches.
    (function,) = fine_tuning._inference_functions[model].values()
    assert function.experimental_get_tracing_count() <= 2
    other = BertClassifier(_CONFIG, 3)
    assert fine_tuning._inference_function(other, False) is not \
        fine_tuning._inference_function(model, False)


@pytest.mark.parametrize("avx512", [False, True])
def test_prediction_compiles_with_xla_where_the_rule_prefers_it(monkeypatch, avx512):
    """A BERT-Base-sized call: XLA on a CPU without AVX-512, a graph on one with it."""
    monkeypatch.setattr(tf.config, "list_logical_devices", lambda device_type=None: [])
    monkeypatch.setattr(xla_choice, "_cpu_has_avx512", lambda: avx512)
    keras.utils.set_random_seed(0)
    model = BertClassifier(dataclasses.replace(_CONFIG, hidden_size=768, num_attention_heads=2,
                                               intermediate_size=32), 3)
    arrays = _arrays(40, seed=1)
    logits = fine_tuning.predict(model, arrays, batch_size=32)["logits"]
    assert list(fine_tuning._inference_functions[model]) == [not avx512]
    np.testing.assert_allclose(logits, model(arrays, training=False)["logits"], atol=1e-5)
