"""Tests of data/squad/features.py against the original `convert_examples_to_features`."""
import dataclasses
import itertools
import json

import numpy as np
import pytest

from data.squad.examples import SquadExample, read_squad_examples, split_context
from data.squad.features import (FIRST_UNIQUE_ID, convert_examples_to_features, features_to_arrays,
                                 improve_answer_span)
from data.tokenization import FullTokenizer

SETS = [
    ("v1.1_train", "train-v1.1.json", True, False),
    ("v1.1_eval", "dev-v1.1.json", False, False),
    ("v2.0_eval", "dev-v2.0.json", False, True),
]


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    return FullTokenizer(uncased_vocab, do_lower_case=True)


def _features(fixtures_dir, tokenizer, input_name, is_training, version_2):
    examples = read_squad_examples(fixtures_dir / "squad" / "inputs" / input_name,
                                   is_training, version_2).examples
    return list(convert_examples_to_features(examples, tokenizer, max_seq_length=128,
                                             doc_stride=64, max_query_length=32,
                                             is_training=is_training))


def _golden_features(fixtures_dir, name):
    with open(fixtures_dir / "squad" / f"features_{name}.jsonl", encoding="utf-8") as reader:
        return [json.loads(line) for line in reader]


@pytest.mark.parametrize("name, input_name, is_training, version_2", SETS)
def test_features_match_original(fixtures_dir, tokenizer, name, input_name, is_training,
                                 version_2):
    features = _features(fixtures_dir, tokenizer, input_name, is_training, version_2)
    # A JSON round trip writes the integer keys of the two maps as strings, as the golden does.
    got = [json.loads(json.dumps(dataclasses.asdict(feature))) for feature in features]
    assert got == _golden_features(fixtures_dir, name)


@pytest.mark.parametrize("name, input_name, is_training, version_2", SETS)
def test_arrays_hold_the_feature_values(fixtures_dir, tokenizer, name, input_name,
                                        is_training, version_2):
    features = _features(fixtures_dir, tokenizer, input_name, is_training, version_2)
    arrays = features_to_arrays(features, is_training)
    golden = _golden_features(fixtures_dir, name)
    expected_keys = {"unique_ids", "input_ids", "input_mask", "segment_ids"}
    if is_training:
        expected_keys |= {"start_positions", "end_positions"}
        np.testing.assert_array_equal(arrays["start_positions"],
                                      [g["start_position"] for g in golden])
        np.testing.assert_array_equal(arrays["end_positions"],
                                      [g["end_position"] for g in golden])
    assert set(arrays) == expected_keys
    assert all(array.dtype == np.int32 for array in arrays.values())
    assert arrays["input_ids"].shape == (len(golden), 128)
    np.testing.assert_array_equal(arrays["unique_ids"], [g["unique_id"] for g in golden])
    for key in ("input_ids", "input_mask", "segment_ids"):
        np.testing.assert_array_equal(arrays[key], [g[key] for g in golden])


def test_arrays_for_training_need_positions(fixtures_dir, tokenizer):
    features = _features(fixtures_dir, tokenizer, "dev-v1.1.json", False, False)
    with pytest.raises(ValueError, match="no start/end positions"):
        features_to_arrays(features, is_training=True)


def test_v2_training_targets(fixtures_dir, tokenizer):
    features = _features(fixtures_dir, tokenizer, "train-v2.0.json", True, True)
    examples = read_squad_examples(fixtures_dir / "squad" / "inputs" / "train-v2.0.json",
                                   True, True).examples
    golden_v1 = {(tuple(g["tokens"]), g["doc_span_index"]): g
                 for g in _golden_features(fixtures_dir, "v1.1_train")}
    assert features[0].unique_id == FIRST_UNIQUE_ID
    assert [f.unique_id for f in features] == list(
        range(FIRST_UNIQUE_ID, FIRST_UNIQUE_ID + len(features)))
    for feature in features:
        example = examples[feature.example_index]
        assert feature.is_impossible == example.is_impossible
        if example.is_impossible:
            assert (feature.start_position, feature.end_position) == (0, 0)
            continue
        # Answerable questions get the targets the original gave the same v1.1 question.
        golden = golden_v1[(tuple(feature.tokens), feature.doc_span_index)]
        assert (feature.start_position, feature.end_position) == (
            golden["start_position"], golden["end_position"])


def test_conversion_streams(fixtures_dir, tokenizer):
    examples = read_squad_examples(fixtures_dir / "squad" / "inputs" / "dev-v1.1.json",
                                   False).examples

    def first_then_fail():
        yield examples[0]
        raise AssertionError("read beyond the first example")

    features = convert_examples_to_features(first_then_fail(), tokenizer, 128, 64, 32, False)
    first_three = list(itertools.islice(features, 3))  # example 0 has three windows
    assert [f.doc_span_index for f in first_three] == [0, 1, 2]


def _gallon_example():
    context = "the man went to the store and bought a gallon of milk"
    doc_tokens, char_to_word_offset = split_context(context)
    start = context.index("gallon")
    return SquadExample(qas_id="g", question_text="who", doc_tokens=doc_tokens,
                        orig_answer_text="gallon", start_position=char_to_word_offset[start],
                        end_position=char_to_word_offset[start + 5])


def test_windows_max_context_and_targets(tokenizer):
    # One query token, 9 positions: windows of 5 pieces every 2 pieces over 12 pieces.
    features = list(convert_examples_to_features([_gallon_example()], tokenizer,
                                                 max_seq_length=9, doc_stride=2,
                                                 max_query_length=4, is_training=True))
    window_starts = [min(f.token_to_orig_map.values()) for f in features]
    assert window_starts == [0, 2, 4, 6, 8]
    # Hand-scored: min(left, right) + 0.01 * window length, earliest window on a tie
    # (piece 3: 1.05 in windows 0 and 1; piece 9: 1.05 in window 3 beats 1.04 in window 4).
    best_window = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    for index, feature in enumerate(features):
        max_context_pieces = [feature.token_to_orig_map[position]
                              for position, is_max in feature.token_is_max_context.items()
                              if is_max]
        assert max_context_pieces == [p for p, w in enumerate(best_window) if w == index]
    # "gallon" is piece 9: inside windows 3 (6..10) and 4 (8..11), after "[CLS] who [SEP]".
    targets = [(f.start_position, f.end_position) for f in features]
    assert targets == [(0, 0), (0, 0), (0, 0), (6, 6), (4, 4)]
    assert features[3].tokens[6] == "gallon"
    assert features[4].input_mask == [1] * 8 + [0]


def test_improve_answer_span_finds_the_number_inside_a_word(tokenizer):
    pieces = tokenizer.tokenize("born (1895-1943).")
    assert pieces == ["born", "(", "1895", "-", "1943", ")", "."]
    # The word span of "(1895-1943)." is pieces 1..6; the answer "1895" is piece 2.
    assert improve_answer_span(pieces, 1, 6, tokenizer, "1895") == (2, 2)
    # No sub-span spells "japan": the word span is kept.
    assert improve_answer_span(["japanese"], 0, 0, tokenizer, "Japan") == (0, 0)


def test_too_short_max_seq_length_is_refused(tokenizer):
    with pytest.raises(ValueError, match="max_seq_length=4 leaves no room for the context"):
        list(convert_examples_to_features([_gallon_example()], tokenizer, max_seq_length=4,
                                          doc_stride=2, max_query_length=32,
                                          is_training=False))
