"""CoNLL-2003 fine-tuned with and without `--document_context`: dev and test entity F1 per seed.

The paper's CoNLL-2003 results use "the maximal document context provided by the data" (section
5.3): each sentence is tagged with its document's neighbouring sentences filling the rest of the
sequence. `run_ner.py --document_context` does that in training, evaluation and prediction. This
benchmark runs `run_ner.py` as the fine-tuning benchmark does (`bench/fine_tuning/real_weights.py`:
all-MiniLM-L6-v2 converted to Google's layout, the full train set, max_seq_length 128, batch 32,
learning rate 5e-5, 3 epochs) with `--do_train --do_eval --do_predict`, with and without the
flag, for each seed, and reports the dev (valid.txt) and test (test.txt) entity F1 that the script
writes, with the training time and the sequences trained on.

Runs are resumable: a run whose test_results.txt exists is read, not rerun; the order (without,
then with, seed by seed) gives a complete pair first. Accuracy runs may share the machine.

    pip install -r bench/requirements.txt
    python -m bench.ner.document_context                 # seeds 1 and 2
    python -m bench.ner.document_context --seeds=1
    python -m bench.ner.document_context --report_only
"""
from __future__ import annotations

import os
import re
import shutil
import statistics
import sys

from absl import flags

from bench.fine_tuning import runs as finetune
from bench.support import (define_integers_flag, define_output_dir_flag,
                           define_report_only_flag, define_shared_data_flag, log,
                           machine_description, machine_label, read_json, run_logged,
                           write_report)
from utils import entry_point

FLAGS = flags.FLAGS

TASK = finetune.TASKS["conll2003"]
SETTINGS = (("sentence", []), ("document_context", ["--document_context"]))
SETTING_NAMES = {"sentence": "each sentence alone (default)",
                 "document_context": "`--document_context`"}
# The training log's header: "***** Running training *****: N examples, batch size B, S steps".
_TRAINING = re.compile(r"Running training \*+: (\d+) examples, batch size \d+, (\d+) steps")


def _read_results(path: str) -> dict[str, float]:
    with open(path, encoding="utf-8") as f:
        return {key.strip(): float(value) for key, value in
                (line.split("=", 1) for line in f if "=" in line)}


def run_one(setting: str, seed: int, bert: str, data_dir: str, work_dir: str) -> dict:
    """One run_ner.py run (train, dev, test); its F1s and training time."""
    run_dir = os.path.join(work_dir, f"{setting}_seed{seed}")
    output = os.path.join(run_dir, "output")
    log_path = os.path.join(run_dir, "run.log")
    if not os.path.exists(os.path.join(output, "test_results.txt")):
        os.makedirs(run_dir, exist_ok=True)
        log(f"run_ner.py, {setting}, seed {seed} (log {log_path})")
        flags = finetune.common_flags(bert, TASK, seed, output)
        run_logged([
            sys.executable, "run_ner.py", f"--data_dir={data_dir}", "--do_train", "--do_eval",
            "--do_predict", *flags, *dict(SETTINGS)[setting],
            f"--eval_batch_size={finetune.EVAL_BATCH_SIZE}",
            f"--predict_batch_size={finetune.EVAL_BATCH_SIZE}"], log_path)
    dev = _read_results(os.path.join(output, "eval_results.txt"))
    test = _read_results(os.path.join(output, "test_results.txt"))
    with open(log_path, encoding="utf-8") as f:
        log_text = f.read()
    sequences, _ = map(int, _TRAINING.findall(log_text)[-1])
    timing = finetune.training_timing(log_text, sequences, TASK.num_epochs)
    return {"dev_f1": dev["eval_f1"], "test_f1": test["eval_f1"],
            "train_sequences": sequences, "train_seconds": timing["train_seconds"]}


