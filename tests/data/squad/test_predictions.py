"""Tests of data/squad/predictions.py against the original `write_predictions`."""
import json
import math

import pytest

from data.squad.examples import SquadExample, read_squad_examples, split_context
from data.squad.features import convert_examples_to_features
from data.squad.predictions import (RawResult, compute_predictions, compute_softmax,
                                    get_best_indexes, get_final_text, write_predictions)
from data.tokenization import FullTokenizer


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    return FullTokenizer(uncased_vocab, do_lower_case=True)


@pytest.mark.parametrize("name, input_name, version_2", [
    ("v1.1_eval", "dev-v1.1.json", False),
    ("v2.0_eval", "dev-v2.0.json", True),
])
def test_predictions_match_original(fixtures_dir, tokenizer, tmp_path, name, input_name,
                                    version_2):
    squad_dir = fixtures_dir / "squad"
    examples = read_squad_examples(squad_dir / "inputs" / input_name, False,
                                   version_2).examples
    features = list(convert_examples_to_features(examples, tokenizer, 128, 64, 32, False))
    with open(squad_dir / f"logits_{name}_random.jsonl", encoding="utf-8") as reader:
        results = [RawResult(**json.loads(line)) for line in reader]
    predictions = compute_predictions(examples, features, results, n_best_size=20,
                                      max_answer_length=30, do_lower_case=True,
                                      version_2_with_negative=version_2,
                                      null_score_diff_threshold=0.0)
    null_odds_file = tmp_path / "null_odds.json" if version_2 else None
    write_predictions(predictions, tmp_path / "predictions.json",
                      tmp_path / "nbest_predictions.json", null_odds_file)
    flag = str(version_2).lower()
    golden_dir = squad_dir / "predictions" / f"{name}_random_v2flag_{flag}_thr_0.0"
    # Texts exact, in the original's file format.
    assert ((tmp_path / "predictions.json").read_bytes()
            == (golden_dir / "predictions.json").read_bytes())
    golden_nbest = json.loads((golden_dir / "nbest_predictions.json").read_text("utf-8"))
    got_nbest = json.loads((tmp_path / "nbest_predictions.json").read_text("utf-8"))
    assert list(got_nbest) == list(golden_nbest)
    for qid, golden_entries in golden_nbest.items():
        got_entries = got_nbest[qid]
        assert [list(e) for e in got_entries] == [list(e) for e in golden_entries]
        for got, golden in zip(got_entries, golden_entries, strict=True):
            assert (got["text"], got["start_logit"], got["end_logit"]) == (
                golden["text"], golden["start_logit"], golden["end_logit"])
            assert got["probability"] == pytest.approx(golden["probability"], rel=1e-9)
    if version_2:
        golden_odds = json.loads((golden_dir / "null_odds.json").read_text("utf-8"))
        assert json.loads(null_odds_file.read_text("utf-8")) == golden_odds
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in golden_dir.iterdir())  # no temporary files left behind


def _paris(tokenizer, start_logits, end_logits):
    """One window: [CLS] where [SEP] paris(3) is(4) in(5) france(6) [SEP], padded to 10."""
    doc_tokens, _ = split_context("Paris is in France")
    example = SquadExample(qas_id="p", question_text="where", doc_tokens=doc_tokens)
    [feature] = convert_examples_to_features([example], tokenizer, 10, 128, 4, False)
    assert feature.tokens == ["[CLS]", "where", "[SEP]", "paris", "is", "in", "france", "[SEP]"]
    return [example], [feature], [RawResult(feature.unique_id, start_logits, end_logits)]


def _logits(values):
    logits = [0.0] * 10
    for position, value in values.items():
        logits[position] = value
    return logits


def test_spans_ranked_by_score_earliest_first_on_ties(tokenizer):
    inputs = _paris(tokenizer, _logits({3: 2.0}), _logits({3: 1.0, 6: 3.0}))
    output = compute_predictions(*inputs, n_best_size=20, max_answer_length=30,
                                 do_lower_case=True)
    nbest = output.nbest["p"]
    assert [e["text"] for e in nbest] == [
        "Paris is in France",                                 # 5
        "Paris", "is in France", "in France", "France",       # 3
        "Paris is", "Paris is in",                            # 2
        "is", "is in", "in"]                                  # 0
    total = 1 + 4 * math.exp(-2) + 2 * math.exp(-3) + 3 * math.exp(-5)
    assert nbest[0]["probability"] == pytest.approx(1 / total, rel=1e-12)
    assert nbest[1]["probability"] == pytest.approx(math.exp(-2) / total, rel=1e-12)
    assert (nbest[0]["start_logit"], nbest[0]["end_logit"]) == (2.0, 3.0)
    assert output.predictions == {"p": "Paris is in France"}
    assert output.null_odds == {}


