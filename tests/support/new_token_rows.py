"""The check of a checkpoint whose vocabulary gained words in its [unusedN] slots."""
import numpy as np

# The variables with one row per vocabulary entry.
VOCABULARY_ROWS = ("bert/embeddings/word_embeddings", "cls/predictions/output_bias")


def assert_new_rows_are_piece_means(released: dict, values: dict, pieces: dict) -> None:
    """`values` ({original name: array}) are `released` but for the rows of the new tokens in
    the vocabulary-sized variables, which are the means of their pieces' released rows."""
    assert sorted(values) == sorted(released)
    for name, before in released.items():
        after = values[name]
        assert after.shape == before.shape and after.dtype == before.dtype, name
        if name not in VOCABULARY_ROWS:
            np.testing.assert_array_equal(after, before, err_msg=name)
            continue
        kept = [i for i in range(len(before)) if i not in pieces]
        np.testing.assert_array_equal(after[kept], before[kept], err_msg=name)
        for token_id, ids in pieces.items():
            mean = sum(before[i].astype(np.float64) for i in ids) / len(ids)
            np.testing.assert_allclose(after[token_id], mean, rtol=1e-6, atol=1e-9)
            assert not np.allclose(after[token_id], before[token_id])
