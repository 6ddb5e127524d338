import json
import subprocess
import sys

import numpy as np

from data import tokenization
from data.feature_extraction import parse_layer_indexes, read_lines
from data.features import text_sequence
from modeling.checkpoints import DESCRIPTIONS, read_model, write_model
from tests.support.paths import REPO_ROOT

import pytest


def test_examples_and_tokens_match_the_original(fixtures_dir, uncased_vocab):
    folder = fixtures_dir / "extract_features"
    tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
    expected = [json.loads(line) for line in (folder / "output_tiny.jsonl").open()]
    lines = list(read_lines(str(folder / "input.txt")))
    assert len(lines) == len(expected)
    for number, (line, record) in enumerate(zip(lines, expected)):
        sequence, _ = text_sequence(line, tokenizer, 32)
        assert number == record["linex_index"]
        assert sequence.tokens == [t["token"] for t in record["features"]]
        assert len(sequence.input_ids) == 32


def test_layer_indexes_are_checked():
    assert parse_layer_indexes("-1,-2,0", 2) == [-1, -2, 0]
    with pytest.raises(ValueError, match="-3"):
        parse_layer_indexes("-1,-3", 2)
    with pytest.raises(ValueError, match="comma-separated"):
        parse_layer_indexes("last", 2)


def _extract(fixtures_dir, uncased_vocab, init_checkpoint, output):
    folder = fixtures_dir / "extract_features"
    config = fixtures_dir / "original" / "tiny" / "bert_config.json"
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "extract_features.py"),
         f"--input_file={folder / 'input.txt'}", f"--output_file={output}",
         f"--vocab_file={uncased_vocab}", f"--bert_config_file={config}",
         f"--init_checkpoint={init_checkpoint}", "--layers=-1,-2",
         "--max_seq_length=32", "--batch_size=4"], check=True, capture_output=True, text=True)


def _assert_original_output(fixtures_dir, output):
    expected = [json.loads(line) for line in (fixtures_dir / "extract_features" /
                                              "output_tiny.jsonl").open()]
    produced = [json.loads(line) for line in output.open()]
    assert len(produced) == len(expected)
    for ours, theirs in zip(produced, expected):
        assert list(ours) == ["linex_index", "features"]
        assert ours["linex_index"] == theirs["linex_index"]
        assert [f["token"] for f in ours["features"]] == [f["token"] for f in theirs["features"]]
        for our_token, their_token in zip(ours["features"], theirs["features"]):
            assert [l["index"] for l in our_token["layers"]] == [-1, -2]
            for our_layer, their_layer in zip(our_token["layers"], their_token["layers"]):
                np.testing.assert_allclose(our_layer["values"], their_layer["values"], atol=1e-5)


def test_script_reproduces_the_original_output(fixtures_dir, uncased_vocab, tmp_path):
    output = tmp_path / "out.jsonl"
    _extract(fixtures_dir, uncased_vocab,
             fixtures_dir / "original" / "tiny" / "bert_model.ckpt", output)
    _assert_original_output(fixtures_dir, output)
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("output_format", ["keras", pytest.param("hf", marks=pytest.mark.slow)])
def test_the_same_model_in_the_other_formats_gives_the_same_output(
        fixtures_dir, uncased_vocab, tmp_path, output_format):
    tiny = fixtures_dir / "original" / "tiny"
    converted = tmp_path / output_format
    write_model(read_model(str(tiny / "bert_model.ckpt"), vocab_file=str(uncased_vocab)),
                output_format, str(converted), do_lower_case=True)
    output = tmp_path / "out.jsonl"
    result = _extract(fixtures_dir, uncased_vocab, converted, output)
    assert DESCRIPTIONS[output_format] in result.stderr
    _assert_original_output(fixtures_dir, output)
