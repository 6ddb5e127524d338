"""Tests of data/squad/examples.py against the original `read_squad_examples`."""
import dataclasses
import json

import pytest

from data.squad.examples import SkippedAnswer, load_squad_json, read_squad_examples, split_context


def _golden_examples(fixtures_dir, name):
    with open(fixtures_dir / "squad" / f"examples_{name}.jsonl", encoding="utf-8") as reader:
        return [json.loads(line) for line in reader]


@pytest.mark.parametrize("name, input_name, is_training, version_2", [
    ("v1.1_train", "train-v1.1.json", True, False),
    ("v1.1_eval", "dev-v1.1.json", False, False),
    ("v2.0_eval", "dev-v2.0.json", False, True),
])
def test_examples_match_original(fixtures_dir, name, input_name, is_training, version_2):
    result = read_squad_examples(fixtures_dir / "squad" / "inputs" / input_name, is_training,
                                 version_2)
    got = [dataclasses.asdict(example) for example in result.examples]
    assert got == _golden_examples(fixtures_dir, name)


def test_unrecoverable_training_answer_is_skipped_and_reported(fixtures_dir):
    result = read_squad_examples(fixtures_dir / "squad" / "inputs" / "train-v1.1.json", True)
    # "Zurich" annotated at the offset of the word "Zürich".
    assert result.skipped == [SkippedAnswer(qas_id="bad1", span_text="Zürich",
                                            answer_text="Zurich")]
    assert "bad1" not in {example.qas_id for example in result.examples}


def test_v2_training_points_unanswerable_questions_nowhere(fixtures_dir):
    result = read_squad_examples(fixtures_dir / "squad" / "inputs" / "train-v2.0.json", True,
                                 version_2_with_negative=True)
    impossible = [e for e in result.examples if e.is_impossible]
    assert [e.qas_id for e in impossible] == ["n1", "n2", "n3", "n4", "n5"]
    for example in impossible:
        assert (example.orig_answer_text, example.start_position, example.end_position) == (
            "", -1, -1)
    assert [item.qas_id for item in result.skipped] == ["bad1"]
    # The answerable questions are those of the v1.1 training file, read the same way.
    answerable = [dataclasses.asdict(e) for e in result.examples if not e.is_impossible]
    assert answerable == _golden_examples(fixtures_dir, "v1.1_train")


def test_questions_of_a_paragraph_share_its_words(fixtures_dir):
    result = read_squad_examples(fixtures_dir / "squad" / "inputs" / "dev-v1.1.json", False)
    first, second = result.examples[0], result.examples[1]
    assert first.doc_tokens is second.doc_tokens


def test_split_context_on_squad_whitespace_only():
    # U+202F splits words; U+00A0 (also a space character) does not, as in the original.
    doc_tokens, offsets = split_context(" ab\u202fc  d\u00a0e\n")
    assert doc_tokens == ["ab", "c", "d\u00a0e"]
    assert offsets == [-1, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2]


def _write(tmp_path, data, version="1.1", name="data.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"version": version, "data": data}), encoding="utf-8")
    return path


def _article(qas, context="Paris is the capital of France."):
    return {"title": "t", "paragraphs": [{"context": context, "qas": qas}]}


def _question(qid, answers, **extra):
    return {"id": qid, "question": "What?", "answers": answers, **extra}


def test_invalid_json_names_the_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"data": [', encoding="utf-8")
    with pytest.raises(ValueError, match="broken.json.*not valid JSON"):
        load_squad_json(path)


def test_missing_data_key_names_the_file(tmp_path):
    path = tmp_path / "nodata.json"
    path.write_text('{"version": "1.1"}', encoding="utf-8")
    with pytest.raises(ValueError, match='nodata.json.*"data"'):
        read_squad_examples(path, is_training=False)


@pytest.mark.parametrize("answers", [[], [{"text": "Paris", "answer_start": 0}] * 2])
def test_training_question_needs_exactly_one_answer(tmp_path, answers):
    path = _write(tmp_path, [_article([_question("qx", answers)])])
    with pytest.raises(ValueError, match=r"qx.*exactly 1 answer, found %d" % len(answers)):
        read_squad_examples(path, is_training=True)


def test_evaluation_reads_questions_without_answers(tmp_path):
    path = _write(tmp_path, [_article([_question("qx", [])])])
    [example] = read_squad_examples(path, is_training=False).examples
    assert (example.qas_id, example.start_position, example.is_impossible) == ("qx", None, False)


def test_answer_beyond_the_context_names_the_question(tmp_path):
    answers = [{"text": "France.", "answer_start": 26}]  # context is 31 characters
    path = _write(tmp_path, [_article([_question("far", answers)])])
    with pytest.raises(ValueError, match="far.*outside the context of 31 characters"):
        read_squad_examples(path, is_training=True)


def test_missing_question_key_names_the_question(tmp_path):
    path = _write(tmp_path, [_article([{"id": "nq", "answers": []}])])
    with pytest.raises(ValueError, match="data.json.*'nq'.*missing key \"question\""):
        read_squad_examples(path, is_training=False)


def test_v2_training_needs_is_impossible(tmp_path):
    answers = [{"text": "Paris", "answer_start": 0}]
    path = _write(tmp_path, [_article([_question("q0", answers)])], version="v2.0")
    with pytest.raises(ValueError, match="'q0'.*is_impossible"):
        read_squad_examples(path, is_training=True, version_2_with_negative=True)


def test_v2_file_read_as_v1_training_rejects_unanswerable(fixtures_dir):
    with pytest.raises(ValueError, match="'n1'.*exactly 1 answer, found 0"):
        read_squad_examples(fixtures_dir / "squad" / "inputs" / "train-v2.0.json", True)


def test_training_answer_word_span(tmp_path):
    answers = [{"text": "capital of", "answer_start": 13}]
    path = _write(tmp_path, [_article([_question("q1", answers)])])
    [example] = read_squad_examples(path, is_training=True).examples
    # Words: Paris(0) is(1) the(2) capital(3) of(4) France.(5)
    assert (example.start_position, example.end_position) == (3, 4)
    assert example.orig_answer_text == "capital of"
