"""Helpers of the export tests: a loader script run in a fresh process, and the original
pipeline's features to compare an exported model's with."""
import json
import subprocess
import sys

import numpy as np

from data.classifier.features import InputExample, example_tokens


def run_in_fresh_process(tmp_path, loader: str, requests: list) -> dict[str, np.ndarray]:
    """Runs `loader` (Python source taking a requests JSON file and writing an .npz of results)
    in a fresh process on `requests`, and returns its results."""
    (tmp_path / "loader.py").write_text(loader)
    (tmp_path / "requests.json").write_text(json.dumps(requests))
    result = subprocess.run([sys.executable, str(tmp_path / "loader.py"),
                             str(tmp_path / "requests.json"), str(tmp_path / "results.npz")],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    with np.load(tmp_path / "results.npz") as results:
        return dict(results)


def python_features(tokenizer, pairs, max_seq_length: int) -> dict[str, np.ndarray]:
    """The original pipeline's features of (text_a, text_b or "") pairs, each padded to
    `max_seq_length`."""
    features = {"input_ids": [], "input_mask": [], "segment_ids": []}
    for first, second in pairs:
        tokens, segment_ids = example_tokens(InputExample("x", first, second or None),
                                             max_seq_length, tokenizer)
        padding = [0] * (max_seq_length - len(tokens))
        features["input_ids"].append(tokenizer.convert_tokens_to_ids(tokens) + padding)
        features["input_mask"].append([1] * len(tokens) + padding)
        features["segment_ids"].append(segment_ids + padding)
    return {k: np.array(v, np.int32) for k, v in features.items()}
