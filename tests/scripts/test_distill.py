"""distill.py end to end on a tiny teacher, the command lines a user runs.

One teacher for the module: a 2-layer classifier trained here on the generated sentiment rows,
written as run_classifier.py writes its output folder. The task's training file given to
distill.py has *random* labels, so that a student distilled at temperature 1 with alpha 1
(the teacher's outputs alone) shows that it learns the teacher, not the file. Three processes in
all: a run killed with SIGKILL while it trains; distill.py's cells in one worker (the killed run
resumed, a narrower student with the intermediate losses and transfer data, students started
from the teacher's layers, from another checkpoint and on another vocabulary, bad input); and
run_classifier.py --do_eval reading the students back. predict_text.py's classifier reads them
in-process.
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from data import features, tokenization
from modeling import checkpoints
from modeling.config import BertConfig
from modeling.models.encoder import BertEncoder
from synthetic import corpus
from tasks.classifier import TextClassifier
from tests.support.paths import REPO_ROOT
from tests.support.script_errors import assert_user_error
from tests.support.script_runner import run_cells
from training import fine_tuning

pytestmark = pytest.mark.slow

_SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_LENGTH = 16
_NUM_TRAIN = 64
# 64 rows, batch 8, 12 epochs: 96 steps, a checkpoint every 8.
_DISTILL = {"task_name": "sst2", "max_seq_length": _LENGTH, "train_batch_size": 8,
            "num_train_epochs": 12, "learning_rate": 3e-3, "save_checkpoints_steps": 8,
            "temperature": 1.0, "alpha": 1.0}
_TOTAL_STEPS = 96


def _train_texts() -> list[str]:
    return [text for text, _ in corpus.sentiment_rows(_NUM_TRAIN, seed=1)]


def _train_teacher(config: BertConfig, vocab_file: str) -> keras.Model:
    """A classifier that learns the sentiment rows' labels (about 97% on new rows)."""
    keras.utils.set_random_seed(0)
    model = checkpoints.build_model(config, checkpoints.ModelSpec("classifier", 2))
    tokenizer = tokenization.FullTokenizer(vocab_file, True)
    rows = corpus.sentiment_rows(_NUM_TRAIN, seed=1)
    inputs = {key: tf.constant(values) for key, values in features.stack(
        [features.text_sequence(text, tokenizer, _LENGTH)[0] for text, _ in rows]).items()}
    labels = tf.constant([label for _, label in rows])
    optimizer = keras.optimizers.Adam(3e-3)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            logits = model(inputs, training=True)["logits"]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    for _ in range(30):
        step()
    return model


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> dict[str, pathlib.Path]:
    """The teacher's folder, the task's folder (random training labels, true dev labels), a
    student config, a pretrained encoder and a vocabulary with one more word."""
    root = tmp_path_factory.mktemp("distill")
    folder = root / "teacher"
    folder.mkdir()
    words = sorted({word for text, _ in corpus.sentiment_rows(500, 0) for word in text.split()})
    (folder / "vocab.txt").write_text("\n".join(_SPECIAL_TOKENS + words) + "\n")
    config = BertConfig(vocab_size=len(_SPECIAL_TOKENS) + len(words), hidden_size=32,
                        num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=32)
    model = _train_teacher(config, str(folder / "vocab.txt"))
    fine_tuning.save_fine_tuned(fine_tuning.Trained(model, None, 30), str(folder),
                                labels=["0", "1"], do_lower_case=True)
    data = root / "sst2"
    data.mkdir()
    rng = np.random.default_rng(5)
    (data / "train.tsv").write_text("sentence\tlabel\n" + "".join(
        f"{text}\t{rng.integers(0, 2)}\n" for text in _train_texts()))
    (data / "dev.tsv").write_text(corpus.sst2_tsv(32, seed=2))
    small = dict(config.to_dict(), hidden_size=16, num_hidden_layers=1, intermediate_size=32)
    (root / "small_config.json").write_text(json.dumps(small))
    (root / "one_layer_config.json").write_text(json.dumps({**config.to_dict(),
                                                            "num_hidden_layers": 1}))
    pretrained = root / "pretrained"
    pretrained.mkdir()
    checkpoints.save_tf1_checkpoint(BertEncoder(config), str(pretrained / "bert_model.ckpt"))
    shutil.copy(folder / "vocab.txt", pretrained / "vocab.txt")
    config.to_json_file(str(pretrained / "bert_config.json"))
    other_words = _SPECIAL_TOKENS + words[:-1] + ["zebra"]
    (root / "other_vocab.txt").write_text("\n".join(other_words) + "\n")
    # The same words under other ids: a student fed the teacher's ids would learn nothing.
    (root / "reversed_vocab.txt").write_text("\n".join(_SPECIAL_TOKENS + words[::-1]) + "\n")
    (root / "transfer.txt").write_text("the happy cat sings\nthe sad dog ||| waits in a park\n")
    return {"root": root, "teacher": folder, "data": data, "model": model}


