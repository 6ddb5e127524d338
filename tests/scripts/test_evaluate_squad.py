"""Tests of evaluate_squad.py, the drop-in for the official SQuAD evaluation scripts."""
import json
import subprocess
import sys

import pytest

import evaluate_squad
from tests.support.paths import REPO_ROOT



def _data(questions, version):
    qas = [{"id": qid, "question": "?",
            "answers": [{"text": t, "answer_start": 0} for t in texts]}
           for qid, texts in questions]
    return {"version": version,
            "data": [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]}


def _write(tmp_path, name, value):
    path = tmp_path / name
    path.write_text(json.dumps(value), encoding="utf-8")
    return str(path)


def _run(capsys, argv):
    assert evaluate_squad.main(argv) == 0
    return capsys.readouterr().out


V1_QUESTIONS = [("q1", ["Denver Broncos", "The Broncos"]), ("q2", ["Carolina Panthers"]),
                ("q3", ["Santa Clara"]), ("q4", ["Levi's Stadium"])]
V1_PREDICTIONS = {"q1": "broncos", "q2": "Panthers team", "q4": "Stanford"}
V2_QUESTIONS = [("q1", ["Paris"]), ("q2", ["red apple"]), ("q3", []), ("q4", [])]
V2_PREDICTIONS = {"q1": "paris", "q2": "apple", "q3": "", "q4": "blue"}


def test_v1_prints_one_line(tmp_path, capsys):
    data = _write(tmp_path, "dev.json", _data(V1_QUESTIONS, "1.1"))
    preds = _write(tmp_path, "predictions.json", V1_PREDICTIONS)
    # EM: q1 only. F1: q1 1, q2 0.5 (1 of 2 tokens each way), q3 missing, q4 0.
    assert _run(capsys, [data, preds]) == '{"exact_match": 25.0, "f1": 37.5}\n'


def test_v2_prints_the_official_object(tmp_path, capsys):
    data = _write(tmp_path, "dev.json", _data(V2_QUESTIONS, "v2.0"))
    preds = _write(tmp_path, "predictions.json", V2_PREDICTIONS)
    na_probs = _write(tmp_path, "null_odds.json", {"q1": 0.1, "q2": 0.6, "q3": 0.9, "q4": 0.8})
    out = _run(capsys, [data, preds, "--na-prob-file", na_probs, "--na-prob-thresh", "0.5"])
    expected = {
        "exact": 75.0, "f1": 75.0, "total": 4,
        # q2 is scored as "" (0); q3 and q4 as "" (right).
        "HasAns_exact": 50.0, "HasAns_f1": 50.0, "HasAns_total": 2,
        "NoAns_exact": 100.0, "NoAns_f1": 100.0, "NoAns_total": 2,
        "best_exact": 75.0, "best_exact_thresh": 0.1,
        "best_f1": 100.0 * (2 + 1 + 2 / 3) / 4, "best_f1_thresh": 0.6,
    }
    assert out == json.dumps(expected, indent=2) + "\n"


def test_v2_without_scores_has_no_best_thresholds(tmp_path, capsys):
    data = _write(tmp_path, "dev.json", _data(V2_QUESTIONS, "v2.0"))
    preds = _write(tmp_path, "predictions.json", V2_PREDICTIONS)
    result = json.loads(_run(capsys, ["-t", "0.5", data, preds]))
    assert list(result) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1",
                            "HasAns_total", "NoAns_exact", "NoAns_f1", "NoAns_total"]
    assert (result["exact"], result["f1"]) == (50.0, 100.0 * (1 + 2 / 3 + 1 + 0) / 4)


def test_version_flag_overrides_detection(tmp_path, capsys):
    answerable = [("q1", ["Paris"]), ("q2", ["red apple"])]
    data = _write(tmp_path, "dev.json", _data(answerable, "v2.0"))
    preds = _write(tmp_path, "predictions.json", {"q1": "paris", "q2": "apple"})
    assert list(json.loads(_run(capsys, [data, preds])))[:3] == ["exact", "f1", "total"]
    assert json.loads(_run(capsys, [data, preds, "--version", "1.1"])) == {
        "exact_match": 50.0, "f1": 100.0 * (1.0 + 2 / 3) / 2}


def test_out_file_holds_the_printed_text(tmp_path, capsys):
    data = _write(tmp_path, "dev.json", _data(V2_QUESTIONS, "v2.0"))
    preds = _write(tmp_path, "predictions.json", V2_PREDICTIONS)
    out = _run(capsys, [data, preds, "-o", str(tmp_path / "eval.json")])
    assert (tmp_path / "eval.json").read_text("utf-8") == out


def _error(capsys, argv):
    with pytest.raises(SystemExit) as exit_info:
        evaluate_squad.main(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def test_errors_name_the_file_and_question(tmp_path, capsys):
    data_v1 = _write(tmp_path, "dev1.json", _data(V1_QUESTIONS, "1.1"))
    data_v2 = _write(tmp_path, "dev2.json", _data(V2_QUESTIONS, "v2.0"))
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    assert _error(capsys, [data_v1, str(broken)]).startswith(
        f"evaluate_squad.py: error: {broken}: the predictions file is not valid JSON")
    not_text = _write(tmp_path, "numbers.json", {"q1": 3})
    assert "numbers.json: question id 'q1': expected an answer string" in _error(
        capsys, [data_v1, not_text])
    partial = _write(tmp_path, "partial.json", {"q1": "paris"})
    assert "dev2.json: 3 questions have no prediction, e.g. q2, q3, q4" in _error(
        capsys, [data_v2, partial])
    preds = _write(tmp_path, "predictions.json", V1_PREDICTIONS)
    scores = _write(tmp_path, "null_odds.json", {"q1": 0.5})
    assert "v2.0 only" in _error(capsys, [data_v1, preds, "-n", scores])
    no_data = _write(tmp_path, "nodata.json", {"version": "1.1"})
    assert 'nodata.json: missing the top-level "data"' in _error(capsys, [no_data, preds])


def test_script_on_the_real_dev_set(shared_data_dir, tmp_path):
    data_file = shared_data_dir / "squad" / "dev-v1.1.json"
    dataset = json.loads(data_file.read_text("utf-8"))
    gold = {qa["id"]: qa["answers"][0]["text"] for article in dataset["data"]
            for paragraph in article["paragraphs"] for qa in paragraph["qas"]}
    preds = _write(tmp_path, "predictions.json", gold)
    completed = subprocess.run(
        [sys.executable, str(REPO_ROOT / "evaluate_squad.py"), str(data_file), preds],
        capture_output=True, text=True, check=True, cwd=tmp_path)
    assert completed.stdout == '{"exact_match": 100.0, "f1": 100.0}\n'
