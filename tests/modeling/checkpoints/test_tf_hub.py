"""TF-Hub BERT encoder SavedModels are read as data: nothing a SavedModel holds runs.

`tf.saved_model.load` restores a SavedModel's functions and runs the initializers of its
resources; the reader (`modeling.checkpoints.tf_hub.saved_model`) reads the object graph and the
variables' checkpoint instead. The fixtures are those of
tests/modeling/checkpoints/test_model_garden.py (written by Model Garden's exporter).
"""
import pathlib
import shutil

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.saved_model import load as saved_model_load

from modeling.checkpoints import (CorruptCheckpointError, UnsupportedCheckpointError,
                                  load_checkpoint, read_model)
from modeling.checkpoints.formats import TF_HUB
from modeling.checkpoints.model_garden.names import (HUB_MASKED_LM_NAMES, encoder_rows,
                                                     to_model_garden)
from modeling.checkpoints.names import tf1_name_map
from modeling.config import BertConfig
from modeling.models.encoder import BertEncoder
from tests.support.paths import MODEL_GARDEN_FIXTURES

OUTPUTS = np.load(MODEL_GARDEN_FIXTURES / "outputs.npz")
# The config of the fixtures' encoder (their keras_metadata.pb).
CONFIG = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=64, hidden_act="gelu", max_position_embeddings=16,
                    type_vocab_size=2)


def _features():
    return {"input_ids": OUTPUTS["input_word_ids"], "input_mask": OUTPUTS["input_mask"],
            "segment_ids": OUTPUTS["input_type_ids"]}


class FileWriter(tf.saved_model.experimental.TrackableResource):
    """A resource whose initializer writes a file: `tf.saved_model.load` runs it."""

    def __init__(self, path: str):
        super().__init__()
        self._path = path

    def _create_resource(self):
        return tf.raw_ops.VarHandleOp(dtype=tf.int32, shape=[], shared_name="")

    def _initialize(self):
        return tf.io.write_file(self._path, "loading the SavedModel ran its code")


def _write_hub_like_saved_model(folder: pathlib.Path, written: pathlib.Path) -> dict:
    """A SavedModel laid out as a TF-Hub BERT encoder with its masked-LM head, written from
    `tf.Module`s (no Keras `variables` lists), whose loading writes `written`.

    Returns:
        {original name: array} of the weights it holds, in the original's layout.
    """
    rng = np.random.default_rng(7)
    shapes = {name: variable.shape for name, variable in tf1_name_map(BertEncoder(CONFIG)).items()}
    hidden, vocab = CONFIG.hidden_size, CONFIG.vocab_size
    shapes.update({tf1: [hidden] for tf1 in HUB_MASKED_LM_NAMES})
    shapes.update({"cls/predictions/transform/dense/kernel": [hidden, hidden],
                   "cls/predictions/output_bias": [vocab]})
    values = {name: rng.normal(size=shape).astype(np.float32) for name, shape in shapes.items()}
    root = tf.Module()
    root.encoder = [tf.Variable(to_model_garden(values[tf1], reshape,
                                                CONFIG.num_attention_heads), name=name)
                    for tf1, _, name, reshape in encoder_rows(CONFIG.num_hidden_layers)]
    root.mlm = tf.Module()
    root.mlm.embedding_table = root.encoder[0]  # shared with the encoder, as exported
    root.mlm.head = [tf.Variable(values[tf1], name=f"bert/{name}")
                     for tf1, name in HUB_MASKED_LM_NAMES.items()]
    root.do_lower_case = tf.Variable(False, trainable=False)
    root.writer = FileWriter(str(written))
    tf.saved_model.save(root, str(folder))
    shutil.copy(MODEL_GARDEN_FIXTURES / "hub_encoder" / "keras_metadata.pb", folder)
    shutil.copytree(MODEL_GARDEN_FIXTURES / "hub_encoder" / "assets", folder / "assets",
                    dirs_exist_ok=True)
    return values