def _flags(paths, output_dir, **extra) -> list[str]:
    values = {**_DISTILL, "teacher": paths["teacher"], "data_dir": paths["data"],
              "student_config": paths["root"] / "one_layer_config.json",
              "output_dir": output_dir, "verbosity": 0, **extra}
    return [f"--{name}={value}" for name, value in values.items() if value is not None]


def _kill_while_training(arguments: list[str], output_dir: pathlib.Path) -> None:
    """Runs distill.py until its first training checkpoint, then SIGKILLs it."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    process = subprocess.Popen([sys.executable, str(REPO_ROOT / "distill.py"), *arguments],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env=env, cwd=REPO_ROOT)
    deadline = time.monotonic() + 300
    while not (output_dir / "ckpt-8.index").exists():
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    assert process.returncode == -signal.SIGKILL


_BAD = {
    "vocabulary": ({"student_vocab_file": "other_vocab.txt"}, "Pass --allow_vocab_mismatch"),
    "layers": ({"student_layers": "0,5", "student_config": None},
               "--student_layers=0,5: layers 5 are not layers of the teacher"),
    "pretrained": ({"teacher": "pretrained"}, "not a fine-tuned classifier, tagger or SQuAD"),
    "alpha": ({"alpha": 1.5}, "--alpha=1.5 must be between 0 and 1"),
}


@pytest.fixture(scope="module")
def runs(teacher) -> dict:
    """The killed run resumed, the narrower student, and every bad input: one worker."""
    root = teacher["root"]
    resumed = root / "resumed"
    _kill_while_training(_flags(teacher, resumed, do_train="true"), resumed)
    killed_log = (resumed / "train_log.jsonl").read_text().splitlines()
    cells = {"resumed": _flags(teacher, resumed, do_train="true", do_eval="true"),
             "narrow": _flags(teacher, root / "narrow", do_train="true",
                              student_config=root / "small_config.json",
                              hidden_loss_layers="embeddings:embeddings,0:-1",
                              attention_loss_layers="0:1", transfer_file=root / "transfer.txt",
                              temperature=2.0, alpha=0.5, num_train_epochs=1),
             # A learning rate of 0: the student written is the student it started as.
             "from_layers": _flags(teacher, root / "from_layers", do_train="true",
                                   student_config=None, student_layers="1",
                                   learning_rate=0.0, num_train_epochs=1),
             "initialised": _flags(teacher, root / "initialised", do_train="true",
                                   student_config=None,
                                   student_init=root / "pretrained" / "bert_model.ckpt",
                                   learning_rate=0.0, num_train_epochs=1),
             "mismatch": _flags(teacher, root / "mismatch", do_train="true",
                                student_vocab_file=root / "reversed_vocab.txt",
                                allow_vocab_mismatch="true")}
    for name, (changes, _) in _BAD.items():
        changes = {flag: root / value if flag in ("student_vocab_file", "teacher") else value
                   for flag, value in changes.items()}
        assert name not in cells, name
        cells[name] = _flags(teacher, root / f"bad_{name}", do_train="true", **changes)
    results = run_cells("distill.py", cells, str(root))
    print({name: round(result["seconds"], 1) for name, result in results.items()})
    return {"results": results, "killed_log": killed_log, "root": root,
            "resumed": resumed, "narrow": root / "narrow"}


def _inputs(texts, vocab_file) -> dict:
    tokenizer = tokenization.FullTokenizer(str(vocab_file), True)
    return features.stack([features.text_sequence(text, tokenizer, _LENGTH)[0] for text in texts])


def _classes(model, texts, vocab_file) -> np.ndarray:
    """A model's classes, run eagerly (no compilation to wait for)."""
    return model(_inputs(texts, vocab_file))["logits"].numpy().argmax(-1)


