"""Tests of data/tokenization.py against the original code's outputs and hand-made cases."""
import json
import sys

import pytest

from data import tokenization


@pytest.fixture(scope="module")
def golden_records(fixtures_dir):
    path = fixtures_dir / "tokenization" / "tokenizer_golden.jsonl"
    with open(path, encoding="utf-8") as reader:
        return [json.loads(line) for line in reader]


@pytest.fixture(scope="module")
def unicode_spec(fixtures_dir):
    path = fixtures_dir / "tokenization" / "convert_to_unicode.json"
    with open(path, encoding="utf-8") as reader:
        return json.load(reader)


@pytest.fixture(scope="module")
def tokenizers(uncased_vocab):
    return {lower: tokenization.FullTokenizer(uncased_vocab, do_lower_case=lower)
            for lower in (True, False)}


def test_module_does_not_import_tensorflow():
    assert "tensorflow" not in getattr(tokenization, "__dict__")
    source = open(tokenization.__file__, encoding="utf-8").read()
    assert "import tensorflow" not in source


def test_golden_corpus_matches_original(golden_records, tokenizers):
    assert len(golden_records) > 600
    mismatches = []
    for record in golden_records:
        tokenizer = tokenizers[record["lower"]]
        basic = tokenizer.basic_tokenizer.tokenize(record["text"])
        tokens = tokenizer.tokenize(record["text"])
        ids = tokenizer.convert_tokens_to_ids(tokens)
        if (basic, tokens, ids) != (record["basic"], record["tokens"], record["ids"]):
            mismatches.append(record["i"])
    assert not mismatches, f"lines differing from the original: {mismatches[:20]}"


def test_golden_corpus_covers_both_casings(golden_records):
    assert {record["lower"] for record in golden_records} == {True, False}


def test_convert_to_unicode_and_printable_text(unicode_spec):
    values = {"int": 12, "NoneType": None, "float": 3.5}
    for case in unicode_spec["convert_to_unicode_and_printable_text"]:
        kind = case["input_type"]
        if kind == "bytes":
            value = bytes.fromhex(case["input_hex"])
        elif kind == "bytearray":
            value = bytearray.fromhex(case["input_hex"])
        elif kind == "str":
            value = case["convert_to_unicode"]
        else:
            value = values[kind]
        for function in ("convert_to_unicode", "printable_text"):
            convert = getattr(tokenization, function)
            if case[function] is None:
                with pytest.raises(ValueError) as error:
                    convert(value)
                assert f"ValueError: {error.value}" == case[f"{function}_error"]
            else:
                assert convert(value) == case[function], case["input_repr"]


def test_full_tokenizer_on_bytes(unicode_spec, tokenizers):
    for case in unicode_spec["full_tokenizer_on_bytes"]:
        assert tokenizers[True].tokenize(bytes.fromhex(case["input_hex"])) == case["tokens"]


def test_preserve_unused_tokens(unicode_spec, uncased_vocab):
    for case in unicode_spec["preserve_unused_tokens_flag_1_0_4_only"]:
        tokenizer = tokenization.FullTokenizer(
            uncased_vocab, do_lower_case=True,
            preserve_unused_tokens=case["preserve_unused_tokens"])
        assert tokenizer.tokenize(case["text"]) == case["tokens"]


def test_unused_tokens_are_the_slots_of_the_vocabularies(uncased_vocab):
    vocab = tokenization.load_vocab(uncased_vocab)
    assert sum(tokenization.is_unused_token(token) for token in vocab) == 994
    for token in ("[unused]", "[unused1", "unused1", "[UNUSED1]", "[unused1] ", "[unused-1]"):
        assert not tokenization.is_unused_token(token), token


def test_unicode_database_version_matches_fixtures(unicode_spec):
    import unicodedata
    assert unicodedata.unidata_version == unicode_spec["unicodedata_version"], sys.version


@pytest.fixture()
def toy_vocab_file(tmp_path):
    tokens = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn",
              "##ing", ",", "  low  ", "low", "low"]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


def test_load_vocab_strips_and_keeps_later_duplicate(toy_vocab_file):
    vocab = tokenization.load_vocab(toy_vocab_file)
    assert list(vocab)[:4] == ["[UNK]", "[CLS]", "[SEP]", "want"]
    # "  low  " strips to "low" (line 12); the duplicates on lines 13 and 14 overwrite it.
    assert vocab["low"] == 13
    assert len(vocab) == 12


def test_load_vocab_errors_name_the_file(tmp_path):
    missing = tmp_path / "absent.txt"
    with pytest.raises(ValueError, match="absent.txt"):
        tokenization.load_vocab(missing)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff\n")
    with pytest.raises(ValueError, match=r"bad.txt:2"):
        tokenization.load_vocab(bad)