def test_loading_runs_a_saved_models_code_and_reading_it_does_not(tmp_path):
    folder, written = tmp_path / "hub", tmp_path / "written.txt"
    values = _write_hub_like_saved_model(folder, written)
    written.unlink(missing_ok=True)
    tf.saved_model.load(str(folder))
    assert written.exists()  # loading ran the SavedModel's code
    written.unlink()

    loaded = read_model(str(folder))
    assert not written.exists()
    assert loaded.spec.head == "masked_lm" and loaded.do_lower_case is False
    actual = {name: v.numpy() for name, v in tf1_name_map(loaded.model).items()}
    assert actual.keys() == values.keys()
    for name in values:
        np.testing.assert_array_equal(actual[name], values[name], err_msg=name)

    encoder = BertEncoder(CONFIG)
    assert load_checkpoint(encoder, str(folder)) == TF_HUB
    assert not written.exists()
    for name, variable in tf1_name_map(encoder).items():
        np.testing.assert_array_equal(variable.numpy(), values[name], err_msg=name)


def test_tf_saved_model_load_is_never_called(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a SavedModel was loaded")
    monkeypatch.setattr(tf.saved_model, "load", refuse)
    monkeypatch.setattr(saved_model_load, "load", refuse)
    # What every TF2 SavedModel loader (tf.saved_model.load, tf.keras's) goes through.
    monkeypatch.setattr(saved_model_load, "load_partial", refuse)
    monkeypatch.setattr(tf.__internal__.saved_model, "load_partial", refuse)
    for folder, head in (("hub_encoder", "encoder"), ("hub_masked_lm", "masked_lm")):
        loaded = read_model(str(MODEL_GARDEN_FIXTURES / folder))
        assert loaded.spec.head == head and loaded.do_lower_case is True
        encoder = BertEncoder(CONFIG)
        assert load_checkpoint(encoder, str(MODEL_GARDEN_FIXTURES / folder)) == TF_HUB
    np.testing.assert_allclose(
        read_model(str(MODEL_GARDEN_FIXTURES / "hub_encoder")).model(_features(), training=False)[
            "pooled_output"].numpy(), OUTPUTS["hub/pooled_output"], atol=1e-5, rtol=0)


def _rewrite_variables(folder: pathlib.Path, change) -> None:
    """Rewrites a SavedModel's variables checkpoint through `change(tensors)`."""
    prefix = str(folder / "variables" / "variables")
    reader = tf.train.load_checkpoint(prefix)
    tensors = {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()}
    change(tensors)
    names = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.convert_to_tensor(tensors[n]) for n in names])


def test_a_variable_missing_from_the_checkpoint_is_named(tmp_path):
    folder = tmp_path / "hub"
    shutil.copytree(MODEL_GARDEN_FIXTURES / "hub_masked_lm", folder)
    # `variables/5` is the first layer's query kernel, `mlm/variables/40` the masked-LM's dense
    # kernel (the object graph still lists both).
    _rewrite_variables(folder, lambda tensors: [
        tensors.pop(f"{key}/.ATTRIBUTES/VARIABLE_VALUE")
        for key in ("variables/5", "mlm/variables/40")])
    with pytest.raises(UnsupportedCheckpointError) as error:
        read_model(str(folder))
    assert ("missing transformer/layer_0/self_attention/query/kernel, "
            "mlm cls/predictions/transform/dense/kernel; left over -") in str(error.value)


def test_unreadable_or_foreign_files_are_refused_with_the_reason(tmp_path):
    folder = tmp_path / "hub"
    shutil.copytree(MODEL_GARDEN_FIXTURES / "hub_encoder", folder)
    (folder / "keras_metadata.pb").write_bytes(b"\xff\xff\xff")
    with pytest.raises(CorruptCheckpointError, match="keras_metadata.pb cannot be read"):
        read_model(str(folder))
    (folder / "keras_metadata.pb").unlink()
    (folder / "saved_model.pb").write_bytes(b"")  # parses, with no object graph: a TF1 one
    with pytest.raises(UnsupportedCheckpointError, match="no object graph"):
        load_checkpoint(BertEncoder(CONFIG), str(folder))
    shutil.copy(MODEL_GARDEN_FIXTURES / "hub_encoder" / "saved_model.pb", folder)
    shutil.rmtree(folder / "variables")
    with pytest.raises(UnsupportedCheckpointError, match="no variables"):
        load_checkpoint(BertEncoder(CONFIG), str(folder))
