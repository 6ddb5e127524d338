"""Tests of data/wordpiece_vocab.py: word counts, the learned vocabulary and its file."""
import collections

import pytest

from data import tokenization
from data import wordpiece_vocab


def test_words_are_the_basic_tokenizer_words():
    counts = wordpiece_vocab.count_words(["Héllo, WORLD!", "héllo (world)"], do_lower_case=True)
    assert counts == collections.Counter({"hello": 2, "world": 2, ",": 1, "!": 1, "(": 1,
                                          ")": 1})
    cased = wordpiece_vocab.count_words(["Héllo, WORLD!"], do_lower_case=False)
    assert set(cased) == {"Héllo", ",", "WORLD", "!"}


def test_read_lines_drops_invalid_bytes_and_stops_at_max_lines(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"one\nt\xffwo\n")
    (tmp_path / "b.txt").write_bytes(b"three\n")
    paths = [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    assert list(wordpiece_vocab.read_lines(paths)) == ["one\n", "two\n", "three\n"]
    assert list(wordpiece_vocab.read_lines(paths, max_lines=2)) == ["one\n", "two\n"]


def test_learned_vocabulary_covers_the_text(tmp_path, fixtures_dir):
    text = (fixtures_dir / "pretraining_data" / "sample_text.txt").read_text("utf-8")
    counts = wordpiece_vocab.count_words(text.splitlines(), do_lower_case=True)
    options = wordpiece_vocab.LearnerOptions(vocab_size=400, num_unused_tokens=3,
                                             lower_thresh=1, num_iterations=1)
    vocabulary = wordpiece_vocab.learn_vocabulary(counts, options)
    assert vocabulary[:8] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]",
                              "[unused1]", "[unused2]"]
    assert len(vocabulary) <= 400 and len(set(vocabulary)) == len(vocabulary)
    path = tmp_path / "vocab.txt"
    wordpiece_vocab.write_vocabulary(vocabulary, str(path))
    assert [p.name for p in tmp_path.iterdir()] == ["vocab.txt"]
    tokenizer = tokenization.FullTokenizer(str(path), do_lower_case=True)
    assert list(tokenizer.vocab)[:5] == list(wordpiece_vocab.SPECIAL_TOKENS)
    tokens = [t for line in text.splitlines() for t in tokenizer.tokenize(line)]
    assert "[UNK]" not in tokens  # every character of the text is in the alphabet


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="vocab_size=5 must exceed"):
        wordpiece_vocab.LearnerOptions(vocab_size=5).validate()
    with pytest.raises(ValueError, match="no word"):
        wordpiece_vocab.learn_vocabulary(collections.Counter(), wordpiece_vocab.LearnerOptions())
