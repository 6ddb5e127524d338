"""Tests of data/squad/metrics.py: hand-computed cases and real SQuAD data."""
import json

import pytest

from data.squad import metrics as squad_metrics
from data.squad.examples import load_squad_json


@pytest.mark.parametrize("text, expected", [
    ("The Cat's  hat!", "cats hat"),
    ("An apple a day", "apple day"),
    ("theater another", "theater another"),   # articles only as whole words
    ("A.B.C.", "abc"),
    ("  Hello,\tworld\n", "hello world"),
    ("«Le Petit»", "«le petit»"),             # only ASCII punctuation is removed
    ("the", ""),
])
def test_normalize_answer(text, expected):
    assert squad_metrics.normalize_answer(text) == expected


def test_v1_scores_of_one_answer():
    assert squad_metrics.exact_match_score("The Denver Broncos", "denver broncos!")
    assert not squad_metrics.exact_match_score("Broncos", "Denver Broncos")
    # [big, red, dog] vs [red, dog, barked]: 2 common, precision = recall = 2/3.
    assert squad_metrics.f1_score("the big red dog", "a red dog barked") == pytest.approx(
        2 / 3, abs=1e-15)
    # Counts are clipped: {x: 2, y: 1} & {x: 1, y: 2} = 2 common of 3 each.
    assert squad_metrics.f1_score("x x y", "x y y") == pytest.approx(2 / 3, abs=1e-15)
    # Precision 1/1, recall 1/4: F1 = 2 * 0.25 / 1.25.
    assert squad_metrics.f1_score("broncos", "the Denver Broncos team won") == 0.4
    assert squad_metrics.f1_score("", "") == 0


def test_v2_scores_of_one_answer():
    assert squad_metrics.compute_exact("", "") == 1
    assert squad_metrics.compute_exact("Paris", "the paris.") == 1
    assert squad_metrics.compute_f1("", "") == 1
    assert squad_metrics.compute_f1("the", "") == 1   # both empty once normalised
    assert squad_metrics.compute_f1("", "Paris") == 0
    assert squad_metrics.compute_f1("red apple", "apple") == pytest.approx(2 / 3, abs=1e-15)


def _dataset(questions):
    """A "data" list with one paragraph holding (id, [gold texts]) questions."""
    qas = [{"id": qid, "question": "?", "answers": [{"text": t, "answer_start": 0}
                                                    for t in texts]}
           for qid, texts in questions]
    return [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]


def test_evaluate_v1_with_multiple_gold_answers_and_a_missing_prediction():
    dataset = _dataset([
        ("q1", ["Denver Broncos", "The Broncos"]),    # EM 1 via the second answer
        ("q2", ["Carolina", "Carolina Panthers"]),    # F1 max(0, 2*(1/2*1/2)/1) = 0.5
        ("q3", ["Santa Clara"]),                      # no prediction: 0
        ("q4", ["Levi's Stadium"]),                   # wrong: 0
    ])
    predictions = {"q1": "broncos", "q2": "Panthers team", "q4": "Stanford"}
    result = squad_metrics.evaluate_v1(dataset, predictions)
    assert result == {"exact_match": 25.0, "f1": 100.0 * (1.0 + 0.5) / 4}
    assert list(result) == ["exact_match", "f1"]


V2_DATASET = _dataset([("q1", ["Paris"]), ("q2", ["red apple"]), ("q3", []), ("q4", [])])
V2_PREDICTIONS = {"q1": "paris", "q2": "apple", "q3": "", "q4": "blue"}


def test_evaluate_v2_breakdown():
    result = squad_metrics.evaluate_v2(V2_DATASET, V2_PREDICTIONS)
    assert list(result) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1",
                            "HasAns_total", "NoAns_exact", "NoAns_f1", "NoAns_total"]
    # Per question: exact 1, 0, 1, 0; F1 1, 2/3, 1, 0.
    assert result["exact"] == 50.0
    assert result["f1"] == 100.0 * (1 + 2 / 3 + 1 + 0) / 4
    assert result["total"] == 4
    assert (result["HasAns_exact"], result["HasAns_f1"], result["HasAns_total"]) == (
        50.0, 100.0 * (1 + 2 / 3) / 2, 2)
    assert (result["NoAns_exact"], result["NoAns_f1"], result["NoAns_total"]) == (
        50.0, 50.0, 2)


