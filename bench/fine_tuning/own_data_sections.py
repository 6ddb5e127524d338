"""The own-data benchmark's sections (`bench/fine_tuning/own_data.py`): each makes its data in
the work folder, runs the scripts (and transformers) in their own processes, and returns its
results as a dict."""
from __future__ import annotations

import dataclasses
import json
import os
import sys

import numpy as np

from bench.fine_tuning import own_data_files as files
from bench.fine_tuning.runs import (FineTuneTask, read_eval_results, run_script,
                                    run_transformers)
from bench.support import log, run_logged, write_text
from data import tokenization
from data.classifier.metrics import multi_label_metrics

LABELS = ",".join(files.ENTITY_TYPES)
MAX_SEQ_LENGTH = 128
MAX_PREDICTIONS = 20


@dataclasses.dataclass(frozen=True)
class Context:
    """What every section reads: the sizes, where the data and the work go, the model (its
    Hugging Face folder and its conversion to Google's layout)."""

    settings: object  # own_data.Settings
    shared_data: str
    work_dir: str
    hf_dir: str
    bert_dir: str

    def folder(self, *parts: str) -> str:
        path = os.path.join(self.work_dir, *parts)
        os.makedirs(path, exist_ok=True)
        return path


def _conll(context: Context, split: str, count: int | None) -> list[files.Rows]:
    with open(os.path.join(context.shared_data, "conll2003", split), encoding="utf-8") as f:
        return files.subsample(files.conll_sentences(f), count)


def _task(name: str, context: Context, metrics: tuple[str, ...]) -> FineTuneTask:
    settings = context.settings
    return FineTuneTask(name, MAX_SEQ_LENGTH, settings.num_train_epochs, settings.seeds, metrics)


# ---------------------------------------------------------------------------------------------
# multi_label

def predicted_metrics(predictions_path: str, gold: list[dict]) -> dict:
    """Micro and macro F1 of `predictions.jsonl`'s labels against the gold rows' labels."""
    with open(predictions_path, encoding="utf-8") as f:
        predicted = [json.loads(line)["labels"] for line in f]
    return labels_metrics(predicted, [row["labels"].split(",") for row in gold])


def labels_metrics(predicted: list[list[str]], gold: list[list[str]]) -> dict:
    """multi_label_metrics of label sets, each side's as 0/1 rows over the entity types."""
    def rows(label_sets):
        return np.array([[float(t in labels) for t in files.ENTITY_TYPES] for labels in label_sets])
    return multi_label_metrics(rows(predicted), rows(gold), list(files.ENTITY_TYPES))


# transformers' Trainer's optimizer through this project's flags: bias-corrected AdamW, its
# epsilon, and the decay from the warm-up's peak (bench/README.md, "Optimizers on RTE").
TRANSFORMERS_OPTIMIZER = ("--optimizer=adamw_bias_corrected", "--adam_epsilon=1e-8",
                          "--learning_rate_decay=from_peak")


def _multi_label_data(context: Context) -> tuple[list[dict], list[dict], dict, FineTuneTask,
                                                 list[str]]:
    """The training and dev rows written as JSON lines; their paths, the task and the
    run_classifier.py command that fine-tunes on them."""
    settings = context.settings
    folder = context.folder("data", "multi_label")
    train = [files.multi_label_row(s) for s in _conll(context, "train.txt",
                                                       settings.train_examples)]
    dev = [files.multi_label_row(s) for s in _conll(context, "valid.txt", settings.dev_examples)]
    paths = {name: os.path.join(folder, f"{name}.jsonl") for name in ("train", "dev")}
    write_text(paths["train"], files.jsonl_text(train))
    write_text(paths["dev"], files.jsonl_text(dev))
    task = _task("multi_label", context, ("eval_f1_micro", "eval_f1_macro"))
    command = ["run_classifier.py", f"--train_file={paths['train']}",
               f"--dev_file={paths['dev']}", f"--test_file={paths['dev']}",
               "--text_column=text", "--label_column=labels", "--problem_type=multi_label",
               f"--label_list={LABELS}", "--do_train", "--do_eval", "--do_predict"]
    return train, dev, paths, task, command