def test_a_student_at_temperature_1_alpha_1_learns_the_teachers_labels(teacher, runs):
    result = runs["results"]["resumed"]
    assert result["status"] == 0, result["stderr"][-3000:]
    texts = _train_texts()
    theirs = _classes(teacher["model"], texts, teacher["teacher"] / "vocab.txt")
    # Read back as predict_text.py reads a model.
    student = TextClassifier.from_checkpoint(str(runs["resumed"]), max_seq_length=_LENGTH)
    ours = np.array([int(answer.label) for answer in student(texts)])
    agreement = np.mean(theirs == ours)
    assert agreement >= 0.9, agreement
    # The training file's labels are random: alpha 1 never learns them.
    file_labels = [int(line.split("\t")[1]) for line in
                   (teacher["data"] / "train.tsv").read_text().splitlines()[1:]]
    assert np.mean(np.array(file_labels) == ours) < 0.75
    accuracy = float((runs["resumed"] / "eval_results.txt").read_text()
                     .split("eval_accuracy = ")[1].split("\n")[0])
    assert accuracy >= 0.8   # the dev set's true labels, as the teacher's


def test_a_killed_run_resumes_from_its_checkpoint_and_reuses_the_teachers_outputs(teacher, runs):
    stderr = runs["results"]["resumed"]["stderr"]
    assert "resumed from" in stderr and "ckpt-" in stderr, stderr[-3000:]
    assert f"teacher outputs of {_NUM_TRAIN} rows: 0 computed" in stderr, stderr[-3000:]
    assert "examples/s, ETA" in stderr
    killed_steps = [json.loads(line)["step"] for line in runs["killed_log"]]
    assert 8 <= max(killed_steps) < _TOTAL_STEPS
    steps = [json.loads(line)["step"] for line in
             (runs["resumed"] / "train_log.jsonl").read_text().splitlines()]
    assert steps == list(range(1, _TOTAL_STEPS + 1))
    folder = runs["resumed"]
    for name in ("model.ckpt.index", "bert_config.json", "model_spec.json", "vocab.txt",
                 "label_list.txt"):
        assert (folder / name).exists(), name
    assert json.loads((folder / "model_spec.json").read_text())["labels"] == ["0", "1"]


def test_a_narrower_student_with_intermediate_losses_and_transfer_data(teacher, runs):
    result = runs["results"]["narrow"]
    assert result["status"] == 0, result["stderr"][-3000:]
    assert f"distilling on {_NUM_TRAIN + 2} rows ({_NUM_TRAIN} of the training set, 2 of " \
           "--transfer_file)" in result["stderr"]
    assert "hidden_loss = " in result["stderr"] and "attention_loss = " in result["stderr"]
    folder = runs["narrow"]
    assert json.loads((folder / "bert_config.json").read_text())["hidden_size"] == 16
    names = [name for name, _ in tf.train.list_variables(str(folder / "model.ckpt"))]
    assert "output_weights" in names and not any("projection" in name for name in names)
    with open(next((folder / "teacher_outputs").glob("*.json"))) as f:
        assert json.load(f)["num_rows"] == _NUM_TRAIN + 2


def _checkpoint_values(prefix: pathlib.Path) -> dict[str, np.ndarray]:
    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name.startswith(("bert/", "output_"))}


def test_student_layers_start_from_those_layers_of_the_teacher(teacher, runs):
    """--student_layers=1: the student's layer 0 is the teacher's layer 1; its embeddings,
    pooler and head are the teacher's (DistilBERT's initialisation)."""
    result = runs["results"]["from_layers"]
    assert result["status"] == 0, result["stderr"][-3000:]
    assert "student initialised from layers 1 of the teacher" in result["stderr"]
    student = _checkpoint_values(runs["root"] / "from_layers" / "model.ckpt")
    theirs = _checkpoint_values(teacher["teacher"] / "model.ckpt")
    expected = {name.replace("/layer_1/", "/layer_0/"): value for name, value in theirs.items()
                if "/layer_0/" not in name}
    assert sorted(student) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(student[name], value, err_msg=name)


