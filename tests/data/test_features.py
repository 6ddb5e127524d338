"""Tests of data/features.py, the one featuriser: `[CLS] A [SEP] (B [SEP])`, padding, arrays,
lines of new text and their windows. The original's sequences themselves are checked against its
outputs through each task's features (tests/data/classifier/test_features.py,
tests/data/squad/test_features.py, ...)."""
import numpy as np
import pytest

from data import features, tokenization

_WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]


@pytest.fixture
def tokenizer(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join([*tokenization.SPECIAL_TOKENS, *_WORDS]) + "\n", encoding="utf-8")
    return tokenization.FullTokenizer(str(path), do_lower_case=True)


def test_truncate_seq_pair_pops_the_longer_and_b_on_ties():
    tokens_a, tokens_b = list("abcde"), list("xyz")
    features.truncate_seq_pair(tokens_a, tokens_b, 6)
    assert (tokens_a, tokens_b) == (list("abc"), list("xyz"))
    tokens_a, tokens_b = list("abc"), list("xyz")
    features.truncate_seq_pair(tokens_a, tokens_b, 5)
    assert (tokens_a, tokens_b) == (list("abc"), list("xy"))
    tokens_a, tokens_b = list("ab"), list("vwxyz")
    features.truncate_seq_pair(tokens_a, tokens_b, 3)
    assert (tokens_a, tokens_b) == (list("ab"), list("v"))


def test_truncated_tokens_leave_their_inputs_alone():
    context, ending = ["a", "b", "c"], ["d", "e", "f", "g"]
    tokens, segment_ids = features.truncated_tokens(context, ending, 7)
    assert tokens == ["[CLS]", "a", "b", "[SEP]", "d", "e", "[SEP]"]
    assert segment_ids == [0, 0, 0, 0, 1, 1, 1]
    assert context == ["a", "b", "c"] and ending == ["d", "e", "f", "g"]
    # A single text is cut at its end, room for two special tokens.
    assert features.truncated_tokens(list("abcdef"), None, 5)[0] == ["[CLS]", "a", "b", "c",
                                                                      "[SEP]"]


def test_an_empty_second_segment_is_left_out_unless_a_pair_is_asked_for():
    assert features.sequence_tokens(["a"], []) == (["[CLS]", "a", "[SEP]"], [0, 0, 0])
    assert features.sequence_tokens(["a"], [], pair=True) == (["[CLS]", "a", "[SEP]", "[SEP]"],
                                                              [0, 0, 0, 1])


def test_encode_pads_with_zeros_and_refuses_what_does_not_fit(tokenizer):
    sequence = features.encode(*features.sequence_tokens(["the", "cat"], ["dog"]), tokenizer, 8)
    # Ids: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4, then the words from 5.
    assert sequence.input_ids == [2, 5, 6, 3, 11, 3, 0, 0]
    assert sequence.input_mask == [1] * 6 + [0] * 2
    assert sequence.segment_ids == [0, 0, 0, 0, 1, 1, 0, 0]
    with pytest.raises(ValueError, match="6 tokens do not fit max_seq_length=5"):
        features.encode(sequence.tokens, sequence.segment_ids[:6], tokenizer, 5)


def test_stack_makes_int32_arrays_and_refuses_rows_of_other_lengths(tokenizer):
    rows = [features.truncated_sequence(["the"], None, tokenizer, 5),
            features.truncated_sequence(["the"], ["cat"], tokenizer, 5)]
    arrays = features.stack(rows)
    assert sorted(arrays) == ["input_ids", "input_mask", "segment_ids"]
    assert arrays["input_ids"].dtype == np.int32
    np.testing.assert_array_equal(arrays["input_ids"], [[2, 5, 3, 0, 0], [2, 5, 3, 6, 3]])
    np.testing.assert_array_equal(arrays["segment_ids"], [[0] * 5, [0, 0, 0, 1, 1]])
    short = features.truncated_sequence(["the"], None, tokenizer, 3)
    with pytest.raises(ValueError, match="different sequence lengths"):
        features.stack([rows[0], short])


def test_a_line_is_a_pair_only_around_three_bars(tokenizer):
    assert features.split_pair(" the cat ||| a dog \n") == ("the cat", "a dog")
    assert features.split_pair("the cat|||a dog") == ("the cat|||a dog", None)
    sequence, truncated = features.text_sequence("the cat sat ||| a dog", tokenizer, 6)
    # 3 + 2 tokens for 6 - 3 = 3 places: "the cat" and "a".
    assert sequence.tokens == ["[CLS]", "the", "cat", "[SEP]", "a", "[SEP]"] and truncated
    assert not features.text_sequence("the cat", tokenizer, 4)[1]


def test_a_long_line_becomes_windows_and_one_that_fits_one_sequence(tokenizer):
    text = "the cat sat on a mat"
    assert [s.tokens for s in features.text_windows(text, tokenizer, 8)] == [
        features.text_sequence(text, tokenizer, 8)[0].tokens]
    found = features.text_windows(text, tokenizer, 5, doc_stride=2)
    assert [s.tokens[1:-1] for s in found] == [["the", "cat", "sat"], ["sat", "on", "a"],
                                               ["a", "mat"]]
    assert all(len(s.input_ids) == 5 for s in found)
