"""What the speed benchmark measures: model sizes, cases, and the model FLOPs of each case."""
from __future__ import annotations

import dataclasses

# name -> (num_hidden_layers, hidden_size); heads of 64 dimensions, intermediate 4 H, vocabulary
# 30522, 512 positions, 2 segment types: the released BERT-Base and the small L-4/H-256.
MODEL_SIZES = {"bert_base": (12, 768), "small_L4_H256": (4, 256)}
VOCAB_SIZE = 30522
# Masked positions per sequence in the pretraining step (the original's max_predictions_per_seq
# for sequences of 128).
MAX_PREDICTIONS_PER_SEQ = 20


@dataclasses.dataclass(frozen=True)
class ModelSize:
    name: str
    num_layers: int
    hidden_size: int

    @property
    def num_heads(self) -> int:
        return self.hidden_size // 64

    @property
    def intermediate_size(self) -> int:
        return 4 * self.hidden_size


@dataclasses.dataclass(frozen=True)
class Case:
    """One measurement: a model size, a dtype, a mode ("forward" or "train") and a batch shape."""

    model: ModelSize
    dtype: str  # "float32" or "bfloat16" (mixed precision: float32 variables)
    mode: str
    batch_size: int
    seq_length: int

    @property
    def key(self) -> str:
        return (f"{self.model.name} {self.mode} {self.dtype} "
                f"B{self.batch_size} T{self.seq_length}")

    def to_dict(self) -> dict:
        return {"model": self.model.name, "num_layers": self.model.num_layers,
                "hidden_size": self.model.hidden_size, "dtype": self.dtype, "mode": self.mode,
                "batch_size": self.batch_size, "seq_length": self.seq_length}

    @classmethod
    def from_dict(cls, values: dict) -> "Case":
        model = ModelSize(values["model"], values["num_layers"], values["hidden_size"])
        return cls(model, values["dtype"], values["mode"], values["batch_size"],
                   values["seq_length"])


def encoder_forward_flops(model: ModelSize, batch_size: int, seq_length: int) -> float:
    """Matmul FLOPs of one encoder forward pass (embedding lookups and element-wise ops left out).

    Per token and layer: Q, K, V and output projections 8 H^2, feed-forward 4 H I, scores and
    context 4 T H; plus the pooler, 2 H^2 per sequence.
    """
    h, i, t = model.hidden_size, model.intermediate_size, seq_length
    per_token = model.num_layers * (8 * h * h + 4 * h * i + 4 * t * h)
    return float(batch_size * t * per_token + batch_size * 2 * h * h)


def case_flops(case: Case) -> float:
    """Model FLOPs of one call: a forward pass, or a training step (3x the forward pass of the
    encoder and of the masked-LM and next-sentence heads)."""
    forward = encoder_forward_flops(case.model, case.batch_size, case.seq_length)
    if case.mode == "forward":
        return forward
    h = case.model.hidden_size
    masked = case.batch_size * MAX_PREDICTIONS_PER_SEQ
    heads = masked * (2 * h * h + 2 * h * VOCAB_SIZE) + case.batch_size * 2 * 2 * h
    return 3.0 * (forward + heads)


def benchmark_cases(quick: bool, model_names: list[str], dtypes: list[str],
                    modes: list[str] = ("forward", "train"),
                    shapes: list[str] | None = None) -> list[Case]:
    """The cases of a run: forward at batch 1 and 32, sequence 128 and 384, and a pretraining
    step at batch 32, sequence 128, for each model size and dtype. `quick` keeps sequence 128;
    `shapes` ("BxT" strings) keeps only the forward shapes listed."""
    forward_shapes = [(1, 128), (32, 128)] if quick else [(1, 128), (1, 384), (32, 128), (32, 384)]
    if shapes:
        forward_shapes = [_batch_shape(shape) for shape in shapes]
    cases = []
    for name in model_names:
        model = ModelSize(name, *MODEL_SIZES[name])
        for dtype in dtypes:
            if "forward" in modes:
                cases += [Case(model, dtype, "forward", b, t) for b, t in forward_shapes]
            if "train" in modes:
                cases.append(Case(model, dtype, "train", 32, 128))
    return cases


def _batch_shape(text: str) -> tuple[int, int]:
    """"BxT" -> (B, T), with 2 <= T <= 512 (the model's positions)."""
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"--shapes: {text!r} is not BxT, e.g. 32x128")
    batch, length = int(parts[0]), int(parts[1])
    if batch < 1 or not 2 <= length <= 512:
        raise ValueError(f"--shapes: {text!r} needs a batch of at least 1 and a sequence length "
                         "from 2 to 512")
    return batch, length
