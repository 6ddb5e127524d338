"""Tests of modeling/checkpoints/new_token_rows.py: the released checkpoint with an extended
vocabulary loads strictly, and only the new tokens' rows change, to their pieces' means."""
import shutil

import numpy as np
import pytest

from data import tokenization
from modeling.checkpoints import ModelSpec, build_model, initialise_new_token_rows, read_model
from modeling.checkpoints.names import tf1_name_map
from modeling.checkpoints.tf1.checkpoint import read_tf1_checkpoint
from modeling.config import BertConfig
from tests.support.modeling_fixtures import tiny_dir
from tests.support.new_token_rows import VOCABULARY_ROWS, assert_new_rows_are_piece_means

NEW_WORDS = {1: "chloroplasts", 2: "genghis", 105: "thylakoid"}  # [unused0], [unused1], [unused100]


def _released_with_extended_vocab(fixtures_dir, uncased_vocab, folder):
    """The original code's tiny checkpoint beside the uncased vocabulary with three new words."""
    folder.mkdir()
    for path in tiny_dir(fixtures_dir).glob("bert_model.ckpt.*"):
        shutil.copy(path, folder / path.name)
    shutil.copy(tiny_dir(fixtures_dir) / "bert_config.json", folder / "bert_config.json")
    lines = uncased_vocab.read_text("utf-8").split("\n")
    for token_id, word in NEW_WORDS.items():
        assert tokenization.is_unused_token(lines[token_id])
        lines[token_id] = word
    (folder / "vocab.txt").write_text("\n".join(lines), encoding="utf-8")
    return folder


def test_new_rows_are_their_pieces_means_and_nothing_else_changes(fixtures_dir, uncased_vocab,
                                                                  tmp_path):
    folder = _released_with_extended_vocab(fixtures_dir, uncased_vocab, tmp_path / "extended")
    loaded = read_model(str(folder))  # strict: every variable, every shape
    released = read_tf1_checkpoint(str(folder / "bert_model.ckpt"))
    tokenizer = tokenization.FullTokenizer(str(uncased_vocab))
    pieces = {token_id: tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word))
              for token_id, word in NEW_WORDS.items()}
    assert all(len(ids) > 1 for ids in pieces.values())
    assert initialise_new_token_rows(loaded.model, pieces) == list(VOCABULARY_ROWS)
    assert_new_rows_are_piece_means(
        released, {name: v.numpy() for name, v in tf1_name_map(loaded.model).items()}, pieces)


def test_a_model_without_the_masked_lm_head_changes_its_embeddings_only():
    config = BertConfig(vocab_size=12, hidden_size=4, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=8, max_position_embeddings=8)
    model = build_model(config, ModelSpec("classifier", 2))
    embeddings = tf1_name_map(model)["bert/embeddings/word_embeddings"]
    before = embeddings.numpy()
    assert initialise_new_token_rows(model, {3: (7, 8, 11)}) == [VOCABULARY_ROWS[0]]
    # float32 round-off of a mean of rows about 0.02 in size: a few 1e-10, whatever the value.
    np.testing.assert_allclose(embeddings.numpy()[3], before[[7, 8, 11]].mean(axis=0), rtol=1e-6,
                               atol=1e-8)
    for bad, message in [({3: (7, 12)}, r"must be in \[0, 12\)"), ({3: (4, 5), 4: (6,)}, "pieces"),
                         ({3: ()}, "pieces")]:
        with pytest.raises(ValueError, match=message):
            initialise_new_token_rows(model, bad)
    np.testing.assert_array_equal(np.delete(embeddings.numpy(), 3, axis=0),
                                  np.delete(before, 3, axis=0))
