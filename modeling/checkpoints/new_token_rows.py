"""The rows of tokens written into a vocabulary's [unusedN] slots, started from their pieces.

`build_vocab.py --extend_vocab` puts a domain's words in the [unusedN] lines of a released
vocabulary and records, for each, the ids of the pieces the released vocabulary split it into.
The model's vocabulary-sized weights keep their shapes, so the checkpoint still loads strictly;
`initialise_new_token_rows` sets each new token's word-embedding row, and its masked-LM output bias
where the model has that head, to the mean of its pieces' values, so that continued pretraining
starts from what the model knew of the word.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import keras
import numpy as np

from modeling.checkpoints.names import tf1_name_map

# The variables with a row (or an entry) per vocabulary token, by their original names.
VOCABULARY_VARIABLES = ("bert/embeddings/word_embeddings", "cls/predictions/output_bias")


def initialise_new_token_rows(model: keras.Model,
                              piece_ids: Mapping[int, Sequence[int]]) -> list[str]:
    """Sets each new token's rows to the mean of its pieces' rows.

    Args:
      model: a built model of any head.
      piece_ids: new token id -> the ids of its pieces under the released vocabulary (never a new
        token's id: the means are of the released values).

    Returns:
      The original names of the variables changed.

    Raises:
      ValueError: an id outside the vocabulary, a new token without pieces or among the pieces.
    """
    new_ids = set(piece_ids)
    for token_id, pieces in piece_ids.items():
        if not pieces or new_ids.intersection(pieces):
            raise ValueError(f"new token {token_id}: its pieces must be tokens of the released "
                             "vocabulary")
    variables = tf1_name_map(model)
    changed = []
    for name in VOCABULARY_VARIABLES:
        if name not in variables:
            continue
        values = variables[name].numpy()
        ids = new_ids.union(*piece_ids.values())
        if ids and not 0 <= min(ids) <= max(ids) < len(values):
            raise ValueError(f"token ids must be in [0, {len(values)}), the rows of {name}")
        new_values = values.copy()
        for token_id, pieces in piece_ids.items():
            new_values[token_id] = np.mean(values[list(pieces)], axis=0, dtype=np.float64)
        variables[name].assign(new_values)
        changed.append(name)
    return changed