def _multi_label_run(context: Context, name: str, seed: int, command: list[str],
                     task: FineTuneTask, train: list[dict], dev: list[dict]) -> dict:
    run_dir = context.folder(name, f"this_project_seed{seed}")
    run = run_script(command, task, seed, context.bert_dir, run_dir, len(train))
    run["from_predictions"] = predicted_metrics(
        os.path.join(run_dir, "output", "predictions.jsonl"), dev)
    return run


def multi_label(context: Context) -> dict:
    train, dev, paths, task, command = _multi_label_data(context)
    runs: dict[str, list[dict]] = {"this_project": [], "transformers": []}
    for seed in range(1, context.settings.seeds + 1):
        log(f"multi_label: seed {seed}, this project")
        runs["this_project"].append(_multi_label_run(context, "multi_label", seed, command, task,
                                                     train, dev))
        log(f"multi_label: seed {seed}, transformers")
        runs["transformers"].append(run_transformers(
            task, seed, context.hf_dir, {"multi_label": os.path.dirname(paths["train"])},
            context.folder("multi_label", f"transformers_seed{seed}"),
            extra_flags=[f"--label_list={LABELS}"]))
    label_counts = {t: sum(t in row["labels"].split(",") for row in train)
                    for t in files.ENTITY_TYPES}
    return {"train_examples": len(train), "dev_examples": len(dev),
            "train_without_entity": sum(not row["labels"] for row in train),
            "train_label_counts": label_counts, "runs": runs}


def multi_label_optimizer(context: Context) -> dict:
    """multi_label's runs of this project with transformers' optimizer (`TRANSFORMERS_OPTIMIZER`),
    the same data and seeds: what the optimizer accounts for of the two sides' difference."""
    train, dev, _, task, command = _multi_label_data(context)
    runs = []
    for seed in range(1, context.settings.seeds + 1):
        log(f"multi_label_optimizer: seed {seed}")
        runs.append(_multi_label_run(context, "multi_label_optimizer", seed,
                                     [*command, *TRANSFORMERS_OPTIMIZER], task, train, dev))
    return {"flags": list(TRANSFORMERS_OPTIMIZER), "runs": runs}


# ---------------------------------------------------------------------------------------------
# tagging

TAGGING_FILES = ("four_columns", "two_columns_iob2", "two_columns_iobes")


def tagging(context: Context) -> dict:
    settings = context.settings
    train = _conll(context, "train.txt", settings.train_examples)
    dev = _conll(context, "valid.txt", settings.dev_examples)
    made = {"four_columns": lambda s: s, "two_columns_iob2": files.two_columns,
            "two_columns_iobes": lambda s: files.two_columns(s, iobes=True)}
    task = _task("conll2003", context, ("eval_f1",))
    runs = {}
    for name in TAGGING_FILES:
        folder = context.folder("data", "tagging", name)
        for split, sentences in (("train", train), ("dev", dev)):
            write_text(os.path.join(folder, f"{split}.txt"),
                       files.conll_text(made[name](sentences)))
        log(f"tagging: {name}")
        runs[name] = run_script(
            ["run_ner.py", f"--train_file={folder}/train.txt", f"--dev_file={folder}/dev.txt",
             "--do_train", "--do_eval"], task, 1, context.bert_dir,
            context.folder("tagging", name), len(train))
    return {"train_sentences": len(train), "dev_sentences": len(dev), "seed": 1, "runs": runs}


# ---------------------------------------------------------------------------------------------
# early_stopping

def _training_log(output_dir: str) -> list[dict]:
    with open(os.path.join(output_dir, "train_log.jsonl"), encoding="utf-8") as f:
        return [entry for entry in map(json.loads, f) if "eval" in entry]


