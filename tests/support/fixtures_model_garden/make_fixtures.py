"""Writes the Model Garden fixtures of tests/modeling/checkpoints/test_model_garden.py with Model
Garden's own code.

Needs `tf-models-nightly` (and the `tf-keras` it brings), kept out of the project's environment:

    python3 -m venv /tmp/mg_venv && /tmp/mg_venv/bin/pip install tf-models-nightly
    TF_USE_LEGACY_KERAS=1 /tmp/mg_venv/bin/python \
        tests/support/fixtures_model_garden/make_fixtures.py

Writes, beside this script, a tiny `BertEncoder` and a `BertPretrainerV2` (masked-LM and
next-sentence heads) with random weights, saved as the releases were made:
- `encoder/`: `bert_model.ckpt` (object-based, `tf.train.Checkpoint(encoder=...)`), `params.yaml`
  (the experiment config's `task.model`), `vocab.txt`;
- `pretrainer/`: `bert_model.ckpt` (`tf.train.Checkpoint(model=...)`, as training writes it),
  `params.yaml`, `vocab.txt`;
- `hub_encoder/`: the encoder exported by `official/nlp/tools/export_tfhub_lib.py` (a TF-Hub BERT
  encoder SavedModel: input_word_ids/input_mask/input_type_ids -> pooled_output, sequence_output,
  encoder_outputs);
- `hub_masked_lm/`: the pretrainer's encoder and masked-LM exported by `export_tfhub_lib.py`
  `with_mlm=True` (its `mlm` signature adds `masked_lm_positions` -> `mlm_logits`), from the
  checkpoint of the pretrainer's `checkpoint_items` (`encoder=`, `masked_lm=`);
- `outputs.npz`: fixed inputs and Model Garden's outputs on them; `outputs_hub_masked_lm.npz`:
  the `mlm` signature's outputs on the same inputs.

`python make_fixtures.py hub_masked_lm` writes only the last two, from `pretrainer/`.
"""
import os
import shutil
import sys

import numpy as np
import tensorflow as tf
import tf_keras
import yaml
from official.legacy.bert import configs as legacy_configs
from official.modeling import tf_utils
from official.nlp.modeling import layers, models, networks
from official.nlp.tools import export_tfhub_lib

HERE = os.path.dirname(os.path.abspath(__file__))
ENCODER_CONFIG = dict(  # official.nlp.configs.encoders.BertEncoderConfig
    vocab_size=100, hidden_size=32, num_layers=2, num_attention_heads=4, hidden_activation="gelu",
    intermediate_size=64, dropout_rate=0.1, attention_dropout_rate=0.1,
    max_position_embeddings=16, type_vocab_size=2, initializer_range=0.02, embedding_size=None,
    output_range=None, return_all_encoder_outputs=False, return_attention_scores=False,
    return_word_embeddings=False, norm_first=False)


def build_encoder(cfg):
    """As official.nlp.configs.encoders.build_encoder builds the `bert` type."""
    return networks.BertEncoder(
        vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"],
        num_layers=cfg["num_layers"], num_attention_heads=cfg["num_attention_heads"],
        intermediate_size=cfg["intermediate_size"],
        activation=tf_utils.get_activation(cfg["hidden_activation"]),
        dropout_rate=cfg["dropout_rate"], attention_dropout_rate=cfg["attention_dropout_rate"],
        max_sequence_length=cfg["max_position_embeddings"],
        type_vocab_size=cfg["type_vocab_size"],
        initializer=tf_keras.initializers.TruncatedNormal(stddev=cfg["initializer_range"]),
        embedding_width=cfg["embedding_size"], dict_outputs=True, norm_first=cfg["norm_first"])


def randomize(model, rng):
    """Random values everywhere (LayerNorm and biases too), so that no mapping error hides."""
    for variable in model.weights:
        variable.assign(rng.normal(0, 0.2, variable.shape).astype(np.float32))


def inputs(cfg, rng):
    batch, length = 3, 10
    input_mask = np.ones([batch, length], np.int32)
    input_mask[1, 6:] = 0
    input_mask[2, 3:] = 0
    word_ids = rng.integers(1, cfg["vocab_size"], [batch, length]).astype(np.int32) * input_mask
    type_ids = (np.arange(length)[None, :] >= 4).astype(np.int32) * input_mask
    positions = rng.integers(0, 6, [batch, 4]).astype(np.int32)
    return dict(input_word_ids=word_ids, input_mask=input_mask, input_type_ids=type_ids,
                masked_lm_positions=positions)


