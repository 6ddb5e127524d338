"""`BertConfig`: the hyper-parameters of a BERT model, in the original `bert_config.json` format."""
from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any

from utils.json_files import read_json_object
from utils.output_files import write_text_atomically

# Keys that Google's multilingual and Chinese releases carry beyond the 11 of the original code. They
# do not change the model; they are kept so that a config written back is the config read.
RELEASE_EXTRA_KEYS = (
    "directionality",
    "pooler_fc_size",
    "pooler_num_attention_heads",
    "pooler_num_fc_layers",
    "pooler_size_per_head",
    "pooler_type",
)


# Sizes that a model needs at least one of (a table of 0 rows makes every lookup fail inside a
# training step, or return zeros on GPUs).
_POSITIVE_SIZES = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                   "intermediate_size", "max_position_embeddings", "type_vocab_size")


@dataclasses.dataclass
class BertConfig:
    """Configuration of a BERT encoder; the field names are the `bert_config.json` keys."""

    # Size of the WordPiece vocabulary (rows of `bert/embeddings/word_embeddings`). Required.
    vocab_size: int
    # Width H of every hidden layer and of the embeddings.
    hidden_size: int = 768
    # Number L of Transformer layers.
    num_hidden_layers: int = 12
    # Number of attention heads per layer; must divide hidden_size.
    num_attention_heads: int = 12
    # Width of the feed-forward ("intermediate") layer.
    intermediate_size: int = 3072
    # Feed-forward activation: "gelu" (tanh approximation), "gelu_exact", "relu", "tanh", "linear".
    hidden_act: str = "gelu"
    # Dropout on embeddings, attention output and feed-forward output.
    hidden_dropout_prob: float = 0.1
    # Dropout on the attention probabilities.
    attention_probs_dropout_prob: float = 0.1
    # Longest sequence the position embeddings cover.
    max_position_embeddings: int = 512
    # Rows of the segment ("token type") embedding table.
    type_vocab_size: int = 16
    # Standard deviation of the truncated-normal initialiser.
    initializer_range: float = 0.02
    # Extra keys of Google's releases (RELEASE_EXTRA_KEYS), written back as read.
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    def __post_init__(self):
        for field in dataclasses.fields(self):
            if field.name != "extra":
                _check_type(field.name, getattr(self, field.name), field.type)
        for name in _POSITIVE_SIZES:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} ({getattr(self, name)}) must be at least 1")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"{name} ({getattr(self, name)}) must be in [0, 1)")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) is not a multiple of num_attention_heads "
                f"({self.num_attention_heads})")
        # Imported here so that the activation table stays the single list of valid names.
        from modeling.layers.activations import get_activation
        get_activation(self.hidden_act)

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def check_max_seq_length(self, max_seq_length: int, name: str = "max_seq_length") -> None:
        """Raises ValueError unless `max_seq_length` fits [CLS], [SEP] and the position
        embeddings; `name` is what the caller calls it (a flag, an argument)."""
        if not 3 <= max_seq_length <= self.max_position_embeddings:
            raise ValueError(f"{name}={max_seq_length} must be between 3 and the model's "
                             f"max_position_embeddings={self.max_position_embeddings}")

    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str = "config") -> "BertConfig":
        """Builds a config from `bert_config.json` content; missing keys take the original defaults."""
        if "vocab_size" not in values:
            raise ValueError(f"{source}: `vocab_size` is required")
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        extra = {k: v for k, v in values.items() if k in RELEASE_EXTRA_KEYS}
        unknown = sorted(set(values) - names - set(RELEASE_EXTRA_KEYS))
        if unknown:
            logging.warning("%s: ignoring unknown keys %s", source, ", ".join(unknown))
        try:
            return cls(**{k: v for k, v in values.items() if k in names}, extra=extra)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{source}: {error}") from None

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> "BertConfig":
        return cls.from_dict(read_json_object(path, "BERT config"), source=str(path))

    def to_dict(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        values.update(self.extra)
        return dict(sorted(values.items()))

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path: str | os.PathLike) -> None:
        """Writes the config atomically (a temp file in the same folder, then a rename)."""
        write_text_atomically(path, self.to_json_string())


def _check_type(name: str, value: Any, annotation: str) -> None:
    expected = {"int": (int,), "float": (int, float), "str": (str,)}[annotation]
    if isinstance(value, bool) or not isinstance(value, expected):
        raise ValueError(f"`{name}` must be {annotation}, got {value!r} ({type(value).__name__})")
    if annotation in ("int", "float") and value < 0:
        raise ValueError(f"`{name}` must not be negative, got {value!r}")