def early_stopping(context: Context) -> dict:
    settings = context.settings
    folder = context.folder("data", "mrpc")
    glue = os.path.join(context.shared_data, "glue", "MRPC")
    kept = {}
    for split, count in (("train", settings.mrpc_train_examples), ("dev", settings.dev_examples)):
        with open(os.path.join(glue, f"{split}.tsv"), encoding="utf-8") as f:
            header, *rows = f.readlines()
        kept[split] = files.subsample(rows, count)
        write_text(os.path.join(folder, f"{split}.tsv"), header + "".join(kept[split]))
    task = _task("mrpc", context, ("eval_f1", "eval_accuracy"))
    base = ["run_classifier.py", "--task_name=mrpc", f"--data_dir={folder}", "--do_train",
            "--do_eval"]
    num_examples = len(kept["train"])
    log("early_stopping: the full run")
    full = run_script(base, task, 1, context.bert_dir, context.folder("early_stopping", "full"),
                      num_examples)
    log("early_stopping: with --early_stopping_patience")
    run_dir = context.folder("early_stopping", "early")
    early = run_script(base + [f"--eval_every_steps={settings.eval_every_steps}",
                               f"--early_stopping_patience={settings.early_stopping_patience}"],
                       task, 1, context.bert_dir, run_dir, num_examples)
    scorings = _training_log(os.path.join(run_dir, "output"))
    best = max(scorings, key=lambda entry: entry["eval"]["eval_f1"])
    best_saved = read_eval_results(os.path.join(run_dir, "output", "best", "eval_results.txt"))
    return {"train_examples": num_examples, "full": full, "early": early,
            "full_steps": int(full["global_step"]), "stopped_at_step": scorings[-1]["step"],
            "best_step": best["step"], "best_eval_f1": best["eval"]["eval_f1"],
            "best_saved_eval_f1": best_saved["eval_f1"],
            "scorings": [{"step": e["step"], "eval_f1": e["eval"]["eval_f1"]} for e in scorings]}


# ---------------------------------------------------------------------------------------------
# vocabulary

def _wikitext(context: Context, split: str, count: int | None) -> list[list[str]]:
    path = os.path.join(context.shared_data, "wikitext-2-tokenized", f"wiki.{split}.tokens")
    with open(path, encoding="utf-8") as f:
        return files.wikitext_documents(f)[:count]


def _pieces_per_word(vocab_file: str, documents: list[list[str]]) -> dict:
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    words, pieces = files.pieces_per_word(tokenizer, (s for d in documents for s in d))
    return {"words": words, "pieces": pieces, "pieces_per_word": pieces / words}


def _changed_sentences(vocab_files: list[str], documents: list[list[str]]) -> dict:
    before, after = (tokenization.FullTokenizer(v, do_lower_case=True) for v in vocab_files)
    sentences, changed = files.changed_texts(before, after, (s for d in documents for s in d))
    return {"sentences": sentences, "changed": changed}


def _pretraining_records(corpus: str, vocab_file: str, output: str, dupe_factor: int,
                         log_path: str) -> None:
    run_logged([sys.executable, "create_pretraining_data.py", f"--input_file={corpus}",
                f"--output_file={output}", f"--vocab_file={vocab_file}", "--do_lower_case=True",
                f"--max_seq_length={MAX_SEQ_LENGTH}",
                f"--max_predictions_per_seq={MAX_PREDICTIONS}", "--masked_lm_prob=0.15",
                "--random_seed=12345", f"--dupe_factor={dupe_factor}"], log_path)


