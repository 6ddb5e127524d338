"""The table of formats x commands (`tests/support/model_table.py`): `extract_features.py` and
`predict_text.py`'s fill_mask, classify, squad, swag and ner, checked against the Python API on the
model each row was written from; the Hugging Face rows against transformers itself.

Each script runs once for all its cells (`tests/support/script_runner.py`); a refusal and a cell
that works also run as separate processes, as a user runs them, with the same results.
"""
import subprocess
import sys

import numpy as np
import pytest

from data.features import stack, text_sequence
from modeling.models.encoder import encoder_of
from tasks.classifier import TextClassifier
from tasks.fill_mask import FillMask
from tasks.ner import EntityTagger
from tasks.squad import AnswerRules, QuestionAnswerer, Windows
from tasks.swag import MultipleChoice
from tests.support.hf_reference import load_hf_model, run_hf
from tests.support.model_table import (MAX_SEQ_LENGTH, REPO_ROOT, ROW_NAMES, ROWS, TEXTS,
                                       column_named, expected, row_named)
from tests.support.model_table_cells import (check_outcome, hf_head_logits, make_table,
                                             read_json_lines, tokenizer_of)

pytestmark = pytest.mark.slow

COLUMNS = ("extract_features", "fill_mask", "classify", "squad", "swag", "ner")
HF_ROWS = tuple(row.name for row in ROWS if row.kind in ("hf", "sentence_transformers"))
TOLERANCE = dict(atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return make_table(str(tmp_path_factory.mktemp("model_table_text")),
                      [([column_named(name) for name in COLUMNS], None)])


def _features(built, texts):
    tokenizer = tokenizer_of(built)
    return [text_sequence(text, tokenizer, MAX_SEQ_LENGTH)[0] for text in texts]


def _layer(line: dict, index: int) -> np.ndarray:
    """[tokens, H] values of one layer in an extract_features.py output line."""
    return np.array([next(layer["values"] for layer in token["layers"] if layer["index"] == index)
                     for token in line["features"]])


def _check_extract_features(built, output):
    features = _features(built, TEXTS["extract_features"])
    layers = encoder_of(built.model)(stack(features),
                                     training=False)["encoder_outputs"]
    lines = read_json_lines(output)
    assert [line["linex_index"] for line in lines] == list(range(len(features)))
    for number, (feature, line) in enumerate(zip(features, lines)):
        assert [token["token"] for token in line["features"]] == feature.tokens
        for index in (-1, -2):
            np.testing.assert_allclose(
                _layer(line, index), layers[index][number, :len(feature.tokens)],
                **TOLERANCE, err_msg=f"line {number}, layer {index}")


def _check_fill_mask(built, output):
    expected_masks = FillMask(built.model, tokenizer_of(built), MAX_SEQ_LENGTH)(
        TEXTS["fill_mask"], top_k=5)
    lines = read_json_lines(output)
    assert len(lines) == len(expected_masks)
    for line, masks in zip(lines, expected_masks):
        assert [[(s["token"], s["token_id"]) for s in slot] for slot in line["masks"]] == \
            [[(s.token, s.token_id) for s in slot] for slot in masks], line["text"]
        np.testing.assert_allclose([[s["probability"] for s in slot] for slot in line["masks"]],
                                   [[s.probability for s in slot] for slot in masks], **TOLERANCE)


def _check_classify(built, output):
    answers = TextClassifier(built.model, tokenizer_of(built), built.label_names,
                             MAX_SEQ_LENGTH)(TEXTS["classify"])
    lines = read_json_lines(output)
    assert [line["label"] for line in lines] == [answer.label for answer in answers]
    for line, answer in zip(lines, answers):
        assert list(line["probabilities"]) == list(answer.probabilities)
        np.testing.assert_allclose(list(line["probabilities"].values()),
                                   list(answer.probabilities.values()), **TOLERANCE)


def _check_squad(built, output):
    answers = QuestionAnswerer(built.model, tokenizer_of(built),
                               Windows(MAX_SEQ_LENGTH, doc_stride=4, max_query_length=6),
                               AnswerRules(do_lower_case=True))(TEXTS["squad"])
    lines = read_json_lines(output)
    assert [line["answer"] for line in lines] == [answer.text for answer in answers]
    for line, answer in zip(lines, answers):
        np.testing.assert_allclose(
            [line["probability"], line["start_logit"], line["end_logit"]],
            [answer.probability, answer.start_logit, answer.end_logit], **TOLERANCE)


def _check_swag(built, output):
    choices = MultipleChoice(built.model, tokenizer_of(built), MAX_SEQ_LENGTH)(TEXTS["swag"])
    lines = read_json_lines(output)
    assert [line["prediction"] for line in lines] == [choice.prediction for choice in choices]
    np.testing.assert_allclose([line["probabilities"] for line in lines],
                               [choice.probabilities for choice in choices], **TOLERANCE)


def _check_ner(built, output):
    sentences = EntityTagger(built.model, tokenizer_of(built), built.label_names,
                             MAX_SEQ_LENGTH)(TEXTS["ner"])
    lines = read_json_lines(output)
    assert [line["words"] for line in lines] == [[w.word for w in words] for words in sentences]
    assert [line["tags"] for line in lines] == [[w.tag for w in words] for words in sentences]


CHECKS = {"extract_features": _check_extract_features, "fill_mask": _check_fill_mask,
          "classify": _check_classify, "squad": _check_squad, "swag": _check_swag,
          "ner": _check_ner}


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("row", ROW_NAMES)
def test_cell(table, row, column):
    refusal = expected(row_named(row), column_named(column))
    result = table.results[column, row]
    check_outcome(result, refusal)
    if refusal is None:
        CHECKS[column](table.built[row], result.output)


@pytest.mark.parametrize("row", HF_ROWS)
def test_hugging_face_rows_compute_what_transformers_computes(table, row):
    """extract_features.py's outputs are transformers' hidden states, and the head as the
    project reads it gives transformers' logits."""
    built = table.built[row]
    hf_model, _ = load_hf_model(built.row.source, built.path)
    features = _features(built, TEXTS["extract_features"])
    arrays = stack(features)
    hf_outputs = run_hf(hf_model, arrays["input_ids"], arrays["input_mask"],
                        arrays["segment_ids"])
    for number, (feature, line) in enumerate(zip(features, read_json_lines(
            table.results["extract_features", row].output))):
        for index in (-1, -2):
            np.testing.assert_allclose(
                _layer(line, index),
                hf_outputs["hidden_states"][index][number, :len(feature.tokens)],
                **TOLERANCE)
    for ours, theirs in hf_head_logits(built, hf_outputs, arrays):
        np.testing.assert_allclose(ours, theirs, **TOLERANCE)


def _shell(script: str, arguments) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, script, *arguments], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


def test_the_runner_runs_cells_as_the_shell_does(table, tmp_path):
    """A refusal and a cell that works, run as separate processes: the same status, error line
    and output as the runner's."""
    refused = table.results["fill_mask", "tf1_encoder"]
    shell = _shell("predict_text.py", refused.arguments)
    assert (shell.returncode, _error_lines(shell.stderr)) == \
        (refused.status, _error_lines(refused.stderr)) == (1, _error_lines(refused.stderr))
    works = table.results["classify", "keras_classifier"]
    output = tmp_path / "answers.jsonl"
    shell = _shell("predict_text.py", [f"--output_file={output}" if a.startswith("--output_file=")
                                       else a for a in works.arguments])
    assert shell.returncode == works.status == 0, shell.stderr[-3000:]
    with open(works.output, encoding="utf-8") as f:
        assert output.read_text(encoding="utf-8") == f.read()
