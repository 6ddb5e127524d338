"""Tests of data/classifier/features.py against the original `convert_single_example`."""
import json

import numpy as np
import pytest

from data import tokenization
from data.classifier import glue_tasks
from data.classifier.features import (InputExample, InputFeatures, convert_examples_to_features,
                                      convert_single_example, example_tokens, features_to_arrays)


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    return tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)


@pytest.fixture(scope="module")
def golden_records(fixtures_dir):
    with open(fixtures_dir / "glue" / "features.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_features_match_the_original(golden_records, tokenizer):
    # The original's padding example (TPU batches) has no counterpart here: batches may be short.
    real_records = [r for r in golden_records if r["task"] != "PaddingInputExample"]
    assert len(real_records) == 140
    for record in real_records:
        task = glue_tasks.get_task(record["task"])
        example = InputExample(guid=record["guid"], text_a=record["text_a"],
                               text_b=record["text_b"], label=record["label"])
        max_seq_length = record["max_seq_length"]
        feature = convert_single_example(example, task.label_list, max_seq_length, tokenizer)
        where = f"{record['task']} {record['split']} {record['guid']} L={max_seq_length}"
        tokens, _ = example_tokens(example, max_seq_length, tokenizer)
        assert tokens == record["tokens"], where
        assert feature.input_ids == record["input_ids"], where
        assert feature.input_mask == record["input_mask"], where
        assert feature.segment_ids == record["segment_ids"], where
        assert feature.label_id == record["label_id"], where
        assert feature.is_real_example == record["is_real_example"], where


def test_pair_layout_and_truncation(tokenizer):
    example = InputExample(guid="g", text_a="the cat sat on the mat", text_b="a dog", label="1")
    feature = convert_single_example(example, ["0", "1"], 8, tokenizer)
    # 6 + 2 tokens for 8 - 3 = 5 places: A, always the longer, loses three.
    tokens = ["[CLS]", "the", "cat", "sat", "[SEP]", "a", "dog", "[SEP]"]
    assert feature.input_ids == tokenizer.convert_tokens_to_ids(tokens)
    assert feature.segment_ids == [0, 0, 0, 0, 0, 1, 1, 1]
    assert feature.input_mask == [1] * 8
    assert feature.label_id == 1


def test_text_b_without_tokens_makes_a_single_sentence(tokenizer):
    example = InputExample(guid="g", text_a="hello world", text_b=" \t ", label="0")
    tokens, segment_ids = example_tokens(example, 16, tokenizer)
    assert tokens == ["[CLS]", "hello", "world", "[SEP]"]
    assert segment_ids == [0, 0, 0, 0]


def test_single_sentence_truncation_and_padding(tokenizer):
    example = InputExample(guid="g", text_a="one two three four five", label="0")
    feature = convert_single_example(example, ["0", "1"], 5, tokenizer)
    expected = tokenizer.convert_tokens_to_ids(["[CLS]", "one", "two", "three", "[SEP]"])
    assert feature.input_ids == expected
    short = convert_single_example(InputExample("h", "one", label="1"), ["0", "1"], 5, tokenizer)
    assert short.input_mask == [1, 1, 1, 0, 0]
    assert short.input_ids[3:] == [0, 0]
    assert short.segment_ids == [0] * 5


def test_regression_label_is_a_float(tokenizer):
    example = InputExample(guid="g", text_a="a", text_b="b", label="3.800")
    assert convert_single_example(example, None, 8, tokenizer).label_id == pytest.approx(3.8)


def test_bad_labels_are_errors(tokenizer):
    with pytest.raises(ValueError, match="'maybe' is not one of"):
        convert_single_example(InputExample("g", "a", label="maybe"), ["0", "1"], 8, tokenizer)
    with pytest.raises(ValueError, match="not a number"):
        convert_single_example(InputExample("g", "a", label="high"), None, 8, tokenizer)


def test_convert_examples_to_features_keeps_order(tokenizer):
    examples = [InputExample("a", "yes", label="1"), InputExample("c", "yes no", label="0"),
                InputExample("b", "no", label="0")]
    features = convert_examples_to_features(examples, ["0", "1"], 6, tokenizer)
    assert [f.label_id for f in features] == [1, 0, 0]
    assert [sum(f.input_mask) for f in features] == [3, 4, 3]


def test_features_to_arrays_shapes_and_dtypes():
    features = [InputFeatures([101, 7, 102], [1, 1, 1], [0, 0, 0], 2),
                InputFeatures([0, 0, 0], [0, 0, 0], [0, 0, 0], 0, is_real_example=False)]
    arrays = features_to_arrays(features)
    assert sorted(arrays) == ["input_ids", "input_mask", "is_real_example", "label_ids",
                              "segment_ids"]
    assert arrays["input_ids"].shape == (2, 3) and arrays["input_ids"].dtype == np.int32
    np.testing.assert_array_equal(arrays["label_ids"], [2, 0])
    assert arrays["label_ids"].dtype == np.int32
    np.testing.assert_array_equal(arrays["is_real_example"], [1, 0])
    scores = [InputFeatures([101, 102], [1, 1], [0, 0], 3.8)]
    assert features_to_arrays(scores, is_regression=True)["label_ids"].dtype == np.float32


def test_features_to_arrays_rejects_mixed_lengths():
    features = [InputFeatures([1, 2], [1, 1], [0, 0], 0), InputFeatures([1], [1], [0], 0)]
    with pytest.raises(ValueError, match="different sequence lengths"):
        features_to_arrays(features)