def test_max_answer_length_and_n_best_size(tokenizer):
    inputs = _paris(tokenizer, _logits({3: 2.0}), _logits({3: 1.0, 6: 3.0}))
    short = compute_predictions(*inputs, n_best_size=20, max_answer_length=2,
                                do_lower_case=True)
    assert short.predictions["p"] == "Paris"
    assert [e["text"] for e in short.nbest["p"]][:3] == ["Paris", "in France", "France"]
    # Two best starts (3, then 0 first among the ties) and ends (6, 3): two valid spans.
    few = compute_predictions(*inputs, n_best_size=2, max_answer_length=30, do_lower_case=True)
    assert [e["text"] for e in few.nbest["p"]] == ["Paris is in France", "Paris"]


def test_v2_null_score_and_threshold(tokenizer):
    inputs = _paris(tokenizer, _logits({0: 1.0, 3: 2.0}), _logits({0: 1.0, 3: 1.0, 6: 3.0}))
    output = compute_predictions(*inputs, n_best_size=20, max_answer_length=30,
                                 do_lower_case=True, version_2_with_negative=True)
    texts = [e["text"] for e in output.nbest["p"]]
    # The null span (score 2) is ranked after the equal-scoring spans found before it.
    assert texts[5:8] == ["Paris is", "Paris is in", ""]
    assert output.null_odds == {"p": 2.0 - 2.0 - 3.0}
    assert output.predictions == {"p": "Paris is in France"}
    strict = compute_predictions(*inputs, n_best_size=20, max_answer_length=30,
                                 do_lower_case=True, version_2_with_negative=True,
                                 null_score_diff_threshold=-3.5)
    assert strict.predictions == {"p": ""}


@pytest.mark.parametrize("version_2, texts, prediction", [
    (False, ["empty"], "empty"),
    (True, ["empty", ""], ""),
])
def test_no_valid_span_gives_the_placeholder(tokenizer, version_2, texts, prediction):
    # With n_best_size 1 only [CLS] is considered: no span inside the context.
    inputs = _paris(tokenizer, _logits({0: 5.0}), _logits({0: 5.0}))
    output = compute_predictions(*inputs, n_best_size=1, max_answer_length=30,
                                 do_lower_case=True, version_2_with_negative=version_2)
    assert [e["text"] for e in output.nbest["p"]] == texts
    assert output.predictions == {"p": prediction}
    if version_2:
        assert output.null_odds == {"p": 10.0}


def test_missing_result_names_the_question(tokenizer):
    examples, features, _ = _paris(tokenizer, _logits({}), _logits({}))
    with pytest.raises(ValueError, match="'p'.*no result"):
        compute_predictions(examples, features, [], 20, 30, True)


@pytest.mark.parametrize("pred_text, orig_text, do_lower_case, expected", [
    ("steve smith", "Steve Smith's", True, "Steve Smith"),
    ("zurich", "Zürich,", True, "Zürich"),
    ("Smith", "Mr. Smith's", False, "Smith"),
    ("1887", "1887.", True, "1887"),
    ("paris", "London", True, "London"),             # not found: the whole original
    ("coop", "co\u00adop", True, "co\u00adop"),      # soft hyphen dropped: lengths differ
    ("cafe", "cafe\u0301s", True, "cafe\u0301s"),    # combining accent dropped
])
def test_get_final_text(pred_text, orig_text, do_lower_case, expected):
    assert get_final_text(pred_text, orig_text, do_lower_case) == expected


def test_get_best_indexes_keeps_earlier_on_ties():
    assert get_best_indexes([1.0, 3.0, 3.0, 2.0], 3) == [1, 2, 3]
    assert get_best_indexes([0.5, -1.0], 5) == [0, 1]


def test_compute_softmax():
    assert compute_softmax([]) == []
    assert compute_softmax([1.0, 1.0]) == [0.5, 0.5]
    probabilities = compute_softmax([0.0, math.log(3.0)])
    assert probabilities == pytest.approx([0.25, 0.75], rel=1e-15)
    # Large scores do not overflow: the maximum is subtracted first.
    assert compute_softmax([1000.0, 1000.0]) == [0.5, 0.5]
