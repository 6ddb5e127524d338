"""Loading the original code's tiny checkpoint and its recorded outputs, for the modeling tests."""
import numpy as np
import tensorflow as tf

from modeling.config import BertConfig

MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")


def tiny_dir(fixtures_dir):
    return fixtures_dir / "original" / "tiny"


def tiny_config(fixtures_dir) -> BertConfig:
    return BertConfig.from_json_file(tiny_dir(fixtures_dir) / "bert_config.json")


def golden(fixtures_dir, length: int) -> dict[str, np.ndarray]:
    with np.load(tiny_dir(fixtures_dir) / f"outputs_L{length}.npz") as data:
        return dict(data)


def golden_inputs(values: dict[str, np.ndarray]) -> dict[str, tf.Tensor]:
    return {k: tf.constant(values["inputs/" + k], tf.int32) for k in MODEL_INPUTS}


def at_real_tokens(values: np.ndarray, input_mask: np.ndarray) -> np.ndarray:
    """The original's [..., B, T, H] outputs as the packed encoder gives them: zeros at padding
    (input_mask [B, T] zero), where the original computes values nothing real depends on."""
    return values * (np.asarray(input_mask)[..., np.newaxis] != 0)
