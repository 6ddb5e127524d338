"""Tests of data/pretraining/cached_tokenizer.py: the memo gives exactly the original tokenizer's ids."""
import array
import json

import pytest

from data import tokenization
from data.pretraining.cached_tokenizer import JOINING_CONTROL_CHARS, WordCachedTokenizer


def _expected_ids(tokenizer, line):
    return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))


def test_joining_control_chars_are_all_such_characters():
    expected = {chr(cp) for cp in range(0x110000)
                if chr(cp).isspace() and tokenization.is_control(chr(cp))}
    assert set(JOINING_CONTROL_CHARS) == expected
    assert expected == set("\x0b\x0c\x1c\x1d\x1e\x1f\x85")


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_golden_lines_tokenize_as_the_original(fixtures_dir, uncased_vocab, do_lower_case):
    golden = fixtures_dir / "tokenization" / "tokenizer_golden.jsonl"
    records = [json.loads(line) for line in golden.read_text("utf-8").splitlines()]
    tokenizer = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case)
    cached = WordCachedTokenizer(tokenizer, max_cached_words=50)  # also exercises emptying
    checked = 0
    for record in records:
        if record["lower"] != do_lower_case:
            continue
        assert cached.ids(record["text"]) == record["ids"], record["i"]
        checked += 1
    assert checked > 100


def test_joining_controls_and_odd_spaces(uncased_vocab):
    tokenizer = tokenization.FullTokenizer(str(uncased_vocab))
    cached = WordCachedTokenizer(tokenizer)
    lines = ["un\x1cbreak able", "a\x85b c\x0bd", "e\u2028f g\u00a0h", "x\u200by \ufeffz",
             "tab\there", "caf\u00e9 na\u00efve \u4e2d\u6587", "[MASK] (hello), world!"]
    for line in lines:
        assert cached.ids(line) == _expected_ids(tokenizer, line), repr(line)


def test_real_text_tokenizes_as_the_original(shared_data_dir, uncased_vocab):
    tokenizer = tokenization.FullTokenizer(str(uncased_vocab))
    cached = WordCachedTokenizer(tokenizer)
    text = (shared_data_dir / "wikitext-2-raw" / "wiki.test.sentences.txt").read_text("utf-8")
    for line in text.split("\n")[:3000]:
        assert cached.ids(line) == _expected_ids(tokenizer, line.strip())


def test_extend_ids_appends_the_same_ids(uncased_vocab):
    tokenizer = tokenization.FullTokenizer(str(uncased_vocab))
    cached = WordCachedTokenizer(tokenizer)
    token_ids = array.array("i", [7])
    for line in ["Hello, world!", "un\x1cbreak able", ""]:
        cached.extend_ids(line, token_ids)
    assert token_ids.tolist() == [7] + cached.ids("Hello, world!") + cached.ids("un\x1cbreak able")
