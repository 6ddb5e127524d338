"""Fill-mask: each `[MASK]` of a text, its most probable tokens under a masked-LM head (the
pretraining task's head, `modeling.models.text_models.MaskedTokenPredictor`), for any model the
project reads with that head (Google's releases, `run_pretraining.py`'s output, Hugging Face
`BertForMaskedLM` / `BertForPreTraining`, TF-Hub encoders exported with their masked LM)."""
from __future__ import annotations

import dataclasses
from typing import Sequence

import keras
import numpy as np

from data import features as model_inputs, tokenization
from modeling import checkpoints
from modeling.models.text_models import MaskedTokenPredictor
from running.batching import Batching
from tasks.text_model import TextModel, checked_lower_case

MASK = tokenization.MASK


@dataclasses.dataclass(frozen=True)
class TokenScore:
    """One candidate for a masked position."""

    token: str
    token_id: int
    probability: float


class _MaskKeepingTokenizer:
    """A FullTokenizer that keeps every literal `[MASK]` whole (its basic tokenizer would split
    it into `[`, `mask`, `]`), as transformers' tokenizers keep their special tokens."""

    def __init__(self, tokenizer: tokenization.FullTokenizer):
        self.tokenizer = tokenizer

    def tokenize(self, text: str) -> list[str]:
        first, *rest = text.split(MASK)
        tokens = self.tokenizer.tokenize(first)
        for piece in rest:
            tokens += [MASK, *self.tokenizer.tokenize(piece)]
        return tokens

    def convert_tokens_to_ids(self, tokens) -> list[int]:
        return self.tokenizer.convert_tokens_to_ids(tokens)

class FillMask(TextModel):
    """Each `[MASK]` of each text, its most probable tokens under the masked-LM head.

    A word masked by several `[MASK]`s gets a prediction per piece, each on its own (as
    transformers' fill-mask pipeline); a text without `[MASK]` gets none.
    """

    def __init__(self, pretrainer: keras.Model, tokenizer: tokenization.FullTokenizer,
                 max_seq_length: int = 128, batch_size: int = 32,
                 batching: Batching = Batching()):
        super().__init__(pretrainer, tokenizer, max_seq_length, batch_size, batching)
        if MASK not in tokenizer.vocab:
            raise ValueError(f"the vocabulary has no {MASK} token")
        self.pretrainer = pretrainer
        self._predictors: dict[int, MaskedTokenPredictor] = {}

    @classmethod
    def from_checkpoint(cls, path: str, vocab_file: str | None = None,
                        bert_config_file: str | None = None, do_lower_case: bool | None = None,
                        **kwargs) -> "FillMask":
        """Reads a model with the masked-LM head from `path` (any format `read_model` reads).

        Raises:
            ValueError: the checkpoint has no masked-LM head.
        """
        loaded = checkpoints.read_model(path, bert_config_file=bert_config_file,
                                        vocab_file=vocab_file)
        if loaded.spec.head not in ("pretraining", "masked_lm"):
            raise ValueError(
                f"{path} holds a model without the masked-LM head ({loaded.spec.head} model, "
                f"no cls/predictions/*): fill-mask needs a checkpoint with the pretraining "
                f"heads, such as Google's bert_model.ckpt or run_pretraining.py's output")
        tokenizer = tokenization.FullTokenizer(loaded.vocab_file,
                                               checked_lower_case(do_lower_case, loaded, path))
        return cls(loaded.model, tokenizer, **kwargs)

    def __call__(self, texts: Sequence[str], top_k: int = 5) -> list[list[list[TokenScore]]]:
        """For each text, for each of its `[MASK]`s in order, the `top_k` tokens, most probable
        first. A `[MASK]` cut off by max_seq_length has no entry."""
        features = self._features(texts, _MaskKeepingTokenizer(self.tokenizer))
        positions = [[i for i, token in enumerate(f.tokens) if token == MASK] for f in features]
        slots = max((len(p) for p in positions), default=0) or 1
        arrays = model_inputs.stack(features)
        arrays["masked_lm_positions"] = np.array(
            [p + [0] * (slots - len(p)) for p in positions], np.int32).reshape(-1, slots)
        if top_k not in self._predictors:
            self._predictors[top_k] = MaskedTokenPredictor(self.pretrainer, top_k)
        outputs = self._predict(self._predictors[top_k], arrays) if features else {}
        results = []
        for row, row_positions in enumerate(positions):
            results.append([
                [TokenScore(self.tokenizer.inv_vocab[int(token_id)], int(token_id),
                            float(probability))
                 for token_id, probability in zip(outputs["token_ids"][row, slot],
                                                  outputs["probabilities"][row, slot])]
                for slot in range(len(row_positions))])
        return results