def write_folder(name, checkpoint, params):
    folder = os.path.join(HERE, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    checkpoint.save_counter  # Created, so that it is written as `checkpoint.save` writes it.
    checkpoint.write(os.path.join(folder, "bert_model.ckpt"))
    with open(os.path.join(folder, "params.yaml"), "w", encoding="utf-8") as f:
        yaml.safe_dump({"task": {"model": params}}, f, sort_keys=True)
    write_vocab(os.path.join(folder, "vocab.txt"))
    return folder


def write_vocab(path):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += [f"w{i}" for i in range(ENCODER_CONFIG["vocab_size"] - len(tokens))]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")


def main():
    rng = np.random.default_rng(1234)
    cfg = ENCODER_CONFIG
    features = inputs(cfg, rng)
    encoder_inputs = {k: features[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    encoder_params = {"encoder": {"type": "bert", "bert": cfg}}

    encoder = build_encoder(cfg)
    randomize(encoder, rng)
    folder = write_folder("encoder", tf.train.Checkpoint(encoder=encoder), encoder_params)
    outputs = encoder(encoder_inputs, training=False)
    results = {f"encoder/{k}": outputs[k].numpy() for k in ("sequence_output", "pooled_output")}

    hub_folder = os.path.join(HERE, "hub_encoder")
    shutil.rmtree(hub_folder, ignore_errors=True)
    export_tfhub_lib.export_model(
        hub_folder, bert_config=legacy_bert_config(cfg),
        model_checkpoint_path=os.path.join(folder, "bert_model.ckpt"), with_mlm=False,
        vocab_file=os.path.join(folder, "vocab.txt"), do_lower_case=True)
    hub = tf.saved_model.load(hub_folder)
    hub_outputs = hub(encoder_inputs, training=False)
    results.update({f"hub/{k}": hub_outputs[k].numpy()
                    for k in ("sequence_output", "pooled_output")})

    pretrainer = models.BertPretrainerV2(
        encoder_network=build_encoder(cfg),
        mlm_activation=tf_utils.get_activation(cfg["hidden_activation"]),
        classification_heads=[layers.ClassificationHead(
            inner_dim=cfg["hidden_size"], num_classes=2, dropout_rate=0.1,
            name="next_sentence")])
    pretrainer(features)
    randomize(pretrainer, rng)
    # The next-sentence head reads the encoder's pooler, as in the original.
    pretrainer.classification_heads[0].dense.set_weights(
        pretrainer.encoder_network.pooler_layer.get_weights())
    pretrainer_params = {**encoder_params, "mlm_activation": "gelu", "cls_heads": [
        {"inner_dim": cfg["hidden_size"], "num_classes": 2, "activation": "tanh",
         "dropout_rate": 0.1, "cls_token_idx": 0, "name": "next_sentence"}]}
    write_folder("pretrainer", tf.train.Checkpoint(model=pretrainer), pretrainer_params)
    outputs = pretrainer(features, training=False)
    results.update({f"pretrainer/{k}": outputs[k].numpy()
                    for k in ("sequence_output", "pooled_output", "mlm_logits", "next_sentence")})
    np.savez(os.path.join(HERE, "outputs.npz"), **features, **results)
    write_hub_masked_lm(cfg, features)


def legacy_bert_config(cfg):
    return legacy_configs.BertConfig(
        vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"],
        num_hidden_layers=cfg["num_layers"], num_attention_heads=cfg["num_attention_heads"],
        intermediate_size=cfg["intermediate_size"], hidden_act=cfg["hidden_activation"],
        max_position_embeddings=cfg["max_position_embeddings"],
        type_vocab_size=cfg["type_vocab_size"], initializer_range=cfg["initializer_range"])


def write_hub_masked_lm(cfg, features):
    """`hub_masked_lm/` and its outputs, from the weights of `pretrainer/`."""
    pretrainer = models.BertPretrainerV2(
        encoder_network=build_encoder(cfg),
        mlm_activation=tf_utils.get_activation(cfg["hidden_activation"]))
    pretrainer(features)
    tf.train.Checkpoint(model=pretrainer).read(
        os.path.join(HERE, "pretrainer", "bert_model.ckpt")).expect_partial()
    items = os.path.join(HERE, "hub_masked_lm_items")
    shutil.rmtree(items, ignore_errors=True)
    checkpoint = tf.train.Checkpoint(**pretrainer.checkpoint_items)
    checkpoint.save_counter  # Created, as Google's converter's `checkpoint.save` writes it.
    prefix = checkpoint.write(os.path.join(items, "bert_model.ckpt"))
    folder = os.path.join(HERE, "hub_masked_lm")
    shutil.rmtree(folder, ignore_errors=True)
    export_tfhub_lib.export_model(
        folder, bert_config=legacy_bert_config(cfg), model_checkpoint_path=prefix,
        with_mlm=True, vocab_file=os.path.join(HERE, "pretrainer", "vocab.txt"),
        do_lower_case=True)
    shutil.rmtree(items)
    hub = tf.saved_model.load(folder)
    outputs = hub.mlm(features, training=False)
    np.savez(os.path.join(HERE, "outputs_hub_masked_lm.npz"),
             **{f"hub_masked_lm/{k}": outputs[k].numpy()
                for k in ("sequence_output", "pooled_output", "mlm_logits")})


if __name__ == "__main__":
    if sys.argv[1:] == ["hub_masked_lm"]:
        write_hub_masked_lm(ENCODER_CONFIG, inputs(ENCODER_CONFIG, np.random.default_rng(1234)))
    else:
        main()
