"""Model Garden checkpoints and TF-Hub encoder SavedModels, against Model Garden's own outputs.

The fixtures under tests/support/fixtures_model_garden/ were written by Model Garden's code
(`make_fixtures.py` there, run with tf-models-nightly); `outputs.npz` and
`outputs_hub_masked_lm.npz` hold its outputs.
"""
import shutil

import numpy as np
import pytest
import tensorflow as tf

from modeling.checkpoints import (CheckpointMismatchError, UnsupportedCheckpointError,
                                  detect_format, load_checkpoint, read_model, write_model)
from modeling.checkpoints.formats import HF, MODEL_GARDEN, TF1, TF_HUB
from modeling.checkpoints.model_garden.checkpoint import object_paths
from modeling.checkpoints.names import tf1_name_map
from modeling.config import BertConfig
from modeling.models.encoder import BertEncoder
from tasks.fill_mask import FillMask
from tests.support.paths import MODEL_GARDEN_FIXTURES

OUTPUTS = np.load(MODEL_GARDEN_FIXTURES / "outputs.npz")


def _features(with_positions=False):
    features = {"input_ids": OUTPUTS["input_word_ids"], "input_mask": OUTPUTS["input_mask"],
                "segment_ids": OUTPUTS["input_type_ids"]}
    if with_positions:
        features["masked_lm_positions"] = OUTPUTS["masked_lm_positions"]
    return features


def _at_real_tokens(values) -> np.ndarray:
    """Per-token [B, T, ...] values at the fixture's real tokens: the packed encoder computes
    nothing at padding (its outputs there are zeros)."""
    return np.asarray(values)[OUTPUTS["input_mask"] != 0]


def _at_real_slots(masked_lm_logits) -> np.ndarray:
    """[B, P, V] logits of the masked-LM slots that point at real tokens (the fixture's third
    example asks about two of its padding positions)."""
    real = np.take_along_axis(OUTPUTS["input_mask"], OUTPUTS["masked_lm_positions"], 1) != 0
    return np.asarray(masked_lm_logits)[real]


def _values(model):
    return {name: variable.numpy() for name, variable in tf1_name_map(model).items()}


@pytest.mark.parametrize("folder, expected_format, key", [
    ("encoder", MODEL_GARDEN, "encoder"), ("hub_encoder", TF_HUB, "hub")])
def test_encoder_outputs_equal_model_garden(folder, expected_format, key):
    assert detect_format(str(MODEL_GARDEN_FIXTURES / folder)) == expected_format
    loaded = read_model(str(MODEL_GARDEN_FIXTURES / folder))
    assert loaded.spec.head == "encoder"
    outputs = loaded.model(_features(), training=False)
    np.testing.assert_allclose(_at_real_tokens(outputs["sequence_output"]),
                               _at_real_tokens(OUTPUTS[f"{key}/sequence_output"]), atol=1e-5,
                               rtol=0)
    np.testing.assert_allclose(outputs["pooled_output"].numpy(), OUTPUTS[f"{key}/pooled_output"],
                               atol=1e-5, rtol=0)


def test_tf_hub_config_and_casing_are_read():
    loaded = read_model(str(MODEL_GARDEN_FIXTURES / "hub_encoder"))
    assert loaded.do_lower_case is True
    assert loaded.model.config == BertConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, hidden_act="gelu", max_position_embeddings=16, type_vocab_size=2)


def _with_encoder_outputs(loaded, outputs: dict) -> dict:
    """A pretrainer's `outputs` (its heads') and its encoder's on the fixture features."""
    return {**loaded.model.encoder(_features(), training=False), **outputs}


def _check_masked_lm_logits(loaded) -> dict:
    """The model's outputs on the fixture features and its encoder's, its masked-LM logits
    checked against the fixture pretrainer's."""
    outputs = loaded.model(_features(with_positions=True), training=False)
    expected_mlm = OUTPUTS["pretrainer/mlm_logits"]
    np.testing.assert_allclose(
        _at_real_slots(outputs["masked_lm_logits"].numpy().reshape(expected_mlm.shape)),
        _at_real_slots(expected_mlm), atol=1e-5, rtol=0)
    return _with_encoder_outputs(loaded, outputs)


