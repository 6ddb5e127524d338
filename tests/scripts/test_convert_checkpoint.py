import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file

from modeling.checkpoints import (LoadedModel, ModelSpec, UnsupportedCheckpointError, build_model,
                                  detect_format, read_model, save_tf1_checkpoint, write_model)
import modeling.checkpoints.folders as checkpoint_folders
from modeling.checkpoints.formats import HF, KERAS, TF1
from modeling.checkpoints.keras_format.checkpoint import save_keras_checkpoint
from modeling.checkpoints.names import tf1_name_map
from modeling.checkpoints.tf1.checkpoint import read_tf1_checkpoint
from modeling.config import BertConfig
from data import vocab_extension, wordpiece_vocab
from tests.support.modeling_fixtures import tiny_dir
from tests.support.new_token_rows import assert_new_rows_are_piece_means
from tests.support.paths import REPO_ROOT
from tests.support.script_errors import assert_user_error

ORIGINAL_PREFIXES = {"pretraining": "bert_model.ckpt", "classifier": "classifier/model.ckpt",
                     "squad": "squad/model.ckpt"}
SMALL = dict(vocab_size=40, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=16, max_position_embeddings=16, type_vocab_size=2)


def _original_folder(fixtures_dir, uncased_vocab, head, folder):
    """The original code's checkpoint with its config and vocab beside it, as released."""
    folder.mkdir()
    source = tiny_dir(fixtures_dir) / ORIGINAL_PREFIXES[head]
    for path in source.parent.glob(source.name + ".*"):
        shutil.copy(path, folder / path.name.replace(source.name, "bert_model.ckpt"))
    shutil.copy(tiny_dir(fixtures_dir) / "bert_config.json", folder / "bert_config.json")
    shutil.copy(uncased_vocab, folder / "vocab.txt")
    return folder


def _small_folder(folder, head, num_labels=None, **config):
    """A random project model of `head`, as a keras-format folder."""
    spec = ModelSpec(head, num_labels)
    model = build_model(BertConfig(**{**SMALL, **config}), spec)
    vocab = folder.parent / "vocab.txt"
    vocab.write_text("".join(f"t{i}\n" for i in range(SMALL["vocab_size"])), encoding="utf-8")
    write_model(LoadedModel(model, spec, str(vocab), False), KERAS, str(folder), False)
    return model


def _convert(source, output_format, output):
    loaded = read_model(str(source))
    write_model(loaded, output_format, str(output), do_lower_case=True)
    return loaded


def _values(loaded):
    return {name: variable.numpy() for name, variable in tf1_name_map(loaded.model).items()}


def _assert_identical(actual: dict, expected: dict):
    assert sorted(actual) == sorted(expected)
    for name, value in expected.items():
        assert actual[name].dtype == value.dtype, name
        np.testing.assert_array_equal(actual[name], value, err_msg=name)


@pytest.mark.parametrize("head", sorted(ORIGINAL_PREFIXES))
def test_original_checkpoints_survive_every_round_trip_bit_for_bit(
        head, fixtures_dir, uncased_vocab, tmp_path):
    original = _original_folder(fixtures_dir, uncased_vocab, head, tmp_path / "original")
    _convert(original, KERAS, tmp_path / "keras")
    _convert(tmp_path / "keras", HF, tmp_path / "hf")
    _convert(tmp_path / "hf", TF1, tmp_path / "tf1")
    _convert(tmp_path / "tf1", HF, tmp_path / "hf_again")
    _convert(tmp_path / "hf_again", KERAS, tmp_path / "keras_again")
    assert [detect_format(str(tmp_path / n)) for n in ("original", "keras", "hf", "tf1")] == [
        TF1, KERAS, HF, TF1]
    expected = read_tf1_checkpoint(str(original))
    _assert_identical(read_tf1_checkpoint(str(tmp_path / "tf1")), expected)
    _assert_identical(_values(read_model(str(tmp_path / "keras_again"))), expected)
    _assert_identical(load_file(str(tmp_path / "hf_again" / "model.safetensors")),
                      load_file(str(tmp_path / "hf" / "model.safetensors")))
    for name in ("bert_config.json", "vocab.txt"):
        assert (tmp_path / "tf1" / name).read_bytes() == (original / name).read_bytes()


@pytest.mark.parametrize("head, num_labels, formats", [
    ("encoder", None, (TF1, HF, KERAS)),
    ("token_classifier", 7, (HF, TF1, KERAS)),
    ("classifier", 1, (HF, KERAS, TF1)),
    ("multiple_choice", None, (TF1, KERAS)),
])
def test_every_head_travels(head, num_labels, formats, tmp_path):
    model = _small_folder(tmp_path / "start", head, num_labels, hidden_act="gelu_exact")
    expected = {name: variable.numpy() for name, variable in tf1_name_map(model).items()}
    source = tmp_path / "start"
    for output_format in formats:
        loaded = _convert(source, output_format, tmp_path / output_format)
        assert loaded.spec == ModelSpec(head, num_labels)
        source = tmp_path / output_format
    final = read_model(str(source))
    assert final.model.config.hidden_act == "gelu_exact"
    assert final.do_lower_case is (None if formats[-1] == TF1 else True)
    _assert_identical(_values(final), expected)


