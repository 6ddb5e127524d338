import logging

import numpy as np
import pytest
import tensorflow as tf

from modeling.checkpoints import CheckpointMismatchError, save_tf1_checkpoint
from modeling.checkpoints.names import tf1_name_map
from modeling.checkpoints.tf1.checkpoint import load_tf1_checkpoint, read_tf1_checkpoint
from modeling.config import BertConfig
from modeling.models.encoder import BertEncoder
from modeling.models.pretrainer import BertPretrainer
from modeling.models.task_models import BertClassifier, BertSpanLabeler
from tests.support.modeling_fixtures import tiny_config, tiny_dir
from training.optimizer import AdamWeightDecay


def _small_config(**overrides):
    values = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=32, max_position_embeddings=20, type_vocab_size=2)
    return BertConfig(**{**values, **overrides})


def _snapshot(model):
    return {v.path: v.numpy().copy() for v in model.weights}


def test_every_variable_of_every_model_maps_to_a_distinct_original_name(fixtures_dir):
    config = tiny_config(fixtures_dir)
    import json
    expected = json.loads((tiny_dir(fixtures_dir) / "variables.json").read_text())
    for model, key in [(BertPretrainer(config), "bert_model.ckpt"),
                       (BertClassifier(config, 3), "classifier/model.ckpt"),
                       (BertSpanLabeler(config), "squad/model.ckpt")]:
        mapping = tf1_name_map(model)
        assert {n: list(v.shape) for n, v in mapping.items()} == dict(
            (n, s) for n, s in expected[key])


def test_round_trip_is_exact_and_readable_by_name(tmp_path, fixtures_dir):
    config = tiny_config(fixtures_dir)
    original = read_tf1_checkpoint(str(tiny_dir(fixtures_dir) / "bert_model.ckpt"))
    model = BertPretrainer(config)
    load_tf1_checkpoint(model, str(tiny_dir(fixtures_dir)))
    prefix = save_tf1_checkpoint(model, str(tmp_path / "bert_model.ckpt"), global_step=7)
    reader = tf.train.load_checkpoint(str(tmp_path))
    assert reader.get_tensor("global_step") == 7
    written = read_tf1_checkpoint(prefix)
    assert sorted(written) == sorted(original)
    for name, value in original.items():
        assert written[name].dtype == value.dtype
        np.testing.assert_array_equal(written[name], value)
    again = BertPretrainer(config)
    load_tf1_checkpoint(again, prefix)
    for a, b in zip(model.weights, again.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not list(tmp_path.glob("*.tmp*"))


def test_missing_and_misshapen_variables_are_listed_and_nothing_is_loaded(tmp_path):
    source = BertEncoder(_small_config())
    prefix = save_tf1_checkpoint(source, str(tmp_path / "bert_model.ckpt"))
    target = BertPretrainer(_small_config(intermediate_size=48))
    before = _snapshot(target)
    with pytest.raises(CheckpointMismatchError) as error:
        load_tf1_checkpoint(target, prefix)
    message = str(error.value)
    assert "cls/predictions/output_bias: missing" in message
    assert "cls/seq_relationship/output_weights: missing" in message
    assert "bert/encoder/layer_1/intermediate/dense/kernel: checkpoint shape (16, 32), " \
           "model shape (16, 48)" in message
    for path, value in _snapshot(target).items():
        np.testing.assert_array_equal(value, before[path])


def test_vocab_size_mismatch_says_so(tmp_path):
    prefix = save_tf1_checkpoint(BertEncoder(_small_config()), str(tmp_path / "bert_model.ckpt"))
    with pytest.raises(CheckpointMismatchError, match="vocab_size mismatch.*vocab_size=41.*40 rows"):
        load_tf1_checkpoint(BertEncoder(_small_config(vocab_size=41)), prefix)


def test_unused_variables_warn_by_name(fixtures_dir, caplog):
    encoder = BertEncoder(tiny_config(fixtures_dir))
    with caplog.at_level(logging.WARNING):
        unused = load_tf1_checkpoint(encoder, str(tiny_dir(fixtures_dir) / "classifier"))
    assert unused == ["output_bias", "output_weights"]
    assert "output_weights" in caplog.text


def test_third_party_checkpoint_with_optimizer_slots_loads(shared_data_dir, caplog):
    folder = shared_data_dir / "checkpoints" / "keras-bert-test_checkpoint"
    config = BertConfig.from_json_file(folder / "bert_config.json")
    model = BertPretrainer(config)
    with caplog.at_level(logging.WARNING):
        unused = load_tf1_checkpoint(model, str(folder / "bert_model.ckpt"))
    assert unused == [] and "adam" not in caplog.text
    reader = tf.train.load_checkpoint(str(folder / "bert_model.ckpt"))
    np.testing.assert_array_equal(
        model.encoder.word_embeddings.numpy(), reader.get_tensor("bert/embeddings/word_embeddings"))
    ids = np.array([[1, 2, 3, 0]], np.int32)
    outputs = model({"input_ids": ids, "input_mask": (ids > 0).astype(np.int32),
                     "segment_ids": 0 * ids, "masked_lm_positions": np.array([[1]], np.int32)})
    assert np.isfinite(outputs["masked_lm_logits"]).all()


def test_moments_are_written_under_the_original_slot_names(tmp_path):
    model = BertEncoder(_small_config(num_hidden_layers=1))
    query = "layer_0/attention/query/kernel"
    path = next(v.path for v in model.weights if v.path.endswith(query))
    m, v = np.full((16, 16), 0.25, np.float32), np.full((16, 16), 0.5, np.float32)
    prefix = save_tf1_checkpoint(model, str(tmp_path / "bert_model.ckpt"), global_step=7,
                                 moments={path: (m, tf.Variable(v))})
    reader = tf.train.load_checkpoint(prefix)
    name = "bert/encoder/layer_0/attention/self/query/kernel"
    assert sorted(set(reader.get_variable_to_shape_map()) - set(tf1_name_map(model))) == [
        f"{name}/adam_m", f"{name}/adam_v", "global_step"]
    np.testing.assert_array_equal(reader.get_tensor(f"{name}/adam_m"), m)
    np.testing.assert_array_equal(reader.get_tensor(f"{name}/adam_v"), v)
    # The slots are optimizer state: reading the checkpoint back skips them.
    assert set(read_tf1_checkpoint(prefix)) == set(tf1_name_map(model))


def test_every_moment_of_the_optimizer_is_written_beside_its_variable(tmp_path):
    model = BertEncoder(_small_config(num_hidden_layers=1))
    optimizer = AdamWeightDecay(learning_rate=1e-3)
    optimizer.build(model.trainable_variables)
    prefix = save_tf1_checkpoint(model, str(tmp_path / "bert_model.ckpt"),
                                 moments=optimizer.moment_slots())
    names = set(tf.train.load_checkpoint(prefix).get_variable_to_shape_map())
    for name in tf1_name_map(model):
        assert {f"{name}/adam_m", f"{name}/adam_v"} <= names, name
    assert len(names) == 3 * len(tf1_name_map(model))


def test_a_prefix_without_a_folder_is_written_under_its_own_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    encoder = BertEncoder(_small_config())
    save_tf1_checkpoint(encoder, "bert_model.ckpt")
    assert sorted(path.name for path in tmp_path.glob("bert_model.ckpt*")) == [
        "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index"]
    restored = BertEncoder(_small_config())
    load_tf1_checkpoint(restored, "bert_model.ckpt")
    for ours, theirs in zip(restored.weights, encoder.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
