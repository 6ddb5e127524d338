"""Fill-mask: this project's `FillMask` against transformers' `pipeline("fill-mask")` on the same
checkpoint, in one process.

The checkpoint is the original code's tiny BERT with its pretraining heads
(`../shared/fixtures/original/tiny`, Google's uncased vocabulary), read by this project as a TF1
checkpoint and converted with `convert_checkpoint.py`'s writer (`--to=hf`) for transformers. The
sentences are real text: WikiText-2 test sentences with one [MASK], and others with two, in place
of random words. Judged per [MASK]: the top-5 token ids identical, their probabilities within
1e-5. Speed, nothing else running: the warm latency for one sentence (median of 30 calls) and the
throughput over all the sentences (median of 3 rounds), batches of 64 on both sides
(`pipeline(..., batch_size=64)`), the two called in turn.
The model is small (2 layers, H=128), so the speed figures weigh the code around the model more
than a full-size BERT's would.

    pip install -r bench/requirements.txt
    python -m bench.bench_fill_mask

Prints the table and writes the figures to --output (JSON).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
from bench.bench_sentence_embeddings import BATCH, speeds  # noqa: E402
from bench.machine import machine_description, machine_label  # noqa: E402
from utils.output_files import write_text_atomically  # noqa: E402

MASK = "[MASK]"
TOP_K = 5


def masked_sentences(path: str, count: int, masks: int, seed: int) -> list[str]:
    """`count` WikiText-2 sentences of at least 6 words with `masks` of them replaced."""
    rng = np.random.default_rng(seed)
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    sentences = []
    for line in lines[seed::7]:
        words = line.split()
        if not 6 <= len(words) <= 60:
            continue
        for index in rng.choice(len(words), masks, replace=False):
            words[index] = MASK
        sentences.append(" ".join(words))
        if len(sentences) == count:
            return sentences
    raise ValueError(f"{path}: fewer than {count} sentences of 6 to 60 words")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    shared = os.path.join(os.path.dirname(REPO_ROOT), "shared")
    parser.add_argument("--shared", default=shared, help="The shared fixtures and data.")
    parser.add_argument("--sentences", type=int, default=200,
                        help="Sentences with one [MASK], and as many with two.")
    parser.add_argument("--output", default=os.path.join(REPO_ROOT, "bench",
                                                         "fill_mask_results.json"))
    args = parser.parse_args()
    if importlib.util.find_spec("transformers") is None:
        sys.exit("transformers is not installed: pip install -r bench/requirements.txt")
    import transformers
    from data.tokenization import FullTokenizer
    from modeling import checkpoints
    from serving.text_tasks import FillMask

    tiny = os.path.join(args.shared, "fixtures", "original", "tiny")
    vocab = os.path.join(args.shared, "fixtures", "vocab", "uncased_vocab.txt")
    loaded = checkpoints.read_model(os.path.join(tiny, "bert_model.ckpt"), "tf1",
                                    os.path.join(tiny, "bert_config.json"), vocab)
    hf_folder = os.path.join(tempfile.mkdtemp(), "tiny_hf")
    checkpoints.write_model(loaded, "hf", hf_folder, do_lower_case=True)
    text = os.path.join(args.shared, "data", "wikitext-2-raw", "wiki.test.sentences.txt")
    sentences = (masked_sentences(text, args.sentences, 1, seed=0)
                 + masked_sentences(text, args.sentences, 2, seed=1))

    ours = FillMask(loaded.model, FullTokenizer(vocab, True), max_seq_length=128,
                    batch_size=BATCH)
    pipeline = transformers.pipeline("fill-mask", model=hf_folder, top_k=TOP_K, device="cpu")

    def fill_ours(texts):
        return ours(texts, top_k=TOP_K)

    def fill_theirs(texts):
        return pipeline(texts, batch_size=BATCH)

    masks = same_ids = 0
    worst = 0.0
    for predicted, reference in zip(fill_ours(sentences), fill_theirs(sentences)):
        # The pipeline gives a list per [MASK] when a text has several, the list alone otherwise.
        reference = reference if isinstance(reference[0], list) else [reference]
        for mine, theirs in zip(predicted, reference, strict=True):
            masks += 1
            ids_equal = [s.token_id for s in mine] == [r["token"] for r in theirs]
            same_ids += ids_equal
            if ids_equal:
                worst = max(worst, float(np.max(np.abs(
                    np.array([s.probability for s in mine]) -
                    np.array([r["score"] for r in theirs])))))
    speed = speeds({"this project": fill_ours, "transformers": fill_theirs}, sentences[0],
                   sentences)
    machine = machine_description()
    lines = [f"{machine_label(machine)}; the original's tiny checkpoint; {len(sentences)} "
             f"WikiText-2 sentences ({args.sentences} with one [MASK], {args.sentences} with two)",
             "", f"[MASK]s with the same top-{TOP_K} token ids: {same_ids} of {masks}; largest "
             f"probability difference {worst:.1e}", "",
             "| framework | latency, 1 sentence | sentences/s, batches of 64 |", "|---|---|---|"]
    for name, figures in speed.items():
        lines.append(f"| {name} | {figures['latency_ms']:.1f} ms | "
                     f"{figures['sentences_per_second']:.0f} |")
    table = "\n".join(lines)
    print(table)
    write_text_atomically(args.output, json.dumps(
        {"machine": machine, "masks": masks, "same_top_ids": same_ids,
         "max_probability_difference": worst, "speed": speed, "table": table}, indent=1) + "\n")


if __name__ == "__main__":
    main()