def test_a_tf_hub_saved_model_exported_with_its_masked_lm_is_read_with_it():
    """`export_tfhub_lib` `with_mlm=True`: the encoder and the `mlm` object's masked-LM head, the
    logits those of the SavedModel's own `mlm` signature."""
    folder = str(MODEL_GARDEN_FIXTURES / "hub_masked_lm")
    assert detect_format(folder) == TF_HUB
    loaded = read_model(folder)
    assert loaded.spec.head == "masked_lm" and loaded.do_lower_case is True
    expected = np.load(MODEL_GARDEN_FIXTURES / "outputs_hub_masked_lm.npz")
    outputs = _with_encoder_outputs(loaded, loaded.model(_features(with_positions=True),
                                                          training=False))
    want = expected["hub_masked_lm/mlm_logits"]
    np.testing.assert_allclose(_at_real_slots(outputs["masked_lm_logits"].numpy().reshape(
        want.shape)), _at_real_slots(want), atol=1e-5, rtol=0)
    np.testing.assert_allclose(_at_real_tokens(outputs["sequence_output"]),
                               _at_real_tokens(expected["hub_masked_lm/sequence_output"]),
                               atol=1e-5, rtol=0)
    np.testing.assert_allclose(outputs["pooled_output"].numpy(),
                               expected["hub_masked_lm/pooled_output"], atol=1e-5, rtol=0)
    # Fill-mask takes it as it is; its first choice is the signature's highest logit.
    (masks,) = FillMask.from_checkpoint(folder, max_seq_length=16)(["w3 w7 [MASK] w9"], top_k=3)
    hub = tf.saved_model.load(folder)
    ids = np.array([[2, 8, 12, 4, 14, 3]], np.int32)  # [CLS] w3 w7 [MASK] w9 [SEP]
    logits = hub.mlm(dict(input_word_ids=ids, input_mask=np.ones_like(ids),
                          input_type_ids=np.zeros_like(ids),
                          masked_lm_positions=np.array([[3]], np.int32)),
                     training=False)["mlm_logits"].numpy()[0, 0]
    assert [choice.token_id for choice in masks[0]] == list(np.argsort(-logits)[:3])