def test_full_tokenizer_hand_made(toy_vocab_file):
    # The original's own unit test: u"UNwant\u00E9d,running".
    tokenizer = tokenization.FullTokenizer(toy_vocab_file, do_lower_case=True)
    tokens = tokenizer.tokenize("UNwant\u00E9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tokenizer.convert_tokens_to_ids(tokens) == [7, 4, 5, 10, 8, 9]
    assert tokenizer.convert_ids_to_tokens([7, 4, 5]) == ["un", "##want", "##ed"]
    with pytest.raises(KeyError, match="nope"):
        tokenizer.convert_tokens_to_ids(["nope"])


def test_wordpiece_unknown_and_long_words():
    vocab = {"[UNK]": 0, "want": 1, "##want": 2, "##ed": 3, "un": 4, "a": 5, "##a": 6}
    wordpiece = tokenization.WordpieceTokenizer(vocab, max_input_chars_per_word=6)
    assert wordpiece.tokenize("") == []
    assert wordpiece.tokenize("unwanted want") == ["[UNK]", "want"]  # 8 chars > 6
    # "##wa" is missing, so "unwax" is one [UNK] even though "un" is known.
    assert wordpiece.tokenize("wanted unwax aaaaaa aaaaaaa") == [
        "want", "##ed", "[UNK]", "a", "##a", "##a", "##a", "##a", "##a", "[UNK]"]


def test_basic_tokenizer_hand_made():
    lower = tokenization.BasicTokenizer(do_lower_case=True)
    cased = tokenization.BasicTokenizer(do_lower_case=False)
    text = " \tHeLLo!how  \n Are yoU?  "
    assert lower.tokenize(text) == ["hello", "!", "how", "are", "you", "?"]
    assert cased.tokenize(text) == ["HeLLo", "!", "how", "Are", "yoU", "?"]
    assert lower.tokenize("H\u00E9llo") == ["hello"]
    assert cased.tokenize("H\u00E9llo") == ["H\u00E9llo"]
    assert lower.tokenize("ah\u535A\u63A8zz") == ["ah", "\u535A", "\u63A8", "zz"]
    # Hangul and Katakana are not split; U+0000, U+FFFD and U+200B (Cf) vanish.
    assert cased.tokenize("\uD55C\uAD6D\u30AB\u30BF") == ["\uD55C\uAD6D\u30AB\u30BF"]
    assert cased.tokenize("a\x00b\uFFFDc\u200Bd") == ["abcd"]
    # U+00A0 (Zs) separates words; "¿" (Po) and "$" (ASCII) are punctuation.
    assert cased.tokenize("a\u00A0b \u00BFc$") == ["a", "b", "\u00BF", "c", "$"]


def test_character_classes():
    assert all(tokenization.is_whitespace(c) for c in (" ", "\t", "\r", "\n", "\u00A0"))
    assert not any(tokenization.is_whitespace(c) for c in ("A", "-", "\u2028"))
    assert all(tokenization.is_control(c) for c in ("\u0005", "\u200B", "\u00AD"))
    assert not any(tokenization.is_control(c) for c in ("A", " ", "\t", "\r", "\uE000"))
    assert all(tokenization.is_punctuation(c) for c in ("-", "$", "`", ".", "\u00BF", "\u2014"))
    assert not any(tokenization.is_punctuation(c) for c in ("A", " ", "\u00A9"))


@pytest.mark.parametrize("do_lower_case, checkpoint, model", [
    (False, "/models/uncased_L-12_H-768_A-12/bert_model.ckpt", "uncased_L-12_H-768_A-12"),
    (False, "gs://b/chinese_L-12_H-768_A-12/bert_model.ckpt-1", "chinese_L-12_H-768_A-12"),
    (True, "cased_L-24_H-1024_A-16/bert_model.ckpt", "cased_L-24_H-1024_A-16"),
    (True, "x/multi_cased_L-12_H-768_A-12/bert_model.ckpt", "multi_cased_L-12_H-768_A-12"),
])
def test_case_check_rejects_mismatch(do_lower_case, checkpoint, model):
    with pytest.raises(ValueError) as error:
        tokenization.validate_case_matches_checkpoint(do_lower_case, checkpoint)
    cased = model.startswith(("cased", "multi_cased"))
    assert str(error.value) == (
        f"You passed in `--do_lower_case={do_lower_case}` with `--init_checkpoint={checkpoint}`. "
        f"However, `{model}` seems to be a {'cased' if cased else 'lowercased'} model, so you "
        f"should pass in `--do_lower_case={not do_lower_case}` so that the fine-tuning matches "
        "how the model was pre-training. If this error is wrong, please "
        "just comment out this check.")


@pytest.mark.parametrize("do_lower_case, checkpoint", [
    (True, "/models/uncased_L-12_H-768_A-12/bert_model.ckpt"),
    (False, "/models/cased_L-12_H-768_A-12/bert_model.ckpt"),
    (True, "/models/my_model/bert_model.ckpt"),
    (False, "/models/uncased_L-12_H-768_A-12/model.ckpt"),
    (False, None),
    (False, ""),
])
def test_case_check_accepts(do_lower_case, checkpoint):
    tokenization.validate_case_matches_checkpoint(do_lower_case, checkpoint)
