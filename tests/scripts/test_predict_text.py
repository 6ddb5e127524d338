"""predict_text.py run as a user runs it: fill-mask and sentence vectors for lines of a file or
of stdin, the same values as the Python API, bad input named before anything is written."""
import csv
import json
import subprocess
import sys

import numpy as np
import pytest

from data.tokenization import FullTokenizer
from modeling import checkpoints
from tasks.embedding import SentenceEmbedder
from tasks.fill_mask import FillMask
from tests.support.classifier_runs import tiny_model  # noqa: F401 (a fixture)
from tests.support.modeling_fixtures import tiny_dir
from tests.support.paths import REPO_ROOT
from tests.support.script_runner import run_cells

pytestmark = pytest.mark.slow

LINES = ["The man went to the [MASK] to buy a [MASK] of milk .", "",
         "paris is the [MASK] of france . ||| it is in europe", "no mask at all"]


def _run(fixtures_dir, uncased_vocab, *flags, stdin=None):
    tiny = tiny_dir(fixtures_dir)
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "predict_text.py"), f"--vocab_file={uncased_vocab}",
         f"--bert_config_file={tiny / 'bert_config.json'}", "--max_seq_length=32",
         "--batch_size=2", *flags],
        cwd=REPO_ROOT, input=stdin, capture_output=True, check=False)


def _model(fixtures_dir, uncased_vocab):
    tiny = tiny_dir(fixtures_dir)
    return checkpoints.read_model(str(tiny / "bert_model.ckpt"), "tf1",
                                  str(tiny / "bert_config.json"), str(uncased_vocab)).model


def test_fill_mask_writes_a_line_for_every_input_line(fixtures_dir, uncased_vocab, tmp_path):
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    result = _run(fixtures_dir, uncased_vocab, "--task=fill_mask", "--top_k=3",
                  f"--model={tiny_dir(fixtures_dir) / 'bert_model.ckpt'}",
                  f"--input_file={tmp_path / 'in.txt'}", f"--output_file={tmp_path / 'out.jsonl'}")
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["line"] for r in records] == [0, 1, 2, 3]
    assert [r["text"] for r in records] == LINES
    assert [len(r["masks"]) for r in records] == [2, 0, 1, 0]
    expected = FillMask(_model(fixtures_dir, uncased_vocab),
                        FullTokenizer(str(uncased_vocab), True), max_seq_length=32)(LINES, 3)
    for record, masks in zip(records, expected):
        for written, scores in zip(record["masks"], masks):
            assert [w["token_id"] for w in written] == [s.token_id for s in scores]
            assert [w["token"] for w in written] == [s.token for s in scores]
            np.testing.assert_allclose([w["probability"] for w in written],
                                       [s.probability for s in scores], atol=1e-6)
    assert "2 of 4 lines have no [MASK]" in result.stderr.decode()


def test_embed_from_stdin_writes_vectors_and_their_lines(fixtures_dir, uncased_vocab, tmp_path):
    data = ("\n".join(LINES) + "\n").encode("utf-8")
    result = _run(fixtures_dir, uncased_vocab, "--task=embed", "--pooling=mean", "--normalize",
                  f"--model={tiny_dir(fixtures_dir) / 'bert_model.ckpt'}", "--input_file=-",
                  f"--output_file={tmp_path / 'vectors.npy'}", stdin=data)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    vectors = np.load(tmp_path / "vectors.npy")
    assert (tmp_path / "vectors.txt").read_text(encoding="utf-8").splitlines() == LINES
    expected = SentenceEmbedder(_model(fixtures_dir, uncased_vocab).encoder,
                                FullTokenizer(str(uncased_vocab), True), "mean", True,
                                max_seq_length=32)(LINES)
    assert vectors.shape == (4, 128)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


@pytest.fixture(scope="module")
def bad_input_runs(fixtures_dir, uncased_vocab, tmp_path_factory) -> dict[str, tuple]:
    """Three bad inputs, run in one process (`tests/support/script_runner.py`): {case: (its
    folder, what predict_text.py did)}. An earlier run's output is in the first two folders."""
    root = tmp_path_factory.mktemp("bad_inputs")
    tiny = tiny_dir(fixtures_dir)
    inputs = {"not_utf8": b"fine line\nbad \xff byte\n", "no_masked_lm": b"a [MASK] here\n",
              "question_alone": b"who? ||| the context\n\njust a question\n"}
    flags = {"not_utf8": ["--task=embed", f"--model={tiny / 'bert_model.ckpt'}"],
             "no_masked_lm": ["--task=fill_mask", f"--model={tiny / 'classifier/model.ckpt'}"],
             "question_alone": ["--task=squad", "--model=nowhere"]}
    cells = {}
    for case, data in inputs.items():
        (root / case).mkdir()
        (root / case / "in.txt").write_bytes(data)
        if case != "question_alone":
            (root / case / "out.jsonl").write_text("an earlier run's output\n")
        cells[case] = [f"--vocab_file={uncased_vocab}",
                       f"--bert_config_file={tiny / 'bert_config.json'}", "--max_seq_length=32",
                       "--batch_size=2", *flags[case], f"--input_file={root / case / 'in.txt'}",
                       f"--output_file={root / case / 'out.jsonl'}"]
    results = run_cells("predict_text.py", cells, str(root))
    return {case: (root / case, results[case]) for case in cells}


