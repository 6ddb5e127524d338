"""The encoder and heads under the mixed bfloat16 policy, against the original code's float32 outputs.

bfloat16 keeps 8 significant bits: each rounding has a relative error of at most u = 2^-8. The
embeddings round once (after LayerNorm) and every Transformer layer adds a few roundings in a chain
(projections, scores, probabilities, context, feed-forward, each LayerNorm output), so the bound
grows with depth: the root-mean-square error of stage s (s = 1 for the embedding output, s = 2 + i
for layer i) is at most 2 u s of the reference's root-mean-square, and no element is off by more
than 16 u s (LayerNorm keeps the hidden states near unit scale). Masked-LM log-probabilities, which
come out of a 128-term dot product with bfloat16 inputs, stay within 32 u (max) and 8 u (RMS).
"""
import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.checkpoints.tf1.checkpoint import load_tf1_checkpoint
from modeling.models.pretrainer import BertPretrainer, pretraining_losses
from tests.support.modeling_fixtures import (at_real_tokens, golden, golden_inputs, tiny_config,
                                             tiny_dir)
from utils.encoder_inputs import ENCODER_INPUTS

UNIT_ROUNDOFF = 2.0 ** -8


@pytest.fixture(params=[True, False], ids=["packed", "padded"])
def mixed_pretrainer(fixtures_dir, request):
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    try:
        model = BertPretrainer(tiny_config(fixtures_dir), packed=request.param)
        load_tf1_checkpoint(model, str(tiny_dir(fixtures_dir) / "bert_model.ckpt"))
        yield model
    finally:
        keras.mixed_precision.set_dtype_policy("float32")


def _assert_within(actual, expected, stage: int):
    actual = tf.cast(actual, tf.float32).numpy()
    error = actual - expected
    rms = np.sqrt(np.mean(error ** 2)) / np.sqrt(np.mean(expected ** 2))
    assert rms <= 2 * UNIT_ROUNDOFF * stage, (stage, rms)
    assert np.abs(error).max() <= 16 * UNIT_ROUNDOFF * stage, (stage, np.abs(error).max())


@pytest.mark.parametrize("length", [16, 64])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_mixed_bfloat16_outputs_within_the_bfloat16_bound(mixed_pretrainer, fixtures_dir,
                                                          length, jit_compile):
    values = golden(fixtures_dir, length)
    encoder = mixed_pretrainer.encoder
    run = tf.function(lambda x: {**encoder({k: x[k] for k in ENCODER_INPUTS}, training=False),
                                 **mixed_pretrainer(x, training=False)}, jit_compile=jit_compile)
    outputs = run(golden_inputs(values))
    assert outputs["sequence_output"].dtype == tf.bfloat16
    assert mixed_pretrainer.encoder.word_embeddings.dtype == "float32"
    # The packed encoder gives zeros at padding: the same relative error, at the real tokens.
    expected = values["embedding_output"], values["all_encoder_layers"]
    if mixed_pretrainer.encoder.packed:
        expected = tuple(at_real_tokens(v, values["inputs/input_mask"]) for v in expected)
    _assert_within(outputs["embedding_output"], expected[0], 1)
    for index, layer_output in enumerate(outputs["encoder_outputs"]):
        _assert_within(layer_output, expected[1][index], index + 2)
    log_probs = tf.nn.log_softmax(outputs["masked_lm_logits"]).numpy().reshape(
        values["masked_lm_log_probs"].shape)
    error = log_probs - values["masked_lm_log_probs"]
    assert np.abs(error).max() <= 32 * UNIT_ROUNDOFF
    assert np.sqrt(np.mean(error ** 2)) <= 8 * UNIT_ROUNDOFF


def test_mixed_bfloat16_loss_within_bound_and_gradients_float32(mixed_pretrainer, fixtures_dir):
    values = golden(fixtures_dir, 16)
    batch = {**golden_inputs(values),
             **{k: tf.constant(values["inputs/" + k]) for k in
                ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")}}

    @tf.function
    def gradients():
        with tf.GradientTape() as tape:
            logs = pretraining_losses(mixed_pretrainer(batch, training=False), batch)
        return logs["loss"], tape.gradient(logs["loss"], mixed_pretrainer.trainable_variables)

    loss, grads = gradients()
    assert abs(float(loss) / float(values["total_loss"]) - 1.0) <= 4 * UNIT_ROUNDOFF
    assert all(g.dtype == tf.float32 for g in grads)
    assert all(np.all(np.isfinite(tf.convert_to_tensor(g).numpy())) for g in grads)
