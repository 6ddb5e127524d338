"""Sentence vectors: one vector per text (or pair), pooled from an encoder's outputs as a
sentence-transformers folder says or as asked (`modeling.models.text_models.POOLINGS`)."""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Sequence

from absl import logging
import keras
import numpy as np

from data import tokenization
from data import features as model_inputs
from modeling import checkpoints
from modeling.models.encoder import encoder_of
from modeling.models.text_models import POOLINGS, SentenceEncoder
from running.batching import Batching
from tasks.text_model import TextModel, checked_lower_case
from utils.json_files import read_json_object

__all__ = ["POOLINGS", "SentenceEmbedder", "SentenceTransformersConfig",
           "read_sentence_transformers_folder"]


@dataclasses.dataclass(frozen=True)
class SentenceTransformersConfig:
    """What a sentence-transformers folder says about its model: where the transformer's files
    are, its pooling and normalisation, and its max_seq_length."""

    model_folder: str
    pooling: str
    normalize: bool
    max_seq_length: int | None


def read_sentence_transformers_folder(folder: str) -> SentenceTransformersConfig | None:
    """The configuration of a sentence-transformers folder (`modules.json`), None for others.

    Raises:
        ValueError: a module or pooling mode this project does not reproduce.
    """
    modules_file = os.path.join(folder, "modules.json")
    if not os.path.isfile(modules_file):
        return None
    with open(modules_file, encoding="utf-8") as f:
        try:
            modules = json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{modules_file}: not JSON ({error})") from None
    kinds = {module.get("type", "").rsplit(".", 1)[-1]: module.get("path", "")
             for module in modules}
    unknown = sorted(set(kinds) - {"Transformer", "Pooling", "Normalize"})
    if unknown or "Transformer" not in kinds:
        raise ValueError(f"{modules_file}: modules {unknown or 'without a Transformer'} are not "
                         f"supported (Transformer, Pooling and Normalize are)")
    pooling = "cls"
    if "Pooling" in kinds:
        config_file = os.path.join(folder, kinds["Pooling"], "config.json")
        modes = read_json_object(config_file, "sentence-transformers pooling config")
        chosen = [mode for mode in ("cls_token", "mean_tokens", "max_tokens",
                                    "mean_sqrt_len_tokens", "weightedmean_tokens",
                                    "lasttoken")
                  if modes.get(f"pooling_mode_{mode}")]
        if len(chosen) != 1 or chosen[0] not in ("cls_token", "mean_tokens", "max_tokens"):
            raise ValueError(f"{config_file}: pooling {chosen} is not supported (one of "
                             f"cls_token, mean_tokens, max_tokens is)")
        pooling = {"cls_token": "cls", "mean_tokens": "mean", "max_tokens": "max"}[chosen[0]]
    model_folder = os.path.join(folder, kinds["Transformer"])
    bert_config = os.path.join(model_folder, "sentence_bert_config.json")
    max_seq_length = read_json_object(bert_config).get("max_seq_length") \
        if os.path.isfile(bert_config) else None
    return SentenceTransformersConfig(model_folder, pooling, "Normalize" in kinds,
                                      max_seq_length)


class SentenceEmbedder(TextModel):
    """One vector per text (or pair): float32 [N, H], pooled as `pooling` (see
    `modeling.models.text_models.POOLINGS`), L2-normalised if `normalize`."""

    def __init__(self, encoder: keras.Model, tokenizer: tokenization.FullTokenizer,
                 pooling: str = "cls", normalize: bool = False, max_seq_length: int = 128,
                 batch_size: int = 32, batching: Batching = Batching()):
        super().__init__(encoder, tokenizer, max_seq_length, batch_size, batching)
        self.model = SentenceEncoder(encoder, pooling, normalize)

    @classmethod
    def from_checkpoint(cls, path: str, pooling: str | None = None,
                        normalize: bool | None = None, max_seq_length: int | None = None,
                        vocab_file: str | None = None, bert_config_file: str | None = None,
                        do_lower_case: bool | None = None, **kwargs) -> "SentenceEmbedder":
        """Reads the encoder of any model at `path`. A sentence-transformers folder brings its
        own pooling, normalisation and max_seq_length; arguments given override them (the
        defaults elsewhere: [CLS], not normalised, 128)."""
        found = read_sentence_transformers_folder(path) if os.path.isdir(path) else None
        if found is not None:
            logging.info("sentence-transformers folder %s: %s pooling%s, max_seq_length %s",
                         path, found.pooling, ", normalised" if found.normalize else "",
                         found.max_seq_length)
        loaded = checkpoints.read_model(found.model_folder if found else path,
                                        bert_config_file=bert_config_file, vocab_file=vocab_file)
        encoder = encoder_of(loaded.model)
        tokenizer = tokenization.FullTokenizer(loaded.vocab_file,
                                               checked_lower_case(do_lower_case, loaded, path))
        if max_seq_length is None:
            max_seq_length = (found and found.max_seq_length) or 128
        max_seq_length = min(max_seq_length, encoder.config.max_position_embeddings)
        return cls(encoder, tokenizer,
                   pooling=pooling or (found.pooling if found else "cls"),
                   normalize=(found.normalize if found else False) if normalize is None
                   else normalize,
                   max_seq_length=max_seq_length, **kwargs)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        features = self._features(texts, self.tokenizer)
        if not features:
            return np.zeros((0, self.model.encoder.config.hidden_size), np.float32)
        return self._predict(self.model, model_inputs.stack(features))["embedding"]