@pytest.mark.parametrize("case, cause", [
    ("not_utf8", "in.txt, line 2: not valid UTF-8"),
    ("no_masked_lm", "without the masked-LM head")])
def test_bad_input_is_named_and_nothing_is_written(bad_input_runs, case, cause):
    folder, result = bad_input_runs[case]
    assert result["status"] != 0
    assert cause in result["stderr"]
    assert (folder / "out.jsonl").read_text() == "an earlier run's output\n"
    assert sorted(p.name for p in folder.iterdir()) == ["in.txt", "out.jsonl"]


def test_a_line_without_its_parts_is_named_before_the_model_is_read(bad_input_runs):
    folder, result = bad_input_runs["question_alone"]
    assert result["status"] != 0
    assert ("in.txt, line 3: expected `question ||| context`, found 1 part(s)"
            in result["stderr"])
    assert not (folder / "out.jsonl").exists()


@pytest.mark.parametrize("task_name", ["mrpc", "stsb"])
def test_classify_gives_the_do_predict_answers_with_label_names(tiny_model, tmp_path, task_name):
    from data.classifier import glue_tasks
    from tests.support.classifier_runs import (TRAIN_FLAGS, check_ok, read_test_results,
                                               run_classifier, write_glue_task)
    task = glue_tasks.get_task(task_name)
    write_glue_task(tmp_path / "data", task_name)
    output_dir = tmp_path / "out"
    check_ok(run_classifier("--do_train", "--do_predict", task_name=task_name,
                            data_dir=tmp_path / "data", output_dir=output_dir, **tiny_model,
                            **TRAIN_FLAGS))
    spec = json.loads((output_dir / "model_spec.json").read_text())
    assert spec.get("labels") == (list(task.labels) or None)
    # The fine-tuned folder is a whole model: its vocabulary beside it, found without a flag.
    with open(tiny_model["vocab_file"], "rb") as f:
        assert (output_dir / "vocab.txt").read_bytes() == f.read()
    examples = glue_tasks.read_examples(task, tmp_path / "data", "test")
    lines = [f"{e.text_a} ||| {e.text_b}" if e.text_b else e.text_a for e in examples]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "predict_text.py"), "--task=classify",
         f"--model={output_dir}", "--max_seq_length=32", f"--input_file={tmp_path / 'in.txt'}",
         f"--output_file={tmp_path / 'answers.jsonl'}"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    expected = read_test_results(output_dir / "test_results.tsv")
    assert len(answers) == len(expected) == len(examples)
    if task.is_regression:
        np.testing.assert_allclose([a["prediction"] for a in answers], expected[:, 0], atol=1e-6)
        return
    np.testing.assert_allclose([[a["probabilities"][label] for label in task.labels]
                                for a in answers], expected, atol=1e-6)
    assert [a["label"] for a in answers] == [task.labels[i] for i in expected.argmax(1)]


def _predict_text(task: str, model, lines: list[str], tmp_path, *flags) -> list[dict]:
    """predict_text.py --task over `lines`; its JSON lines."""
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = tmp_path / f"{task}.jsonl"
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "predict_text.py"), f"--task={task}", f"--model={model}",
         f"--input_file={tmp_path / 'in.txt'}", f"--output_file={output}", "--batch_size=3",
         *flags], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]