def summarize(runs: dict[str, dict[str, dict]]) -> dict:
    """Mean and sample sd of dev and test F1 per setting."""
    summary = {}
    for setting, seeds in runs.items():
        summary[setting] = {}
        for metric in ("dev_f1", "test_f1"):
            values = [run[metric] for run in seeds.values()]
            summary[setting][metric] = {
                "mean": statistics.mean(values),
                "sd": statistics.stdev(values) if len(values) > 1 else 0.0}
    return summary


def report_markdown(results: dict) -> str:
    """The Markdown report of ner_document_context.json."""
    rate = f"{finetune.LEARNING_RATE:.0e}".replace("e-0", "e-")
    lines = ["# CoNLL-2003 with and without document context", "",
             f"all-MiniLM-L6-v2 fine-tuned by `run_ner.py` on the full train set, max_seq_length "
             f"{TASK.max_seq_length}, batch {finetune.TRAIN_BATCH_SIZE}, learning rate {rate}, "
             f"{TASK.num_epochs} epochs. Entity F1 (conlleval's) in points, dev (valid.txt) and "
             "test (test.txt).", "",
             "| sequences | seed | dev F1 | test F1 | training sequences | training time |",
             "|---|---|---|---|---|---|"]
    for setting, _ in SETTINGS:
        for seed, run in sorted(results["runs"].get(setting, {}).items()):
            lines.append(f"| {SETTING_NAMES[setting]} | {seed} | {100 * run['dev_f1']:.2f} | "
                         f"{100 * run['test_f1']:.2f} | {run['train_sequences']} | "
                         f"{run['train_seconds'] / 60:.0f} min |")
    lines += ["", "Mean ± sample sd over seeds:", ""]
    for setting, _ in SETTINGS:
        row = results["summary"].get(setting)
        if row:
            seeds = len(results["runs"][setting])
            dev, test = (f"{100 * row[metric]['mean']:.2f}"
                         + (f" ± {100 * row[metric]['sd']:.2f}" if seeds > 1 else "")
                         for metric in ("dev_f1", "test_f1"))
            lines.append(f"- {SETTING_NAMES[setting]} ({seeds} seed{'s' * (seeds > 1)}): dev "
                         f"{dev}, test {test}")
    lines += ["", f"Machine: {machine_label(results['machine'])}.", ""]
    return "\n".join(lines)


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    flags.DEFINE_string("work_dir", "/tmp/bert_ner_context_bench",
                        "Model, data and the runs' outputs and logs.")
    define_output_dir_flag("ner_document_context", "ner_document_context.{json,md}")
    define_integers_flag("seeds", [1, 2], "Seeds, each run without and with the flag.")
    define_shared_data_flag()
    define_report_only_flag()


def main(argv: list[str]) -> None:
    del argv
    seeds = [int(seed) for seed in FLAGS.seeds]
    report = os.path.join(FLAGS.output_dir, "ner_document_context")
    results = read_json(report + ".json", {"runs": {}})

    def save() -> None:
        results["summary"] = summarize(results["runs"])
        results["machine"] = machine_description()
        write_report(report, results, report_markdown(results), sort_keys=True)

    if not FLAGS.report_only:
        os.makedirs(FLAGS.work_dir, exist_ok=True)
        data_dir = finetune.prepare_data(FLAGS.shared_data, FLAGS.work_dir)["conll2003"]
        shutil.copyfile(os.path.join(FLAGS.shared_data, "conll2003", "test.txt"),
                        os.path.join(data_dir, "test.txt"))
        bert = finetune.bert_dir(FLAGS.work_dir, finetune.hf_model_dir())
        for seed in seeds:
            for setting, _ in SETTINGS:
                run = run_one(setting, seed, bert, data_dir, FLAGS.work_dir)
                results["runs"].setdefault(setting, {})[str(seed)] = run
                log(f"{setting} seed {seed}: dev F1 {run['dev_f1']:.4f}, test F1 "
                    f"{run['test_f1']:.4f}, {run['train_seconds'] / 60:.0f} min of training")
                save()
    save()
    log(f"report: {report}.md")


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