def test_student_init_starts_the_encoder_from_another_checkpoint(teacher, runs):
    result = runs["results"]["initialised"]
    assert result["status"] == 0, result["stderr"][-3000:]
    student = _checkpoint_values(runs["root"] / "initialised" / "model.ckpt")
    pretrained = _checkpoint_values(runs["root"] / "pretrained" / "bert_model.ckpt")
    assert set(student) == set(pretrained) | {"output_weights", "output_bias"}
    for name, value in pretrained.items():
        np.testing.assert_array_equal(student[name], value, err_msg=name)


def test_allow_vocab_mismatch_tokenizes_each_text_for_each_model(teacher, runs):
    """A student whose vocabulary has the teacher's words under other ids learns the teacher's
    labels, read with its own vocabulary."""
    result = runs["results"]["mismatch"]
    assert result["status"] == 0, result["stderr"][-3000:]
    folder = runs["root"] / "mismatch"
    assert (folder / "vocab.txt").read_text() == \
        (runs["root"] / "reversed_vocab.txt").read_text()
    texts = _train_texts()
    theirs = _classes(teacher["model"], texts, teacher["teacher"] / "vocab.txt")
    student = TextClassifier.from_checkpoint(str(folder), max_seq_length=_LENGTH)
    ours = np.array([int(answer.label) for answer in student(texts)])
    assert np.mean(theirs == ours) >= 0.9


def test_sigterm_checkpoints_the_step_and_stops_saying_so(teacher):
    """Preemption: SIGTERM while the student trains saves the step it reached and exits with a
    status that says the run did not finish."""
    output_dir = teacher["root"] / "terminated"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    process = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "distill.py"),
         *_flags(teacher, output_dir, do_train="true", save_checkpoints_steps=1000)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT)
    log = output_dir / "train_log.jsonl"
    deadline = time.monotonic() + 300
    while not (log.exists() and len(log.read_text().splitlines()) >= 3):
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode != 0
    assert "interrupted by SIGTERM at step" in stderr, stderr[-3000:]
    stopped_at = int(stderr.split("interrupted by SIGTERM at step ")[1].split("/")[0])
    assert 3 <= stopped_at < _TOTAL_STEPS
    assert tf.train.latest_checkpoint(str(output_dir)).endswith(f"ckpt-{stopped_at}")
    assert not (output_dir / "model.ckpt.index").exists()


@pytest.mark.parametrize("name", list(_BAD))
def test_bad_input_is_one_error_line(runs, name):
    result = runs["results"][name]
    assert result["status"] == 1
    assert_user_error(result["stderr"], _BAD[name][1])


def test_run_classifier_reads_the_student_from_its_output_folder(teacher, runs, tmp_path):
    """Without --init_checkpoint: the folder's newest training checkpoint, written while the
    student carried the intermediate losses' projection."""
    folder = tmp_path / "narrow"
    shutil.copytree(runs["narrow"], folder)
    result = run_cells("run_classifier.py", {"narrow": [
        f"--data_dir={teacher['data']}", "--task_name=sst2", "--do_eval",
        f"--max_seq_length={_LENGTH}", f"--output_dir={folder}",
        f"--bert_config_file={folder / 'bert_config.json'}",
        f"--vocab_file={folder / 'vocab.txt'}"]}, str(tmp_path))["narrow"]
    assert result["status"] == 0, result["stderr"][-3000:]
    found = dict(line.split(" = ") for line in
                 (folder / "eval_results.txt").read_text().splitlines())
    dev = [line.split("\t") for line in
           (teacher["data"] / "dev.tsv").read_text().splitlines()[1:]]
    student = checkpoints.read_model(str(runs["narrow"] / "model.ckpt")).model
    classes = _classes(student, [text for text, _ in dev], folder / "vocab.txt")
    accuracy = np.mean(classes == np.array([int(label) for _, label in dev]))
    assert float(found["eval_accuracy"]) == pytest.approx(accuracy)
