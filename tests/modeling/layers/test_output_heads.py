"""`OutputProjection` and `MaskedLMHead`, and the masked-LM head's tie to the word embeddings."""
import numpy as np
import pytest
import tensorflow as tf

from modeling.config import BertConfig
from modeling.layers.output_heads import MaskedLMHead, OutputProjection
from modeling.models.pretrainer import BertPretrainer
from tests.support.layer_reference import randomize

V, H = 11, 8


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _layer_norm(x, gamma, beta):
    centered = x - x.mean(-1, keepdims=True)
    return centered / np.sqrt((centered ** 2).mean(-1, keepdims=True) + 1e-12) * gamma + beta


def _masked_lm_reference(head, sequence_output, positions, table):
    """gather -> dense + GELU -> LayerNorm -> table^T + bias, in float64."""
    hidden = np.take_along_axis(sequence_output, positions[..., None], axis=1)  # [B, P, H]
    kernel, bias = head.transform.get_weights()
    gamma, beta = head.layer_norm.get_weights()
    hidden = _layer_norm(_gelu(hidden.astype(np.float64) @ kernel + bias), gamma, beta)
    return hidden @ np.asarray(table, np.float64).T + head.output_bias.numpy()


def test_output_projection_hand_computed():
    layer = OutputProjection(3, 2, 0.02)
    layer.build(None)
    layer.output_weights.assign([[1.0, 0.0], [0.0, 1.0], [1.0, -1.0]])
    layer.output_bias.assign([0.5, 0.0, -1.0])
    logits = layer(tf.constant([[2.0, 3.0], [-1.0, 4.0]])).numpy()
    np.testing.assert_allclose(logits, [[2.5, 3.0, -2.0], [-0.5, 4.0, -6.0]], atol=1e-6)


def test_output_projection_without_bias_and_on_sequences():
    layer = OutputProjection(2, 4, 0.02, use_bias=False, name="squad")
    layer.build(None)
    assert [w.path for w in layer.weights] == ["squad/output_weights"]
    weights = layer.output_weights.numpy()
    assert weights.shape == (2, 4)
    x = np.random.default_rng(0).normal(size=(3, 5, 4)).astype(np.float32)
    logits = layer(x).numpy()
    assert logits.shape == (3, 5, 2)
    np.testing.assert_allclose(logits, x @ weights.T, atol=1e-5)


@pytest.mark.parametrize("layer_class,args", [
    (OutputProjection, (3, H, 0.02)), (MaskedLMHead, (V, H, "gelu", 0.02))])
def test_logits_are_float32_under_mixed_bfloat16(layer_class, args):
    layer = layer_class(*args, dtype="mixed_bfloat16")
    layer.build(None)
    hidden = tf.constant(np.random.default_rng(1).normal(size=(2, 4, H)), tf.bfloat16)
    if layer_class is MaskedLMHead:
        table = np.random.default_rng(2).normal(size=(V, H)).astype(np.float32)
        logits = layer(hidden, tf.constant([[0, 2], [3, 3]]), table)
        assert logits.shape == (2, 2, V)
    else:
        logits = layer(hidden)
        assert logits.shape == (2, 4, 3)
    assert logits.dtype == tf.float32


def test_masked_lm_head_matches_numpy():
    head = MaskedLMHead(V, H, "gelu", 0.02)
    head.build(None)
    randomize(head, seed=3)
    rng = np.random.default_rng(4)
    sequence_output = rng.normal(size=(2, 6, H)).astype(np.float32)
    table = rng.normal(size=(V, H)).astype(np.float32)
    positions = np.array([[1, 5, 0], [4, 0, 0]], np.int32)  # trailing zeros are padding slots
    logits = head(sequence_output, positions, table).numpy()
    assert logits.shape == (2, 3, V)
    np.testing.assert_allclose(logits, _masked_lm_reference(head, sequence_output, positions,
                                                            table), atol=1e-4)
    # Padding slots point at position 0 and score what position 0 scores.
    np.testing.assert_array_equal(logits[1, 1], logits[1, 2])


def test_masked_lm_head_owns_no_vocabulary_matrix():
    head = MaskedLMHead(V, H, "gelu", 0.02, name="masked_lm")
    head.build(None)
    assert {w.path: tuple(w.shape) for w in head.weights} == {
        "masked_lm/transform/kernel": (H, H), "masked_lm/transform/bias": (H,),
        "masked_lm/layer_norm/gamma": (H,), "masked_lm/layer_norm/beta": (H,),
        "masked_lm/output_bias": (V,)}


@pytest.fixture(scope="module")
def pretrainer():
    config = BertConfig(vocab_size=V, hidden_size=H, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=16, type_vocab_size=2,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                        initializer_range=0.5)
    model = BertPretrainer(config)
    randomize(model.masked_lm, seed=5)
    return model


def _pretraining_inputs():
    ids = np.array([[2, 5, 6, 3, 0], [2, 7, 3, 0, 0]], np.int32)
    return {"input_ids": ids, "input_mask": (ids > 0).astype(np.int32),
            "segment_ids": np.zeros_like(ids), "masked_lm_positions": np.array([[1, 2], [1, 0]])}


def test_masked_lm_output_projection_is_the_word_embedding_table(pretrainer):
    inputs = _pretraining_inputs()
    outputs = pretrainer(inputs, training=False)
    table = pretrainer.encoder.embeddings.word_embeddings
    assert pretrainer.encoder.word_embeddings is table
    sequence_output = pretrainer.encoder(
        {k: v for k, v in inputs.items() if k != "masked_lm_positions"})["sequence_output"]
    expected = _masked_lm_reference(pretrainer.masked_lm, sequence_output.numpy(),
                                    inputs["masked_lm_positions"], table.numpy())
    np.testing.assert_allclose(outputs["masked_lm_logits"].numpy(), expected, atol=1e-4)
    assert outputs["next_sentence_logits"].shape == (2, 2)
    # The only [V, H] matrix of the model is the embedding table.
    assert [w.path for w in pretrainer.weights if tuple(w.shape) == (V, H)] == [
        "embeddings/word_embeddings"]


def test_masked_lm_loss_trains_rows_of_tokens_absent_from_the_input(pretrainer):
    inputs = _pretraining_inputs()
    table = pretrainer.encoder.word_embeddings
    with tf.GradientTape() as tape:
        logits = pretrainer(inputs, training=False)["masked_lm_logits"]
        score = tf.reduce_sum(logits * np.random.default_rng(6).normal(size=logits.shape))
    gradient = tf.convert_to_tensor(tape.gradient(score, table.value)).numpy()
    absent = sorted(set(range(V)) - set(inputs["input_ids"].ravel()))
    # Rows of tokens that are not in the input get a gradient only through the output projection.
    assert (np.abs(gradient[absent]).max(-1) > 1e-6).all()