def test_evaluate_v2_threshold_and_best_thresholds():
    na_probs = {"q1": 0.1, "q2": 0.6, "q3": 0.9, "q4": 0.8}
    result = squad_metrics.evaluate_v2(V2_DATASET, V2_PREDICTIONS, na_probs, 0.5)
    # Above 0.5, q2 counts as answered "" (wrong), q3 and q4 as "" (right).
    assert (result["exact"], result["f1"]) == (75.0, 75.0)
    assert list(result)[-4:] == ["best_exact", "best_exact_thresh", "best_f1",
                                 "best_f1_thresh"]
    # Start from all "" (2 right); answer by increasing score: q1 +1 (3, at 0.1),
    # q2 +0 exact / +2/3 F1 (at 0.6), q4 -1 ("blue" for a NoAns), q3 +0.
    assert (result["best_exact"], result["best_exact_thresh"]) == (75.0, 0.1)
    assert (result["best_f1"], result["best_f1_thresh"]) == (100.0 * (2 + 1 + 2 / 3) / 4, 0.6)


def test_evaluate_v2_needs_every_prediction_and_score():
    with pytest.raises(ValueError, match="no prediction.*q4"):
        squad_metrics.evaluate_v2(V2_DATASET, {"q1": "", "q2": "", "q3": ""})
    with pytest.raises(ValueError, match="no no-answer score.*q3"):
        squad_metrics.evaluate_v2(V2_DATASET, V2_PREDICTIONS, {"q1": 0.0, "q2": 0.0})


def test_question_without_answers_list_is_named():
    dataset = [{"paragraphs": [{"context": "c", "qas": [{"id": "bad", "question": "?"}]}]}]
    with pytest.raises(ValueError, match="'bad'.*answers"):
        squad_metrics.evaluate_v1(dataset, {"bad": "x"})


def test_v1_question_without_gold_answers_is_named():
    with pytest.raises(ValueError, match="'q0' has no gold answers"):
        squad_metrics.evaluate_v1(_dataset([("q0", [])]), {"q0": "x"})


@pytest.mark.parametrize("dataset_json, version", [
    ({"version": "1.1", "data": _dataset([("a", ["x"])])}, "1.1"),
    ({"version": "v2.0", "data": _dataset([("a", ["x"])])}, "2.0"),
    ({"data": [{"paragraphs": [{"qas": [{"id": "a", "is_impossible": False}]}]}]}, "2.0"),
])
def test_detect_version(dataset_json, version):
    assert squad_metrics.detect_version(dataset_json) == version


def test_format_and_write_like_the_official_scripts(tmp_path):
    v1 = {"exact_match": 25.0, "f1": 37.5}
    assert squad_metrics.format_eval_results(v1) == '{"exact_match": 25.0, "f1": 37.5}'
    v2 = squad_metrics.evaluate_v2(V2_DATASET, V2_PREDICTIONS)
    text = squad_metrics.format_eval_results(v2)
    assert text.startswith('{\n  "exact": 50.0,\n  "f1": ')
    squad_metrics.write_eval_results(tmp_path / "eval_results.json", v2)
    assert (tmp_path / "eval_results.json").read_text("utf-8") == text + "\n"


def _gold_predictions(dataset):
    return {qid: texts[0] if texts else "" for qid, texts in squad_metrics.iter_questions(
        dataset)}


def test_real_v1_dev_set_scored_with_its_own_answers(shared_data_dir):
    dataset_json = load_squad_json(shared_data_dir / "squad" / "dev-v1.1.json")
    predictions = _gold_predictions(dataset_json["data"])
    assert len(predictions) == 10570
    assert squad_metrics.evaluate(dataset_json, predictions) == {"exact_match": 100.0,
                                                                 "f1": 100.0}


@pytest.mark.parametrize("name, total, has_answer", [
    ("cs224n_dev-v2.0.json", 6078, 2910),
    ("transformers_fixture_dev-v2.0.json", 14, 8),
])
def test_real_v2_dev_subsets_scored_with_their_own_answers(shared_data_dir, name, total,
                                                            has_answer):
    dataset_json = load_squad_json(shared_data_dir / "squad" / "subsets" / name)
    assert squad_metrics.detect_version(dataset_json) == "2.0"
    predictions = _gold_predictions(dataset_json["data"])
    na_probs = {qid: 0.0 if text else 1.0 for qid, text in predictions.items()}
    result = squad_metrics.evaluate(dataset_json, predictions, na_probs=na_probs)
    assert json.loads(json.dumps(result)) == {
        "exact": 100.0, "f1": 100.0, "total": total,
        "HasAns_exact": 100.0, "HasAns_f1": 100.0, "HasAns_total": has_answer,
        "NoAns_exact": 100.0, "NoAns_f1": 100.0, "NoAns_total": total - has_answer,
        "best_exact": 100.0, "best_exact_thresh": 0.0, "best_f1": 100.0,
        "best_f1_thresh": 0.0}