def test_training_checkpoints_without_spec_file(tmp_path):
    folder = tmp_path / "run"
    _small_folder(folder, "classifier", 3)
    (folder / "model_spec.json").unlink()
    with pytest.raises(UnsupportedCheckpointError, match="pass --head"):
        read_model(str(folder))
    assert read_model(str(folder), head="classifier").spec == ModelSpec("classifier", 3)
    pretrainer = build_model(BertConfig(**SMALL), ModelSpec("pretraining"))
    save_keras_checkpoint(pretrainer, str(tmp_path / "pre" / "ckpt-5"))
    for name in ("bert_config.json", "vocab.txt"):
        shutil.copy(folder / name, tmp_path / "pre" / name)
    assert read_model(str(tmp_path / "pre" / "ckpt-5")).spec == ModelSpec("pretraining")


def _leftovers(parent):
    return sorted(p.name for p in parent.iterdir() if ".tmp" in p.name)


def test_unknown_heads_and_vocab_mismatches_write_nothing(tmp_path):
    model = build_model(BertConfig(**SMALL), ModelSpec("squad"))
    folder = tmp_path / "extra"
    save_tf1_checkpoint(model, str(folder / "bert_model.ckpt"),
                        extra={"cls/ner/output_weights": np.ones([5, 8], np.float32)})
    BertConfig(**SMALL).to_json_file(folder / "bert_config.json")
    (folder / "vocab.txt").write_text("".join(f"t{i}\n" for i in range(SMALL["vocab_size"])))
    with pytest.raises(UnsupportedCheckpointError, match="cls/ner/output_weights"):
        read_model(str(folder))
    short_vocab = tmp_path / "short_vocab.txt"
    short_vocab.write_text("a\nb\nc")
    _small_folder(tmp_path / "small", "squad")
    with pytest.raises(UnsupportedCheckpointError,
                       match="vocab size mismatch: .*short_vocab.txt has 3 tokens.*vocab_size=40"):
        read_model(str(tmp_path / "small"), vocab_file=str(short_vocab))


def test_failed_writes_leave_nothing_behind(tmp_path, monkeypatch):
    _small_folder(tmp_path / "start", "multiple_choice")
    loaded = read_model(str(tmp_path / "start"))
    with pytest.raises(UnsupportedCheckpointError, match="multiple_choice head has no Hugging"):
        write_model(loaded, HF, str(tmp_path / "out"), True)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="is not an empty folder"):
        write_model(loaded, TF1, str(tmp_path / "full"), True)

    def fail_midway(model, prefix):
        pathlib.Path(prefix + ".index").write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint_folders, "save_tf1_checkpoint", fail_midway)
    with pytest.raises(OSError, match="disk full"):
        write_model(loaded, TF1, str(tmp_path / "out"), True)
    assert not (tmp_path / "out").exists()
    assert _leftovers(tmp_path) == []
    assert os.listdir(tmp_path / "full") == ["keep.txt"]


def _run_script(*args):
    return subprocess.run([sys.executable, "convert_checkpoint.py", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_script_says_what_it_found_and_refuses_bad_input(fixtures_dir, uncased_vocab, tmp_path):
    prefix = tiny_dir(fixtures_dir) / "squad" / "model.ckpt"
    result = _run_script(f"--input={prefix}", f"--output={tmp_path / 'hf'}", "--to=hf",
                         f"--bert_config_file={tiny_dir(fixtures_dir) / 'bert_config.json'}",
                         f"--vocab_file={uncased_vocab}", "--nodo_lower_case")
    assert result.returncode == 0, result.stderr
    assert "original TF1 (name-based) checkpoint (detected)" in result.stdout
    assert "squad head, do_lower_case=False" in result.stdout
    assert '"do_lower_case": false' in (tmp_path / "hf" / "tokenizer_config.json").read_text()
    config = (tmp_path / "hf" / "config.json").read_text()
    (tmp_path / "hf" / "config.json").write_text(config.replace('"bert"', '"distilbert"'))
    result = _run_script(f"--input={tmp_path / 'hf'}", f"--output={tmp_path / 'out'}",
                         "--to=keras")
    assert result.returncode != 0
    assert "model_type 'distilbert'" in result.stderr
    assert "Hugging Face folder (detected)" in result.stdout
    assert not (tmp_path / "out").exists() and _leftovers(tmp_path) == []


@pytest.mark.slow
def test_script_starts_the_new_tokens_of_an_extended_vocabulary_from_their_pieces(
        fixtures_dir, uncased_vocab, tmp_path):
    released = _original_folder(fixtures_dir, uncased_vocab, "pretraining", tmp_path / "released")
    counts = wordpiece_vocab.count_words(["Chloroplasts hold thylakoids; Genghis Khan."] * 3, True)
    extension = vocab_extension.extend_vocabulary(
        vocab_extension.read_vocab_lines(str(uncased_vocab)), counts)
    vocab = tmp_path / "domain" / "vocab.txt"
    vocab.parent.mkdir()
    json_path = vocab_extension.write_extension(extension, str(vocab), str(uncased_vocab), True)
    args = [f"--input={released}", "--to=hf", f"--vocab_extension={json_path}"]
    result = _run_script(*args, f"--output={tmp_path / 'hf'}", f"--vocab_file={vocab}")
    assert result.returncode == 0, result.stderr
    pieces = {token.id: token.piece_ids for token in extension.new_tokens}
    assert f"{len(pieces)} new tokens, their rows of bert/embeddings/word_embeddings and " \
           "cls/predictions/output_bias set to the means" in result.stdout
    assert (tmp_path / "hf" / "vocab.txt").read_bytes() == vocab.read_bytes()
    assert_new_rows_are_piece_means(read_tf1_checkpoint(str(released)),
                                    _values(read_model(str(tmp_path / "hf"))), pieces)
    forgot_vocab = _run_script(*args, f"--output={tmp_path / 'out'}")
    assert_user_error(forgot_vocab.stderr, "pass the extended vocabulary as --vocab_file")
    assert not (tmp_path / "out").exists()