def test_squad_answers_are_run_squads_predictions(fixtures_dir, uncased_vocab, tmp_path):
    """The original's fine-tuned tiny SQuAD model: run_squad.py --do_predict on a SQuAD file,
    predict_text.py on the same questions as `question ||| context` lines."""
    tiny = tiny_dir(fixtures_dir)
    dev_file = fixtures_dir / "squad" / "inputs" / "dev-v1.1.json"
    model = [f"--vocab_file={uncased_vocab}", f"--bert_config_file={tiny / 'bert_config.json'}",
             "--max_seq_length=128", "--doc_stride=64", "--max_query_length=32"]
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "run_squad.py"), "--do_predict", *model,
         f"--init_checkpoint={tiny / 'squad' / 'model.ckpt'}", f"--predict_file={dev_file}",
         f"--output_dir={tmp_path / 'squad'}"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    questions = [(qa["id"], qa["question"], paragraph["context"])
                 for article in json.loads(dev_file.read_text())["data"]
                 for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
    lines = [f"{question} ||| {' '.join(context.split())}" for _, question, context in questions]
    answers = _predict_text("squad", tiny / "squad" / "model.ckpt", lines + [""], tmp_path,
                            *model)
    predictions = json.loads((tmp_path / "squad" / "predictions.json").read_text())
    nbest = json.loads((tmp_path / "squad" / "nbest_predictions.json").read_text())
    assert len(answers) == len(questions) + 1 and answers[-1]["answer"] is None
    for (qas_id, _, _), answer in zip(questions, answers):
        assert answer["answer"] == predictions[qas_id]
        best = next(e for e in nbest[qas_id] if e["text"] == predictions[qas_id])
        np.testing.assert_allclose(
            [answer["probability"], answer["start_logit"], answer["end_logit"]],
            [best["probability"], best["start_logit"], best["end_logit"]], atol=1e-6)


def test_swag_choices_are_run_swags_predictions(tmp_path):
    from synthetic import swag_ner
    from tests.support.tiny_task_model import flag_args, write_tiny_model
    model = write_tiny_model(tmp_path / "model")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.csv").write_text(swag_ner.swag_csv(16, seed=1))
    (tmp_path / "data" / "test.csv").write_text(swag_ner.swag_csv(7, seed=3, labelled=False))
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "run_swag.py"), *flag_args({
            **model, "data_dir": tmp_path / "data", "output_dir": tmp_path / "out",
            "max_seq_length": 32, "do_train": True, "do_predict": True, "train_batch_size": 8,
            "num_train_epochs": 1.0})], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(tmp_path / "data" / "test.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    lines = [" ||| ".join([row["sent1"]] + [f"{row['sent2']} {row[f'ending{i}']}"
                                            for i in range(4)]) for row in rows]
    answers = _predict_text("swag", tmp_path / "out", lines, tmp_path, "--max_seq_length=32",
                            f"--vocab_file={model['vocab_file']}")
    with open(tmp_path / "out" / "predictions.csv", encoding="utf-8", newline="") as f:
        expected = list(csv.reader(f))[1:]
    assert len(answers) == len(expected) == len(rows)
    np.testing.assert_allclose([a["probabilities"] for a in answers],
                               [[float(x) for x in row[1:5]] for row in expected], atol=1e-6)
    assert [a["prediction"] for a in answers] == [int(row[5]) for row in expected]


def test_ner_tags_are_run_ners_predictions(tmp_path):
    """At 8 tokens a sequence, the test file's sentences of 7 to 11 words are tagged in windows
    3 tokens apart, the others in one sequence: the same tags either way."""
    from synthetic import swag_ner
    from tests.support.tiny_task_model import flag_args, write_tiny_model
    model = write_tiny_model(tmp_path / "model")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.txt").write_text(swag_ner.conll_text(12, seed=1))
    (tmp_path / "data" / "test.txt").write_text(swag_ner.conll_text(5, seed=3))
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "run_ner.py"), *flag_args({
            **model, "data_dir": tmp_path / "data", "output_dir": tmp_path / "out",
            "max_seq_length": 8, "doc_stride": 3, "do_train": True, "do_predict": True,
            "train_batch_size": 8, "num_train_epochs": 1.0})],
        cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    sentences, current = [], []
    for line in (tmp_path / "out" / "predictions_test.txt").read_text().splitlines():
        if line.strip():
            current.append(line.split())  # word gold predicted
        elif current:
            sentences.append(current)
            current = []
    sentences += [current] if current else []
    lines = [" ".join(word for word, _, _ in sentence) for sentence in sentences]
    assert max(len(sentence) for sentence in sentences) > 6
    answers = _predict_text("ner", tmp_path / "out", lines, tmp_path, "--max_seq_length=8",
                            "--doc_stride=3", f"--vocab_file={model['vocab_file']}")
    assert len(answers) == len(sentences) > 0
    for sentence, answer in zip(sentences, answers):
        assert answer["words"] == [word for word, _, _ in sentence]
        assert answer["tags"] == [predicted for _, _, predicted in sentence]
