import numpy as np
import pytest
import tensorflow as tf

from modeling.checkpoints.tf1.checkpoint import load_tf1_checkpoint
from modeling.models.pretrainer import BertPretrainer, pretraining_losses
from tests.support.modeling_fixtures import golden, golden_inputs, tiny_config, tiny_dir


@pytest.fixture(scope="module")
def tiny_pretrainer(fixtures_dir):
    model = BertPretrainer(tiny_config(fixtures_dir))
    load_tf1_checkpoint(model, str(tiny_dir(fixtures_dir) / "bert_model.ckpt"))
    return model


def _batch(values):
    return {"masked_lm_ids": values["inputs/masked_lm_ids"],
            "masked_lm_weights": values["inputs/masked_lm_weights"].astype(np.float32),
            "next_sentence_labels": values["inputs/next_sentence_labels"]}


@pytest.mark.parametrize("length", [16, 64])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_heads_and_losses_match_the_original(tiny_pretrainer, fixtures_dir, length, jit_compile):
    values = golden(fixtures_dir, length)
    run = tf.function(lambda x: tiny_pretrainer(x, training=False), jit_compile=jit_compile)
    outputs = run(golden_inputs(values))
    vocab = tiny_pretrainer.config.vocab_size
    mlm_log_probs = tf.nn.log_softmax(outputs["masked_lm_logits"]).numpy().reshape(-1, vocab)
    np.testing.assert_allclose(mlm_log_probs, values["masked_lm_log_probs"], atol=1e-4)
    np.testing.assert_allclose(tf.nn.log_softmax(outputs["next_sentence_logits"]),
                               values["next_sentence_log_probs"], atol=1e-4)
    losses = pretraining_losses(outputs, _batch(values))
    np.testing.assert_allclose(losses["masked_lm_loss"], values["masked_lm_loss"], rtol=1e-5)
    np.testing.assert_allclose(losses["next_sentence_loss"], values["next_sentence_loss"],
                               rtol=1e-5)
    np.testing.assert_allclose(losses["loss"], values["total_loss"], rtol=1e-5)


def test_split_batch_with_global_normalisers_sums_to_the_full_batch_loss(tiny_pretrainer,
                                                                        fixtures_dir):
    values = golden(fixtures_dir, 16)
    outputs = tiny_pretrainer(golden_inputs(values), training=False)
    batch = _batch(values)
    full = pretraining_losses(outputs, batch)["loss"]
    weight_sum = batch["masked_lm_weights"].sum()
    parts = []
    for rows in (slice(0, 1), slice(1, 3)):
        part_outputs = {k: outputs[k][rows] for k in ("masked_lm_logits", "next_sentence_logits")}
        part_batch = {k: v[rows] for k, v in batch.items()}
        parts.append(pretraining_losses(part_outputs, part_batch, weight_sum, 3)["loss"])
    np.testing.assert_allclose(sum(parts), full, rtol=1e-6)


def test_no_next_sentence_ablation_drops_that_loss(tiny_pretrainer, fixtures_dir):
    values = golden(fixtures_dir, 16)
    outputs = tiny_pretrainer(golden_inputs(values), training=False)
    losses = pretraining_losses(outputs, _batch(values), use_next_sentence_label=False)
    np.testing.assert_allclose(losses["loss"], values["masked_lm_loss"], rtol=1e-5)


def test_packed_gradients_of_every_weight_as_padded(tiny_pretrainer, fixtures_dir):
    """The packed encoder's last layer computes the masked positions and the first token only:
    the padded encoder's loss and gradients, to round-off."""
    padded = BertPretrainer(tiny_pretrainer.config, packed=False)
    padded.set_weights(tiny_pretrainer.get_weights())
    values = golden(fixtures_dir, 64)
    batch = {**golden_inputs(values), **_batch(values)}

    def gradients(model):
        with tf.GradientTape() as tape:
            loss = pretraining_losses(model(batch, training=False), batch)["loss"]
        return loss, tape.gradient(loss, model.trainable_variables)
    packed_loss, packed_grads = tf.function(lambda: gradients(tiny_pretrainer))()
    padded_loss, padded_grads = tf.function(lambda: gradients(padded))()
    np.testing.assert_allclose(packed_loss, padded_loss, rtol=1e-6)
    for variable, packed_grad, padded_grad in zip(tiny_pretrainer.trainable_variables,
                                                  packed_grads, padded_grads):
        packed_grad, padded_grad = (np.asarray(tf.convert_to_tensor(g))
                                    for g in (packed_grad, padded_grad))
        scale = np.abs(padded_grad).max()
        np.testing.assert_allclose(packed_grad, padded_grad, rtol=0, atol=2e-6 * scale + 1e-6,
                                   err_msg=variable.path)
