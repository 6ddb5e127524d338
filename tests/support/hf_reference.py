"""Runs models in the real `transformers` package (PyTorch, CPU), as the reference for the tests.

The tests that use it skip with a message where torch or transformers is absent, except under
`CI=true`, where they must run.
"""
import numpy as np

from tests.support.dependencies import require


def load_hf_model(class_name: str, folder):
    """(model in eval mode, loading info) of a transformers BERT class from a folder."""
    transformers = require("transformers")
    require("torch")
    model, info = getattr(transformers, class_name).from_pretrained(
        str(folder), output_loading_info=True)
    return model.eval(), info


def run_hf(model, input_ids, input_mask, segment_ids) -> dict[str, np.ndarray]:
    """Every output of a transformers BERT model on int arrays [B, T], as float32 arrays."""
    torch = require("torch")
    with torch.no_grad():
        outputs = model(input_ids=torch.as_tensor(np.asarray(input_ids), dtype=torch.long),
                        attention_mask=torch.as_tensor(np.asarray(input_mask), dtype=torch.long),
                        token_type_ids=torch.as_tensor(np.asarray(segment_ids), dtype=torch.long),
                        output_hidden_states=True)
    return {key: (tuple(v.numpy() for v in value) if isinstance(value, tuple)
                  else value.numpy())
            for key, value in outputs.items()}


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def gather_positions(values: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """values [B, T, ...] at positions [B, P] -> [B * P, ...]."""
    return np.concatenate([values[b, positions[b]] for b in range(values.shape[0])])
