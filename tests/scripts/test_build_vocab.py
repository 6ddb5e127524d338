"""Tests of build_vocab.py: a vocabulary learned from real text tokenizes held-out text; a released
vocabulary extended with a corpus's words keeps every other line; bad input is one line."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from data import tokenization
from data.pretraining import masked_lm
from tests.support.paths import REPO_ROOT
from tests.support.script_errors import assert_user_error



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


@pytest.mark.slow
def test_extend_vocab_fills_the_released_vocabulary_s_unused_slots(tmp_path, shared_data_dir,
                                                                  uncased_vocab):
    corpus = shared_data_dir / "wikitext-2-raw" / "wiki.test.sentences.txt"
    output = tmp_path / "domain_vocab.txt"
    result = _run(f"--extend_vocab={uncased_vocab}", f"--input_file={corpus}",
                  f"--output_file={output}", "--max_new_tokens=50")
    assert result.returncode == 0, result.stderr
    assert "50 new words in the 994 [unused] slots" in result.stderr
    assert "tokens per word of the corpus" in result.stderr
    old = uncased_vocab.read_text("utf-8").split("\n")
    new = output.read_text("utf-8").split("\n")
    assert len(new) == len(old)
    changed = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
    unused = [i for i, token in enumerate(old) if tokenization.is_unused_token(token)]
    assert changed == unused[:50]
    extension = json.loads((tmp_path / "domain_vocab_extension.json").read_text("utf-8"))
    assert [token["id"] for token in extension["new_tokens"]] == changed
    tokenizer = tokenization.FullTokenizer(str(uncased_vocab))
    for token in extension["new_tokens"]:
        assert new[token["id"]] == token["token"] not in tokenizer.vocab
        assert tokenizer.tokenize(token["token"]) == token["pieces"]
        assert tokenizer.convert_tokens_to_ids(token["pieces"]) == token["piece_ids"]
    savings = [token["saving"] for token in extension["new_tokens"]]
    assert savings == sorted(savings, reverse=True) and savings[-1] > 0


def _extend_error(tmp_path, vocab, *args):
    return _run(f"--extend_vocab={vocab}", f"--input_file={tmp_path}/corpus.txt",
                f"--output_file={tmp_path}/out/vocab.txt", *args)


@pytest.mark.parametrize("case, args, cause", [
    ("no_slot", [], "no_slot.txt has no [unusedN] slot to fill"),
    ("uncased", ["--max_new_tokens=-1"], "max_new_tokens=-1 must be in [0, 994]"),
    ("uncased", ["--max_new_tokens=995"], "max_new_tokens=995 must be in [0, 994]"),
    ("missing", [], "cannot read vocab file"),
    ("uncased", ["--vocab_size=100", "--lower_thresh=2"], "drop --vocab_size, --lower_thresh"),
    ("cased", [], "is cased (8366 tokens hold capitals)"),
])
def test_extend_vocab_refuses_bad_input_in_one_line(tmp_path, fixtures_dir, shared_data_dir,
                                                    case, args, cause):
    (tmp_path / "corpus.txt").write_text("Hemoglobin and hemoglobinuria.\n", encoding="utf-8")
    (tmp_path / "out").mkdir()
    (tmp_path / "no_slot.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n##b\n")
    vocab = {"no_slot": tmp_path / "no_slot.txt", "missing": tmp_path / "missing.txt",
             "uncased": fixtures_dir / "vocab" / "uncased_vocab.txt",
             "cased": shared_data_dir / "vocab" / "cased_vocab.txt"}[case]
    result = _extend_error(tmp_path, vocab, *args)
    assert result.returncode == 1
    assert_user_error(result.stderr, cause)
    assert not os.listdir(tmp_path / "out")


def test_extend_vocab_never_overwrites_the_released_file_and_its_flags_need_it(tmp_path,
                                                                               uncased_vocab):
    released = tmp_path / "vocab.txt"
    shutil.copy(uncased_vocab, released)
    (tmp_path / "corpus.txt").write_text("hemoglobin\n", encoding="utf-8")
    result = _run(f"--extend_vocab={released}", f"--input_file={tmp_path}/corpus.txt",
                  f"--output_file={released}")
    assert_user_error(result.stderr, f"would overwrite --extend_vocab={released}")
    assert released.read_bytes() == uncased_vocab.read_bytes()
    result = _run(f"--input_file={tmp_path}/corpus.txt", f"--output_file={tmp_path}/new.txt",
                  "--max_new_tokens=5")
    assert_user_error(result.stderr, "--max_new_tokens applies only with --extend_vocab")
    result = _extend_error(tmp_path, released, f"--input_file={tmp_path}/none/*.txt")
    assert_user_error(result.stderr, "matches no file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "vocab.txt"]