def test_pretrainer_brings_its_heads():
    loaded = read_model(str(MODEL_GARDEN_FIXTURES / "pretrainer"))
    assert loaded.spec.head == "pretraining"
    outputs = _check_masked_lm_logits(loaded)
    np.testing.assert_allclose(outputs["next_sentence_logits"].numpy(),
                               OUTPUTS["pretrainer/next_sentence"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(_at_real_tokens(outputs["sequence_output"]),
                               _at_real_tokens(OUTPUTS["pretrainer/sequence_output"]), atol=1e-5,
                               rtol=0)


@pytest.mark.parametrize("folder", ["encoder", "pretrainer", "hub_encoder", "hub_masked_lm"])
def test_init_checkpoint_loads_the_encoder(folder, caplog):
    model = BertEncoder(read_model(str(MODEL_GARDEN_FIXTURES / "encoder")).model.config)
    found = load_checkpoint(model, str(MODEL_GARDEN_FIXTURES / folder))
    assert found in (MODEL_GARDEN, TF_HUB)
    # The SavedModel with its masked-LM holds the pretrainer's weights.
    key = {"encoder": "encoder", "pretrainer": "pretrainer", "hub_encoder": "hub",
           "hub_masked_lm": "pretrainer"}[folder]
    np.testing.assert_allclose(model(_features(), training=False)["pooled_output"].numpy(),
                               OUTPUTS[f"{key}/pooled_output"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("folder", ["encoder", "pretrainer"])
@pytest.mark.parametrize("via", [TF1, HF])
def test_round_trip_through_model_garden_is_bit_exact(folder, via, tmp_path):
    original = read_model(str(MODEL_GARDEN_FIXTURES / folder))
    write_model(original, MODEL_GARDEN, str(tmp_path / "mg"), True)
    assert detect_format(str(tmp_path / "mg")) == MODEL_GARDEN
    again = read_model(str(tmp_path / "mg"))
    assert again.spec == original.spec and again.model.config == original.model.config
    write_model(again, via, str(tmp_path / via), True)
    final = read_model(str(tmp_path / via))
    expected, actual = _values(original.model), _values(final.model)
    assert expected.keys() == actual.keys()
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


def test_mismatched_config_is_refused_with_names(tmp_path):
    folder = tmp_path / "encoder"
    shutil.copytree(MODEL_GARDEN_FIXTURES / "encoder", folder)
    params = (folder / "params.yaml").read_text()
    (folder / "params.yaml").write_text(params.replace("intermediate_size: 64",
                                                       "intermediate_size: 48"))
    with pytest.raises(CheckpointMismatchError) as error:
        read_model(str(folder))
    assert "bert/encoder/layer_0/intermediate/dense/kernel: checkpoint shape (32, 64)" in str(
        error.value)


def test_more_layers_than_the_config_are_refused_with_names(tmp_path):
    folder = tmp_path / "encoder"
    shutil.copytree(MODEL_GARDEN_FIXTURES / "encoder", folder)
    params = (folder / "params.yaml").read_text()
    (folder / "params.yaml").write_text(params.replace("num_layers: 2", "num_layers: 1"))
    with pytest.raises((UnsupportedCheckpointError, CheckpointMismatchError)) as error:
        read_model(str(folder))
    assert "layer_with_weights-5/_attention_layer/_query_dense/kernel" in str(error.value)


@pytest.mark.parametrize("key, value, reason", [
    ("norm_first: false", "norm_first: true", "norm_first"),
    ("embedding_size: null", "embedding_size: 16", "embedding_size=16"),
    ("hidden_activation: gelu", "hidden_activation: swish", "swish"),
    ("type: bert", "type: albert", "albert"),
])
def test_unrepresentable_configs_are_refused_with_the_reason(key, value, reason, tmp_path):
    folder = tmp_path / "encoder"
    shutil.copytree(MODEL_GARDEN_FIXTURES / "encoder", folder)
    params = (folder / "params.yaml").read_text()
    assert key in params
    (folder / "params.yaml").write_text(params.replace(key, value))
    with pytest.raises(UnsupportedCheckpointError, match=reason):
        read_model(str(folder))


def _rewrite(prefix: str, change) -> None:
    """Rewrites a checkpoint's tensors through `change(tensors)`, its object graph kept."""
    reader = tf.train.load_checkpoint(prefix)
    tensors = {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()}
    change(tensors)
    names = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.convert_to_tensor(tensors[n]) for n in names])


def _check_masked_lm(loaded) -> None:
    """The fixture pretrainer's encoder and masked-LM outputs, and no next-sentence head."""
    outputs = _check_masked_lm_logits(loaded)
    np.testing.assert_allclose(outputs["pooled_output"].numpy(),
                               OUTPUTS["pretrainer/pooled_output"], atol=1e-5, rtol=0)
    assert "next_sentence_logits" not in outputs


def test_a_next_sentence_head_with_its_own_pooler_is_left_out_with_a_warning(tmp_path, caplog):
    """Model Garden's training updates the next-sentence head's pooler apart from the encoder's:
    the encoder and the masked-LM head are read, and the log says what was left out."""
    write_model(read_model(str(MODEL_GARDEN_FIXTURES / "pretrainer")), MODEL_GARDEN,
                str(tmp_path / "mg"), True)

    def own_pooler(tensors):
        # Saved once, under one of its two paths (`model/classification_heads/0/dense`,
        # `next_sentence.pooler_dense`).
        keys = [k for k in tensors if k.startswith(("model/classification_heads/0/dense/bias",
                                                    "next_sentence..pooler_dense/bias"))]
        assert len(keys) == 1
        tensors[keys[0]] = tensors[keys[0]] + 1.0
    _rewrite(str(tmp_path / "mg" / "bert_model.ckpt"), own_pooler)
    with caplog.at_level("WARNING"):
        loaded = read_model(str(tmp_path / "mg"))
    assert loaded.spec.head == "masked_lm"
    assert "the next-sentence head has its own pooler" in caplog.text
    _check_masked_lm(loaded)


def test_a_masked_lm_pretrainer_without_next_sentence_is_read_with_its_masked_lm(tmp_path):
    """Google's converter writes a pretrainer as `Checkpoint(encoder=..., masked_lm=...)`."""
    pretrainer = read_model(str(MODEL_GARDEN_FIXTURES / "pretrainer"))
    write_model(pretrainer, MODEL_GARDEN, str(tmp_path / "mg"), True)
    roots = {path.split("/")[0] for path in object_paths(
        tf.train.load_checkpoint(str(tmp_path / "mg" / "bert_model.ckpt")))}
    # What Model Garden's task `initialize` restores, beside training's `model=`.
    assert {"model", "encoder", "masked_lm", "next_sentence.pooler_dense"} <= roots

    def without_next_sentence(tensors):
        for key in [k for k in tensors if k.startswith(("model/", "next_sentence."))]:
            del tensors[key]
    _rewrite(str(tmp_path / "mg" / "bert_model.ckpt"), without_next_sentence)
    loaded = read_model(str(tmp_path / "mg"))
    assert loaded.spec.head == "masked_lm"
    _check_masked_lm(loaded)
    # Written back as Google's converter writes it, and read again the same.
    write_model(loaded, MODEL_GARDEN, str(tmp_path / "mg2"), True)
    roots = {path.split("/")[0] for path in object_paths(
        tf.train.load_checkpoint(str(tmp_path / "mg2" / "bert_model.ckpt")))}
    assert roots == {"encoder", "masked_lm", "save_counter"}
    _check_masked_lm(read_model(str(tmp_path / "mg2")))


@pytest.mark.parametrize("via", [TF1, HF, "keras"])
def test_a_masked_lm_model_round_trips_bit_exact(via, tmp_path):
    pretrainer = read_model(str(MODEL_GARDEN_FIXTURES / "pretrainer"))
    write_model(pretrainer, MODEL_GARDEN, str(tmp_path / "mg"), True)
    _rewrite(str(tmp_path / "mg" / "bert_model.ckpt"), lambda tensors: [
        tensors.pop(k) for k in list(tensors) if k.startswith(("model/", "next_sentence."))])
    original = read_model(str(tmp_path / "mg"))
    write_model(original, via, str(tmp_path / via), True)
    final = read_model(str(tmp_path / via))
    assert final.spec.head == "masked_lm"
    expected, actual = _values(original.model), _values(final.model)
    assert expected.keys() == actual.keys()
    assert not any(name.startswith("cls/seq_relationship") for name in actual)
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


def test_activation_differing_from_the_model_is_refused():
    config = read_model(str(MODEL_GARDEN_FIXTURES / "encoder")).model.config
    model = BertEncoder(BertConfig(**{**config.to_dict(), "hidden_act": "relu"}))
    with pytest.raises(CheckpointMismatchError, match="hidden_act"):
        load_checkpoint(model, str(MODEL_GARDEN_FIXTURES / "encoder"))


def test_a_saved_model_without_keras_metadata_takes_the_given_config(tmp_path):
    """Older TF-Hub releases have no keras_metadata.pb: their bert_config.json is passed."""
    folder = tmp_path / "hub_v2"
    shutil.copytree(MODEL_GARDEN_FIXTURES / "hub_encoder", folder)
    (folder / "keras_metadata.pb").unlink()
    with pytest.raises(UnsupportedCheckpointError, match="--bert_config_file"):
        read_model(str(folder))
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64, hidden_act="gelu",
                        max_position_embeddings=16, type_vocab_size=2)
    config.to_json_file(tmp_path / "bert_config.json")
    loaded = read_model(str(folder), bert_config_file=str(tmp_path / "bert_config.json"))
    outputs = loaded.model(_features(), training=False)
    np.testing.assert_allclose(outputs["pooled_output"].numpy(), OUTPUTS["hub/pooled_output"],
                               atol=1e-5, rtol=0)
    encoder = BertEncoder(config)
    assert load_checkpoint(encoder, str(folder)) == TF_HUB
    np.testing.assert_allclose(encoder(_features(), training=False)["pooled_output"].numpy(),
                               OUTPUTS["hub/pooled_output"], atol=1e-5, rtol=0)


def test_an_encoder_is_read_whatever_its_mlm_activation_and_a_masked_lm_head_is_checked(
        tmp_path):
    """Model Garden writes `mlm_activation: gelu` (its default) beside a relu encoder too: only
    a checkpoint that holds the masked-LM head is refused for it."""
    encoder = tmp_path / "encoder"
    shutil.copytree(MODEL_GARDEN_FIXTURES / "encoder", encoder)
    params = (encoder / "params.yaml").read_text()
    (encoder / "params.yaml").write_text(
        params.replace("hidden_activation: gelu", "hidden_activation: relu")
        .replace("  model:\n", "  model:\n    mlm_activation: gelu\n"))
    assert read_model(str(encoder)).model.config.hidden_act == "relu"
    pretrainer = tmp_path / "pretrainer"
    shutil.copytree(MODEL_GARDEN_FIXTURES / "pretrainer", pretrainer)
    params = (pretrainer / "params.yaml").read_text()
    (pretrainer / "params.yaml").write_text(params.replace("mlm_activation: gelu",
                                                           "mlm_activation: relu"))
    with pytest.raises(UnsupportedCheckpointError,
                       match="mlm_activation='relu' differs from hidden_activation='gelu'"):
        read_model(str(pretrainer))


def test_a_variable_deleted_from_the_checkpoint_is_named_as_missing(tmp_path):
    folder = tmp_path / "encoder"
    shutil.copytree(MODEL_GARDEN_FIXTURES / "encoder", folder)

    def delete_a_kernel(tensors):  # the object graph still lists it
        del tensors[sorted(key for key in tensors if "_query_dense/kernel" in key)[0]]
    _rewrite(str(folder / "bert_model.ckpt"), delete_a_kernel)
    with pytest.raises(CheckpointMismatchError,
                       match=r"bert/encoder/layer_\d+/attention/self/query/kernel"):
        read_model(str(folder))
