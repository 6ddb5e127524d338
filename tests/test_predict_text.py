"""predict_text.py run as a user runs it: fill-mask and sentence vectors for lines of a file or
of stdin, the same values as the Python API, bad input named before anything is written."""
import json
import subprocess
import sys

import numpy as np
import pytest

from data.tokenization import FullTokenizer
from modeling import checkpoints
from serving.text_tasks import FillMask, SentenceEmbedder
from tests.conftest import REPO_ROOT
from tests.modeling_fixtures import tiny_dir
from tests.test_run_classifier import tiny_model  # noqa: F401 (a fixture)

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


def test_bad_input_is_named_and_nothing_is_written(fixtures_dir, uncased_vocab, tmp_path):
    (tmp_path / "in.txt").write_bytes(b"fine line\nbad \xff byte\n")
    output = tmp_path / "out.jsonl"
    output.write_text("an earlier run's output\n")
    result = _run(fixtures_dir, uncased_vocab, "--task=embed",
                  f"--model={tiny_dir(fixtures_dir) / 'bert_model.ckpt'}",
                  f"--input_file={tmp_path / 'in.txt'}", f"--output_file={output}")
    assert result.returncode != 0
    assert "in.txt, line 2: not valid UTF-8" in result.stderr.decode()
    assert output.read_text() == "an earlier run's output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.jsonl"]
    (tmp_path / "in.txt").write_text("a [MASK] here\n")
    result = _run(fixtures_dir, uncased_vocab, "--task=fill_mask",
                  f"--model={tiny_dir(fixtures_dir) / 'classifier/model.ckpt'}",
                  f"--input_file={tmp_path / 'in.txt'}", f"--output_file={output}")
    assert result.returncode != 0
    assert "without the masked-LM head" in result.stderr.decode()
    assert output.read_text() == "an earlier run's output\n"


@pytest.mark.parametrize("task_name", ["mrpc", "stsb"])
def test_classify_gives_the_do_predict_answers_with_label_names(tiny_model, tmp_path, task_name):
    from data.classifier import glue_tasks
    from tests.test_run_classifier import _TRAIN_FLAGS, _check_ok, _run as run_classifier
    from tests.test_run_classifier import _test_results, _write_glue_task
    task = glue_tasks.get_task(task_name)
    _write_glue_task(tmp_path / "data", task_name)
    output_dir = tmp_path / "out"
    _check_ok(run_classifier("--do_train", "--do_predict", task_name=task_name,
                             data_dir=tmp_path / "data", output_dir=output_dir, **tiny_model,
                             **_TRAIN_FLAGS))
    spec = json.loads((output_dir / "model_spec.json").read_text())
    assert spec.get("labels") == (list(task.labels) or None)
    examples = glue_tasks.read_examples(task, tmp_path / "data", "test")
    lines = [f"{e.text_a} ||| {e.text_b}" if e.text_b else e.text_a for e in examples]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "predict_text.py"), "--task=classify",
         f"--model={output_dir}", f"--vocab_file={tiny_model['vocab_file']}",
         "--max_seq_length=32", f"--input_file={tmp_path / 'in.txt'}",
         f"--output_file={tmp_path / 'answers.jsonl'}"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    expected = _test_results(output_dir / "test_results.tsv")
    assert len(answers) == len(expected) == len(examples)
    if task.is_regression:
        np.testing.assert_allclose([a["prediction"] for a in answers], expected[:, 0], atol=1e-6)
        return
    np.testing.assert_allclose([[a["probabilities"][label] for label in task.labels]
                                for a in answers], expected, atol=1e-6)
    assert [a["label"] for a in answers] == [task.labels[i] for i in expected.argmax(1)]
