"""run_classifier.py as the tests run it: GLUE files in the distribution's layouts, a tiny random
checkpoint, the command line and its output files."""
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

from data.classifier.glue_tasks import get_task
from modeling.checkpoints import save_tf1_checkpoint
from modeling.config import BertConfig
from modeling.models.encoder import BertEncoder
from synthetic import corpus
from tests.support.paths import REPO_ROOT

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
MNLI_COLUMNS = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                 "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
                 "sentence2"]
NUM_TRAIN, NUM_DEV, NUM_TEST = 8, 7, 5


# ----------------------------------------------------------------------------- generated GLUE data

def pair_texts(num_rows: int, seed: int) -> list[tuple[str, str]]:
    rows = corpus.sentiment_rows(2 * num_rows, seed)
    return [(rows[2 * i][0], rows[2 * i + 1][0]) for i in range(num_rows)]


def random_labels(task_name: str, num_rows: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    task = get_task(task_name)
    if task.is_regression:
        return [f"{score:.3f}" for score in rng.uniform(0.0, 5.0, num_rows)]
    return [task.labels[i] for i in rng.integers(0, len(task.labels), num_rows)]


# Per task: header (None for none) and row of a labelled file, then of the test file, from
# (row number, text a, text b, label). The exact column layouts of the GLUE distribution.
LAYOUTS = {
    "cola": (None, lambda i, a, b, y: ["gj04", y, "" if y == "1" else "*", a],
             ["index", "sentence"], lambda i, a, b, y: [str(i), a]),
    "mrpc": (["\ufeffQuality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
             lambda i, a, b, y: [y, str(1000 + i), str(2000 + i), a, b],
             ["index", "#1 ID", "#2 ID", "#1 String", "#2 String"],
             lambda i, a, b, y: [str(i), str(1000 + i), str(2000 + i), a, b]),
    "stsb": (["index", "genre", "filename", "year", "old_index", "source1", "source2",
              "sentence1", "sentence2", "score"],
             lambda i, a, b, y: [str(i), "main-captions", "MSRvid", "2012test", f"{i:04d}",
                                 "none", "none", a, b, y],
             ["index", "genre", "filename", "year", "old_index", "source1", "source2",
              "sentence1", "sentence2"],
             lambda i, a, b, y: [str(i), "main-news", "headlines", "2016", f"{i:04d}", "none",
                                 "none", a, b]),
    "qqp": (["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
            lambda i, a, b, y: [str(i), str(2 * i + 1), str(2 * i + 2), a, b, y],
            ["id", "question1", "question2"], lambda i, a, b, y: [str(i), a, b]),
    "mnli": (MNLI_COLUMNS + ["label1", "gold_label"],
             lambda i, a, b, y: [str(i), str(100 + i), f"{i}n", "fiction", "( x )", "( y )",
                                 "(ROOT x)", "(ROOT y)", a, b, y, y],
             MNLI_COLUMNS,
             lambda i, a, b, y: [str(i), str(100 + i), f"{i}n", "fiction", "( x )", "( y )",
                                 "(ROOT x)", "(ROOT y)", a, b]),
    "qnli": (["index", "question", "sentence", "label"], lambda i, a, b, y: [str(i), a, b, y],
             ["index", "question", "sentence"], lambda i, a, b, y: [str(i), a, b]),
    "rte": (["index", "sentence1", "sentence2", "label"], lambda i, a, b, y: [str(i), a, b, y],
            ["index", "sentence1", "sentence2"], lambda i, a, b, y: [str(i), a, b]),
    "wnli": (["index", "sentence1", "sentence2", "label"], lambda i, a, b, y: [str(i), a, b, y],
             ["index", "sentence1", "sentence2"], lambda i, a, b, y: [str(i), a, b]),
}
# MNLI's dev files carry five annotator labels.
MNLI_DEV_HEADER = MNLI_COLUMNS + ["label1", "label2", "label3", "label4", "label5",
                                    "gold_label"]


def write_tsv(path: pathlib.Path, header, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ([header] if header else []) + rows
    path.write_text("".join("\t".join(line) + "\n" for line in lines), encoding="utf-8")


def glue_rows(task_name: str, num_rows: int, seed: int, labelled: bool) -> list[list[str]]:
    _, labelled_row, _, test_row = LAYOUTS[task_name]
    make_row = labelled_row if labelled else test_row
    labels = random_labels(task_name, num_rows, seed)
    return [make_row(i, a, b, y) for i, ((a, b), y) in enumerate(zip(pair_texts(num_rows, seed),
                                                                     labels))]


def write_glue_task(folder: pathlib.Path, task_name: str) -> dict[str, list[list[str]]]:
    """Writes train, dev(s) and test(s) of a task; returns the test rows per split name."""
    header, _, test_header, _ = LAYOUTS[task_name]
    write_tsv(folder / "train.tsv", header, glue_rows(task_name, NUM_TRAIN, 1, True))
    test_rows = {}
    for split in get_task(task_name).splits:
        if split.role == "eval":
            dev_rows = glue_rows(task_name, NUM_DEV, 2, True)
            if task_name == "mnli":
                header = MNLI_DEV_HEADER
                dev_rows = [row[:-1] + [row[-1]] * 5 for row in dev_rows]
            write_tsv(folder / split.file_name, header, dev_rows)
        elif split.role == "predict":
            test_rows[split.name] = glue_rows(task_name, NUM_TEST, 3, False)
            write_tsv(folder / split.file_name, test_header, test_rows[split.name])
    return test_rows


def write_xnli(folder: pathlib.Path) -> None:
    train = [[a, b, y] for (a, b), y in zip(pair_texts(NUM_TRAIN, 1),
                                            random_labels("xnli", NUM_TRAIN, 1))]
    train[0][2] = "contradictory"  # the MultiNLI translation's spelling
    write_tsv(folder / "multinli" / "multinli.train.zh.tsv", ["premise", "hypo", "label"], train)
    dev = [[language, y, "x", "y", "x", "y", a, b, str(i), str(i), "facetoface"]
           for i, ((a, b), y) in enumerate(zip(pair_texts(2 * NUM_DEV, 2),
                                               random_labels("xnli", 2 * NUM_DEV, 2)))
           for language in (("zh",) if i < NUM_DEV else ("de",))]
    write_tsv(folder / "xnli.dev.tsv",
              ["language", "gold_label", "sentence1_binary_parse", "sentence2_binary_parse",
               "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "promptID",
               "pairID", "genre"], dev)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> dict[str, str]:
    """A random 1-layer, hidden-32 BERT in the original format; its vocab has the generated
    words."""
    folder = tmp_path_factory.mktemp("tiny_bert")
    words = sorted({word for text, _ in corpus.sentiment_rows(500, 0)
                    for word in text.split()} | set(corpus.PEOPLE))
    (folder / "vocab.txt").write_text("\n".join(SPECIAL_TOKENS + words) + "\n", encoding="utf-8")
    config = BertConfig(vocab_size=len(SPECIAL_TOKENS) + len(words), hidden_size=32,
                        num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=64, type_vocab_size=2)
    config.to_json_file(str(folder / "bert_config.json"))
    keras.utils.set_random_seed(0)
    save_tf1_checkpoint(BertEncoder(config), str(folder / "bert_model.ckpt"))
    return {"vocab_file": str(folder / "vocab.txt"),
            "bert_config_file": str(folder / "bert_config.json"),
            "init_checkpoint": str(folder / "bert_model.ckpt")}


def run_classifier(*args: str, **flags) -> subprocess.CompletedProcess:
    command = [sys.executable, str(REPO_ROOT / "run_classifier.py"), *args]
    command += [f"--{name}={value}" for name, value in flags.items()]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT)


def check_ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr[-3000:]


def eval_results(path: pathlib.Path) -> dict[str, float]:
    lines = path.read_text(encoding="utf-8").splitlines()
    pairs = [line.split(" = ") for line in lines]
    assert [key for key, _ in pairs] == sorted(key for key, _ in pairs)
    return {key: float(value) for key, value in pairs}


def read_test_results(path: pathlib.Path) -> np.ndarray:
    lines = path.read_text(encoding="utf-8").splitlines()
    return np.array([[float(value) for value in line.split("\t")] for line in lines])


TRAIN_FLAGS = {"max_seq_length": 32, "train_batch_size": 4, "eval_batch_size": 4,
                "predict_batch_size": 4, "num_train_epochs": 1, "learning_rate": 1e-3}


def popen_classifier(**flags) -> subprocess.Popen:
    command = [sys.executable, str(REPO_ROOT / "run_classifier.py"), "--do_train"]
    command += [f"--{name}={value}" for name, value in flags.items()]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=REPO_ROOT)
