import numpy as np
import pytest
import tensorflow as tf

from modeling.checkpoints.tf1.checkpoint import load_tf1_checkpoint
from modeling import losses
from modeling.config import BertConfig
from modeling.models.task_models import (BertClassifier, BertMultipleChoice, BertSpanLabeler,
                                         BertTokenClassifier)
from tests.support.modeling_fixtures import golden, golden_inputs, tiny_config, tiny_dir


def _encoder_inputs(values):
    inputs = golden_inputs(values)
    return {k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids")}


@pytest.mark.parametrize("length", [16, 64])
def test_classifier_matches_the_original(fixtures_dir, length):
    model = BertClassifier(tiny_config(fixtures_dir), num_labels=3)
    load_tf1_checkpoint(model, str(tiny_dir(fixtures_dir) / "classifier" / "model.ckpt"))
    values = golden(fixtures_dir, length)
    logits = model(_encoder_inputs(values), training=False)["logits"]
    np.testing.assert_allclose(logits, values["classifier_logits"], atol=1e-5)
    np.testing.assert_allclose(tf.nn.softmax(logits), values["classifier_probabilities"],
                               atol=1e-5)
    loss = losses.mean_cross_entropy(logits, values["inputs/classifier_labels"])
    np.testing.assert_allclose(loss, values["classifier_loss"], rtol=1e-5)


@pytest.mark.parametrize("length", [16, 64])
def test_span_labeler_matches_the_original(fixtures_dir, length):
    model = BertSpanLabeler(tiny_config(fixtures_dir))
    load_tf1_checkpoint(model, str(tiny_dir(fixtures_dir) / "squad" / "model.ckpt"))
    values = golden(fixtures_dir, length)
    outputs = tf.function(lambda x: model(x, training=False), jit_compile=True)(
        _encoder_inputs(values))
    np.testing.assert_allclose(outputs["start_logits"], values["squad_start_logits"], atol=1e-5)
    np.testing.assert_allclose(outputs["end_logits"], values["squad_end_logits"], atol=1e-5)


def test_span_loss_is_the_mean_of_start_and_end_cross_entropy():
    start = tf.constant([[0.0, 1.0, 2.0]])
    end = tf.constant([[3.0, 0.0, 0.0]])
    expected_start = -np.log(np.exp(1.0) / np.exp([0.0, 1.0, 2.0]).sum())
    expected_end = -np.log(np.exp(3.0) / np.exp([3.0, 0.0, 0.0]).sum())
    loss = losses.span_loss(start, end, tf.constant([1]), tf.constant([0]))
    np.testing.assert_allclose(loss, (expected_start + expected_end) / 2, rtol=1e-6)


def test_multiple_choice_scores_each_choice_with_one_vector():
    config = BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    model = BertMultipleChoice(config)
    ids = np.arange(2 * 4 * 5).reshape(2, 4, 5).astype(np.int32) % 30
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": 0 * ids}
    logits = model(inputs)["logits"]
    assert logits.shape == (2, 4)
    assert [v.path for v in model.head.weights] == ["multiple_choice/output_weights"]
    pooled = model.encoder({k: v.reshape(8, 5) for k, v in inputs.items()})["pooled_output"]
    expected = pooled.numpy() @ model.head.output_weights.numpy().T
    np.testing.assert_allclose(logits, expected.reshape(2, 4), atol=1e-5)


def test_token_classifier_loss_ignores_unlabelled_tokens():
    logits = tf.constant([[[2.0, 0.0], [0.0, 0.0], [5.0, -5.0]]])
    labels = tf.constant([[0, -1, 1]])
    expected = (-np.log(np.exp(2) / (np.exp(2) + 1)) - np.log(np.exp(-5) / (np.exp(5) +
                                                                            np.exp(-5)))) / 2
    np.testing.assert_allclose(losses.token_cross_entropy(logits, labels), expected, rtol=1e-5)
    config = BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32)
    model = BertTokenClassifier(config, num_labels=9)
    ids = np.ones((2, 6), np.int32)
    assert model({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids})[
        "logits"].shape == (2, 6, 9)
