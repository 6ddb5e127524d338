"""Tests of build_vocab.py: a vocabulary learned from real text tokenizes held-out text."""
import pathlib
import subprocess
import sys

import pytest

from data import tokenization
from data.pretraining import masked_lm

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


def _run(*args):
    return subprocess.run([sys.executable, str(REPO_ROOT / "build_vocab.py"), *args],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=900)


@pytest.mark.slow
def test_vocabulary_from_wikitext_tokenizes_held_out_text(tmp_path, shared_data_dir):
    """Learned on the first 3,000 lines of WikiText-2 test, applied to the next 3,000."""
    corpus = shared_data_dir / "wikitext-2-raw" / "wiki.test.sentences.txt"
    output = tmp_path / "vocab.txt"
    result = _run(f"--input_file={corpus}", f"--output_file={output}", "--vocab_size=1000",
                  "--max_lines=3000", "--lower_thresh=2", "--num_iterations=1",
                  "--num_unused_tokens=10")
    assert result.returncode == 0, result.stderr
    lines = output.read_text("utf-8").splitlines()
    assert lines[:6] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]"]
    assert 900 <= len(lines) <= 1000
    tokenizer = tokenization.FullTokenizer(str(output), do_lower_case=True)
    masked_lm.MaskingVocab.from_vocab(tokenizer.vocab, str(output))
    held_out = corpus.read_text("utf-8").split("\n")[3000:6000]
    tokens = [token for line in held_out for token in tokenizer.tokenize(line)]
    assert len(tokens) > 50_000
    # Only characters never seen in the first 3,000 lines can become [UNK].
    assert tokens.count("[UNK]") / len(tokens) < 0.001
    assert sum(token.startswith("##") for token in tokens) > 0.1 * len(tokens)


def test_an_empty_glob_is_reported_before_writing(tmp_path):
    result = _run(f"--input_file={tmp_path}/*.txt", f"--output_file={tmp_path}/vocab.txt")
    assert result.returncode != 0 and "matches no file" in result.stderr
    assert not (tmp_path / "vocab.txt").exists()
