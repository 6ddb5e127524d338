"""Model FLOPs of the real tokens: the work a step cannot avoid, whatever its padding.

A training step over sequences of L_s real tokens (`input_mask` 1) costs

    6 x N x sum_s L_s  +  3 x num_layers x 4 x H x sum_s L_s^2

where N is the encoder's non-embedding parameters (every token meets each of them in one
multiply-add forward and two backward: 2 + 4 FLOPs), and 4 L^2 H a layer's attention over the
sequence's real keys in the forward pass (scores Q K^T and context A V, 2 L^2 H each), three times
for a training step. A forward pass is 2 N sum L + num_layers 4 H sum L^2. Padding, embedding
lookups, the pooler and the task's head (one token of a sequence: under 0.2% for MiniLM at SST-2's
13 tokens) and everything that is not a product are left out. Model-FLOPs utilisation (MFU) is
these FLOPs per second over the machine's float32 matmul peak.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable


@dataclasses.dataclass(frozen=True)
class EncoderSize:
    """The sizes that set an encoder's FLOPs (`bert_config.json` keys)."""

    num_hidden_layers: int
    hidden_size: int
    intermediate_size: int

    @property
    def layer_parameters(self) -> int:
        """One layer's weights: Q, K, V, output projections with biases, the feed-forward pair
        with biases, two LayerNorms."""
        h, i = self.hidden_size, self.intermediate_size
        return 4 * (h * h + h) + (h * i + i) + (i * h + h) + 2 * 2 * h

    @property
    def non_embedding_parameters(self) -> int:
        return self.num_hidden_layers * self.layer_parameters


# all-MiniLM-L6-v2 (the fine-tuning benchmark's model) and BERT-Base.
MINILM_L6_H384 = EncoderSize(6, 384, 1536)
BERT_BASE = EncoderSize(12, 768, 3072)


@dataclasses.dataclass(frozen=True)
class TokenCounts:
    """Real tokens of a set of sequences: how many sequences, sum of L, sum of L^2."""

    sequences: int
    tokens: int
    tokens_squared: int

    @classmethod
    def from_lengths(cls, lengths: Iterable[int]) -> "TokenCounts":
        lengths = [int(n) for n in lengths]
        return cls(len(lengths), sum(lengths), sum(n * n for n in lengths))

    def scaled(self, sequences: float) -> tuple[float, float]:
        """(tokens, tokens_squared) of `sequences` sequences drawn from these at their mean."""
        share = sequences / self.sequences
        return self.tokens * share, self.tokens_squared * share


def forward_flops(size: EncoderSize, tokens: float, tokens_squared: float) -> float:
    """Model FLOPs of a forward pass over sequences of sum L = `tokens`, sum L^2 =
    `tokens_squared` real tokens."""
    return (2.0 * size.non_embedding_parameters * tokens
            + 4.0 * size.num_hidden_layers * size.hidden_size * tokens_squared)


def training_flops(size: EncoderSize, tokens: float, tokens_squared: float) -> float:
    """Model FLOPs of a training step (forward and backward: 3x the forward pass)."""
    return 3.0 * forward_flops(size, tokens, tokens_squared)


def utilisation(flops: float, seconds: float, peak_gflops: float) -> float:
    """FLOPs per second over the peak (a fraction)."""
    return flops / seconds / (peak_gflops * 1e9)
