import pathlib
import shutil

import numpy as np
import pytest
import tensorflow as tf

from modeling.checkpoints import CheckpointMismatchError, CorruptCheckpointError, load_checkpoint
from modeling.checkpoints import formats
from modeling.checkpoints.formats import KERAS, TF1
from modeling.checkpoints.keras_format.checkpoint import save_keras_checkpoint
from modeling.config import BertConfig
from modeling.models.pretrainer import BertPretrainer
from modeling.models.task_models import BertClassifier
from tests.support.modeling_fixtures import tiny_config, tiny_dir


def _config(**overrides):
    values = dict(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=16, max_position_embeddings=16)
    return BertConfig(**{**values, **overrides})


def test_formats_are_detected_and_said(fixtures_dir, tmp_path):
    model = BertPretrainer(tiny_config(fixtures_dir))
    assert load_checkpoint(model, str(tiny_dir(fixtures_dir))) == TF1
    save_keras_checkpoint(model, str(tmp_path / "ckpt"))
    copy = BertPretrainer(tiny_config(fixtures_dir))
    assert load_checkpoint(copy, str(tmp_path / "ckpt")) == KERAS
    for a, b in zip(model.weights, copy.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_project_checkpoint_initialises_another_models_encoder(tmp_path):
    pretrainer = BertPretrainer(_config())
    save_keras_checkpoint(pretrainer, str(tmp_path / "ckpt"))
    classifier = BertClassifier(_config(), num_labels=2)
    load_checkpoint(classifier.encoder, str(tmp_path / "ckpt"))
    for a, b in zip(pretrainer.encoder.weights, classifier.encoder.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # The whole classifier needs its head, which a pretraining checkpoint lacks.
    with pytest.raises(CheckpointMismatchError, match="classifier/output_weights"):
        load_checkpoint(classifier, str(tmp_path / "ckpt"))


def test_project_checkpoint_shape_mismatch_changes_nothing(tmp_path):
    save_keras_checkpoint(BertPretrainer(_config()), str(tmp_path / "ckpt"))
    model = BertPretrainer(_config(intermediate_size=24))
    before = [v.numpy().copy() for v in model.weights]
    with pytest.raises(CheckpointMismatchError):
        load_checkpoint(model, str(tmp_path / "ckpt"))
    for variable, value in zip(model.weights, before):
        np.testing.assert_array_equal(variable.numpy(), value)


def _damage(data_file, how: str) -> None:
    data = bytearray(data_file.read_bytes())
    if how == "truncated":
        data = data[:len(data) // 2]
    else:  # one bit flipped in the middle of the tensors' bytes
        data[len(data) // 2] ^= 0x10
    data_file.write_bytes(bytes(data))


def _tf1_copy(fixtures_dir, folder):
    source = tiny_dir(fixtures_dir)
    folder.mkdir()
    for path in source.glob("bert_model.ckpt*"):
        shutil.copyfile(path, folder / path.name)
    return folder / "bert_model.ckpt"


@pytest.mark.parametrize("how", ["truncated", "bit_flip"])
@pytest.mark.parametrize("checkpoint_format", [TF1, KERAS])
def test_a_damaged_checkpoint_is_named_and_nothing_is_loaded(fixtures_dir, tmp_path, how,
                                                             checkpoint_format):
    if checkpoint_format == TF1:
        prefix = _tf1_copy(fixtures_dir, tmp_path / "tf1")
    else:
        prefix = save_keras_checkpoint(BertPretrainer(tiny_config(fixtures_dir)),
                                       str(tmp_path / "project" / "ckpt"))
    (data_file,) = pathlib.Path(prefix).parent.glob("*.data-*")
    _damage(data_file, how)
    model = BertPretrainer(tiny_config(fixtures_dir))
    before = [w.numpy() for w in model.weights]
    with pytest.raises(CorruptCheckpointError, match=f"checkpoint {prefix} cannot be read: .*"
                                                     "truncated or corrupt"):
        load_checkpoint(model, str(prefix))
    for value, weight in zip(before, model.weights):
        np.testing.assert_array_equal(value, weight.numpy())


def test_a_missing_index_file_is_named(fixtures_dir, tmp_path):
    prefix = _tf1_copy(fixtures_dir, tmp_path / "tf1")
    (tmp_path / "tf1" / "bert_model.ckpt.index").unlink()
    with pytest.raises(FileNotFoundError, match=f"{prefix}.index does not exist"):
        load_checkpoint(BertPretrainer(tiny_config(fixtures_dir)), str(prefix))


def test_a_load_resolves_the_path_and_opens_the_checkpoint_once(fixtures_dir, monkeypatch):
    calls = {"resolve": 0, "open": 0}

    def counted(name, function):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(formats, "resolve_checkpoint_prefix",
                        counted("resolve", formats.resolve_checkpoint_prefix))
    monkeypatch.setattr(tf.train, "load_checkpoint", counted("open", tf.train.load_checkpoint))
    model = BertPretrainer(tiny_config(fixtures_dir))
    assert load_checkpoint(model, str(tiny_dir(fixtures_dir))) == TF1
    assert calls == {"resolve": 1, "open": 1}
