"""End-to-end runs of run_ner.py on generated files in the CoNLL-2003 format."""
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from data.ner import metrics
from synthetic import swag_ner
from tests.support.paths import REPO_ROOT
from tests.support.script_runner import run_cells
from tests.support.tiny_task_model import flag_args, write_tiny_model

pytestmark = pytest.mark.slow

_LABELS = ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
_TYPES = ("LOC", "MISC", "ORG", "PER")


def _run(**flags) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "run_ner.py"), *flag_args(flags)],
                          capture_output=True, text=True, cwd=REPO_ROOT)


def _check(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _eval_results(path) -> dict[str, float]:
    return {key: float(value) for key, value in
            (line.rstrip("\n").split(" = ") for line in open(path, encoding="utf-8"))}


def _sentences(path, columns: int) -> list[list[list[str]]]:
    """The sentences of a CoNLL-style file as lists of split lines, -DOCSTART- left out."""
    sentences, current = [], []
    for line in open(path, encoding="utf-8"):
        fields = line.split()
        if fields and fields[0] != "-DOCSTART-":
            assert len(fields) == columns
            current.append(fields)
        elif current:
            sentences.append(current)
            current = []
    return sentences + ([current] if current else [])


def _write_data(folder, train_documents: int, seed: int):
    folder.mkdir()
    (folder / "train.txt").write_text(swag_ner.conll_text(train_documents, seed=seed))
    (folder / "valid.txt").write_text(swag_ner.conll_text(6, seed=seed + 1))
    (folder / "test.txt").write_text(swag_ner.conll_text(5, seed=seed + 2))
    return folder


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return write_tiny_model(tmp_path_factory.mktemp("ner") / "model")


@pytest.fixture(scope="module")
def fine_tuned(model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fine_tuned")
    flags = {**model, "data_dir": _write_data(folder / "data", 12, seed=1),
             "max_seq_length": 40}
    _check(_run(**flags, output_dir=folder / "out", do_train=True, do_eval=True,
                do_predict=True, document_context=True, train_batch_size=8,
                num_train_epochs=0.5))
    return folder / "out", flags


def test_outputs_of_training_evaluation_and_prediction(fine_tuned):
    output_dir, flags = fine_tuned
    num_train = len(_sentences(flags["data_dir"] / "train.txt", 4))
    assert (output_dir / "label_list.txt").read_text().split() == _LABELS
    for split, results_file, data_file in (("dev", "eval_results.txt", "valid.txt"),
                                           ("test", "test_results.txt", "test.txt")):
        gold = _sentences(flags["data_dir"] / data_file, 4)
        predicted = _sentences(output_dir / f"predictions_{split}.txt", 3)
        # The predictions file repeats each word and its gold tag, sentence by sentence.
        assert [[(w[0], w[3]) for w in s] for s in gold] == \
            [[(w[0], w[1]) for w in s] for s in predicted]
        assert {w[2] for s in predicted for w in s} <= set(_LABELS)

        results = _eval_results(output_dir / results_file)
        expected_keys = {"eval_precision", "eval_recall", "eval_f1", "eval_accuracy",
                         "eval_loss", "global_step"}
        expected_keys |= {f"eval_{m}_{t}" for m in ("precision", "recall", "f1") for t in _TYPES}
        assert set(results) == expected_keys
        assert results["global_step"] == int(num_train / 8 * 0.5)
        evaluation = metrics.evaluate_ner([[w[1] for w in s] for s in predicted],
                                              [[w[2] for w in s] for s in predicted])
        assert results["eval_f1"] == pytest.approx(evaluation.overall.f1 / 100, abs=1e-6)
        assert results["eval_accuracy"] == pytest.approx(evaluation.accuracy / 100, abs=1e-6)
        assert 0 < results["eval_loss"] < 10

        # conlleval's first line, counted here by hand: every entity starts with B- (IOB2).
        tokens = sum(len(s) for s in gold)
        phrases = sum(w[3].startswith("B-") for s in gold for w in s)
        report = (output_dir / f"conlleval_{split}.txt").read_text()
        assert report.startswith(f"processed {tokens} tokens with {phrases} phrases;")

    reader = tf.train.load_checkpoint(str(output_dir / "model.ckpt"))
    shapes = reader.get_variable_to_shape_map()
    assert shapes["cls/token_classifier/output_weights"] == [9, 32]
    assert shapes["cls/token_classifier/output_bias"] == [9]
    assert "bert/embeddings/word_embeddings" in shapes
    assert not list(output_dir.glob("*.tmp*"))


def test_prediction_alone_uses_the_saved_labels_and_model(fine_tuned, tmp_path):
    output_dir, flags = fine_tuned
    _check(_run(**{**flags, "init_checkpoint": output_dir / "model.ckpt"},
                output_dir=tmp_path / "out", do_predict=True, document_context=True))
    assert (tmp_path / "out" / "predictions_test.txt").read_text() == \
        (output_dir / "predictions_test.txt").read_text()
    assert not (tmp_path / "out" / "eval_results.txt").exists()


def test_fine_tuning_learns_the_generated_entities(model, tmp_path):
    data_dir = _write_data(tmp_path / "data", 60, seed=4)
    _check(_run(**model, data_dir=data_dir, output_dir=tmp_path / "out", do_train=True,
                do_eval=True, document_context=True, max_seq_length=48, learning_rate=1e-3,
                num_train_epochs=8.0))
    assert _eval_results(tmp_path / "out" / "eval_results.txt")["eval_f1"] >= 0.9


def test_feature_based_tagger_learns_with_a_frozen_encoder_and_reuses_features(model, tmp_path):
    data_dir = _write_data(tmp_path / "data", 60, seed=5)
    flags = {**model, "data_dir": data_dir, "output_dir": tmp_path / "out", "max_seq_length": 48,
             "feature_based": True, "feature_layers": "-1,-2", "lstm_units": 64,
             "feature_cache_dir": tmp_path / "cache"}
    num_train = len(_sentences(data_dir / "train.txt", 4))
    first = _check(_run(**flags, do_train=True, do_eval=True, learning_rate=3e-3,
                        num_train_epochs=15.0))
    assert first.stderr.count("feature cache miss") == 2          # train and dev
    results = _eval_results(tmp_path / "out" / "eval_results.txt")
    assert results["eval_f1"] >= 0.9

    # The encoder written beside the tagger is the initial one: frozen, not trained.
    initial = tf.train.load_checkpoint(str(model["init_checkpoint"]))
    written = tf.train.load_checkpoint(str(tmp_path / "out" / "model.ckpt"))
    names = set(initial.get_variable_to_shape_map())
    assert set(written.get_variable_to_shape_map()) == names | {"global_step"}
    for name in names:
        np.testing.assert_array_equal(written.get_tensor(name), initial.get_tensor(name))

    entries = sorted((tmp_path / "cache").iterdir())
    assert len(entries) == 2
    stamps = {entry: (entry / "features.npy").stat().st_mtime_ns for entry in entries}
    second = _check(_run(**flags, do_eval=True, do_predict=True))
    assert second.stderr.count("feature cache hit") == 1          # dev
    assert second.stderr.count("feature cache miss") == 1         # test
    assert {e: (e / "features.npy").stat().st_mtime_ns for e in entries} == stamps
    assert len(list((tmp_path / "cache").iterdir())) == 3
    again = _eval_results(tmp_path / "out" / "eval_results.txt")
    assert again["global_step"] == results["global_step"] == int(num_train / 32 * 15)
    assert again["eval_f1"] == results["eval_f1"]
    assert again["eval_loss"] == pytest.approx(results["eval_loss"], rel=1e-5)
    assert (tmp_path / "out" / "predictions_test.txt").is_file()


def _reshaped(source, target, line_fn):
    """`source`'s token lines rewritten by `line_fn(fields)`; other lines as they are."""
    lines = []
    for line in open(source, encoding="utf-8"):
        fields = line.split()
        lines.append(" ".join(line_fn(fields)) + "\n" if fields and fields[0] != "-DOCSTART-"
                     else line)
    target.write_text("".join(lines), encoding="utf-8")
    return target


def _to_iobes(sentence_tags: list[str]) -> list[str]:
    """IOB2 -> IOBES by hand: a one-word entity is S-, an entity's last word E-."""
    found = []
    for index, tag in enumerate(sentence_tags):
        following = sentence_tags[index + 1] if index + 1 < len(sentence_tags) else "O"
        ends = not following.startswith("I-")
        if tag.startswith("B-"):
            found.append(("S-" if ends else "B-") + tag[2:])
        elif tag.startswith("I-"):
            found.append(("E-" if ends else "I-") + tag[2:])
        else:
            found.append(tag)
    return found


def test_two_column_and_iobes_files_train_and_score_as_the_four_column_ones(model, tmp_path):
    """Two columns (word, tag) hold CoNLL-2003's information for a tagger: the same sentences and
    seed give the four-column run's entity F1; in IOBES they train and are scored by entity."""
    four = _write_data(tmp_path / "four", 8, seed=5)
    two = tmp_path / "two"
    two.mkdir()
    for name in ("train.txt", "valid.txt"):
        _reshaped(four / name, two / name, lambda fields: [fields[0], fields[-1]])
    flags = {**model, "max_seq_length": 40, "train_batch_size": 8, "num_train_epochs": 1,
             "do_train": True, "do_eval": True}
    _check(_run(**flags, data_dir=four, output_dir=tmp_path / "out_four"))
    _check(_run(**flags, train_file=two / "train.txt", dev_file=two / "valid.txt",
                output_dir=tmp_path / "out_two"))
    assert (tmp_path / "out_two" / "eval_results.txt").read_text() == \
        (tmp_path / "out_four" / "eval_results.txt").read_text()
    iobes = tmp_path / "iobes"
    iobes.mkdir()
    for name in ("train.txt", "valid.txt"):
        sentences = _sentences(four / name, 4)
        tags = iter(tag for sentence in sentences
                    for tag in _to_iobes([fields[-1] for fields in sentence]))
        _reshaped(four / name, iobes / name, lambda fields: [fields[0], next(tags)])
    assert "S-" in (iobes / "train.txt").read_text() and "E-" in (iobes / "train.txt").read_text()
    _check(_run(**flags, data_dir=iobes, output_dir=tmp_path / "out_iobes",
                eval_every_epoch=True))
    # The same entities: read into IOB2, the run is the four-column one.
    assert _eval_results(tmp_path / "out_iobes" / "eval_results.txt") == \
        _eval_results(tmp_path / "out_four" / "eval_results.txt")
    assert (tmp_path / "out_iobes" / "label_list.txt").read_text().split() == _LABELS
    best = _eval_results(tmp_path / "out_iobes" / "best" / "eval_results.txt")
    assert best == _eval_results(tmp_path / "out_iobes" / "eval_results_epoch_1.txt")


@pytest.fixture(scope="module")
def refusals(model, tmp_path_factory) -> dict[str, tuple]:
    """Runs refused before anything is written, all in one process
    (`tests/support/script_runner.py`): {case: (its folders, the dev line changed, what
    run_ner.py did)}."""
    root = tmp_path_factory.mktemp("refusals")
    for name in ("tag_outside", "dev_tag", "features"):
        (root / name).mkdir()
    cases, cells = {}, {}

    def case(name, data_dir, line=None, **flags):
        out = root / name / "out"
        cases[name] = (data_dir, out, line)
        cells[name] = flag_args({**model, "data_dir": data_dir, "output_dir": out,
                                 "max_seq_length": 40, **flags})

    data = _write_data(root / "tag_outside" / "data", 2, seed=3)
    lines = (data / "valid.txt").read_text().splitlines()
    lines[2] = lines[2].rsplit(" ", 1)[0] + " B-FOO"
    (data / "valid.txt").write_text("\n".join(lines) + "\n")
    case("tag_outside", data, 3, do_train=True, do_eval=True)
    data = _write_data(root / "dev_tag" / "data", 4, seed=7)
    valid = (data / "valid.txt").read_text().splitlines()
    line = next(i for i, text in enumerate(valid) if text.split() and text.split()[-1] == "O"
                and not text.startswith("-DOCSTART-"))
    valid[line] = " ".join(valid[line].split()[:-1] + ["B-DATE"])
    (data / "valid.txt").write_text("\n".join(valid) + "\n")
    case("dev_tag", data, line + 1, do_train=True, do_eval=True)
    data = _write_data(root / "features" / "data", 2, seed=3)
    case("feature_layers", data, do_train=True, feature_based=True, feature_layers="-1,-3")
    case("feature_stride", data, do_eval=True, feature_based=True, doc_stride=16)
    results = run_cells("run_ner.py", cells, str(root))
    return {name: (*cases[name], results[name]) for name in cases}


def test_tag_outside_the_training_labels_fails_before_writing(refusals):
    data_dir, out, line, result = refusals["tag_outside"]
    assert result["status"] != 0
    assert f"{data_dir / 'valid.txt'}: Line {line}: tag 'B-FOO'" in result["stderr"]
    assert not out.exists()


def test_feature_layers_are_checked(refusals):
    _, out, _, result = refusals["feature_layers"]
    assert result["status"] != 0
    assert "--feature_layers=-1,-3" in result["stderr"]
    assert not out.exists()
    _, out, _, result = refusals["feature_stride"]
    assert result["status"] != 0
    assert "--doc_stride: --feature_based reads each word from one sequence" in result["stderr"]
    assert not out.exists()


def test_a_dev_tag_outside_the_training_tags_names_its_file_and_line(refusals):
    data_dir, out, line, result = refusals["dev_tag"]
    assert result["status"] == 1
    assert (f"{data_dir / 'valid.txt'}: Line {line}: tag 'B-DATE' is not one of the labels"
            in result["stderr"])
    assert not out.exists()