def _pretrain(context: Context, bert: str, records: dict[str, str], run_dir: str,
              train: bool) -> dict:
    """run_pretraining.py from `bert`'s checkpoint: trained on records["train"] for the
    section's steps (or not at all), scored once on every record of records["eval"]."""
    steps = context.settings.pretraining_steps
    output_dir = os.path.join(run_dir, "output")
    command = [sys.executable, "run_pretraining.py", f"--input_file={records['train']}",
               f"--eval_input_file={records['eval']}", "--eval_single_pass",
               f"--output_dir={output_dir}", "--do_eval",
               f"--bert_config_file={bert}/bert_config.json",
               f"--init_checkpoint={bert}/bert_model.ckpt", "--train_batch_size=32",
               "--eval_batch_size=64", f"--max_seq_length={MAX_SEQ_LENGTH}",
               f"--max_predictions_per_seq={MAX_PREDICTIONS}", f"--num_train_steps={steps}",
               f"--num_warmup_steps={max(1, steps // 10)}", "--learning_rate=5e-5",
               f"--save_checkpoints_steps={steps}"] + ["--do_train"] * train
    wall = run_logged(command, os.path.join(run_dir, "run.log"))
    return {**read_eval_results(os.path.join(output_dir, "eval_results.txt")),
            "wall_seconds": wall}


def vocabulary(context: Context) -> dict:
    settings = context.settings
    folder = context.folder("data", "vocabulary")
    corpus_documents = _wikitext(context, "valid", settings.corpus_documents)
    heldout_documents = _wikitext(context, "test", settings.heldout_documents)
    corpus, heldout = os.path.join(folder, "corpus.txt"), os.path.join(folder, "heldout.txt")
    write_text(corpus, files.documents_text(corpus_documents))
    write_text(heldout, files.documents_text(heldout_documents))
    released_vocab = os.path.join(context.shared_data, "vocab", "uncased_vocab.txt")
    extended_vocab = os.path.join(folder, "vocab.txt")
    log("vocabulary: extending the vocabulary, converting the checkpoint")
    run_logged([sys.executable, "build_vocab.py", f"--extend_vocab={released_vocab}",
                f"--input_file={corpus}", f"--output_file={extended_vocab}",
                "--do_lower_case=True"], os.path.join(folder, "build_vocab.log"))
    with open(os.path.join(folder, "vocab_extension.json"), encoding="utf-8") as f:
        new_tokens = len(json.load(f)["new_tokens"])
    extended_bert = os.path.join(context.work_dir, "vocabulary", "all-MiniLM-L6-v2_extended_tf1")
    run_logged([sys.executable, "convert_checkpoint.py", f"--input={context.hf_dir}",
                f"--output={extended_bert}", "--to=tf1", f"--vocab_file={extended_vocab}",
                f"--vocab_extension={os.path.join(folder, 'vocab_extension.json')}"],
               os.path.join(folder, "convert.log"))
    sides = {"released": (released_vocab, context.bert_dir),
             "extended": (extended_vocab, extended_bert)}
    results = {"corpus_documents": len(corpus_documents),
               "heldout_documents": len(heldout_documents), "new_tokens": new_tokens,
               "steps": settings.pretraining_steps, "sides": {},
               "heldout_tokenized_differently": _changed_sentences(
                   [released_vocab, extended_vocab], heldout_documents)}
    for side, (vocab_file, bert) in sides.items():
        run_dir = context.folder("vocabulary", side)
        records = {"train": os.path.join(run_dir, "train.tfrecord"),
                   "eval": os.path.join(run_dir, "heldout.tfrecord")}
        log(f"vocabulary: {side}: pretraining data, then {settings.pretraining_steps} steps")
        _pretraining_records(corpus, vocab_file, records["train"], 5,
                             os.path.join(run_dir, "create_train.log"))
        _pretraining_records(heldout, vocab_file, records["eval"], 1,
                             os.path.join(run_dir, "create_eval.log"))
        results["sides"][side] = {
            "heldout": _pieces_per_word(vocab_file, heldout_documents),
            "corpus": _pieces_per_word(vocab_file, corpus_documents),
            "before": _pretrain(context, bert, records,
                                context.folder("vocabulary", side, "before"), False),
            "after": _pretrain(context, bert, records,
                               context.folder("vocabulary", side, "after"), True)}
    return results


SECTIONS = {"multi_label": multi_label, "multi_label_optimizer": multi_label_optimizer,
            "tagging": tagging, "early_stopping": early_stopping, "vocabulary": vocabulary}
