"""Helpers of the export tests: a loader script run in a fresh process, the original
pipeline's features to compare an exported model's with, and a fill-mask signature's check."""
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


def assert_fill_mask_outputs(results: dict, key: str, expected) -> None:
    """A fill-mask signature's outputs (`<key>/mask_positions`, `token_ids`, `tokens`,
    `probabilities`) against `tasks.fill_mask.FillMask`'s scores of the same texts."""
    positions = results[f"{key}/mask_positions"]
    for row, masks in enumerate(expected):
        assert (positions[row] >= 0).sum() == len(masks)
        for slot, scores in enumerate(masks):
            np.testing.assert_array_equal(results[f"{key}/token_ids"][row, slot],
                                          [s.token_id for s in scores])
            assert [t.decode() for t in results[f"{key}/tokens"][row, slot]] == \
                [s.token for s in scores]
            np.testing.assert_allclose(results[f"{key}/probabilities"][row, slot],
                                       [s.probability for s in scores], atol=1e-5)
