"""The LiteRT benchmark's dev sets, and each side's function from a batch of raw texts to the
outputs compared (`bench/litert/compare.py`): LiteRT's interpreter, the SavedModel and transformers.
"""
from __future__ import annotations

import csv
import os

import numpy as np

MODELS = ("encoder", "mrpc", "sst2")
# The exports' and transformers' longest sequence.
MAX_SEQ_LENGTH = 128


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
    file, signature, output = SIGNATURES[name]
    runner = load_interpreter(os.path.join(folder, file), threads).get_signature_runner(signature)
    keys = ["text"] if len(_INPUT_KEYS[name]) == 1 else ["text_a", "text_b"]

    def run(*texts):
        return runner(**{k: np.array(t, dtype=object) for k, t in zip(keys, texts)})[output]
    return run


def saved_model_side(folder: str, name: str):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    _, signature, output = SIGNATURES[name]
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
SIGNATURES = {"encoder": ("embedding.tflite", "serving_embedding", "embedding"),
               "mrpc": ("text_model.tflite", "serving_pair", "probabilities"),
               "sst2": ("text_model.tflite", "serving_default", "probabilities")}
_INPUT_KEYS = {"encoder": ["text"], "mrpc": ["text_a", "text_b"], "sst2": ["text"]}



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
