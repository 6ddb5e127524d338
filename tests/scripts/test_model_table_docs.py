"""The table of formats x commands in docs/checkpoints.md is the one the tests run
(`tests/support/model_table.py`)."""
from tests.support.model_table import (COLUMNS, DOC, FIXTURES, ROWS, VOCAB, doc_table, expected,
                                       markdown_table)


def test_the_docs_show_the_table_the_tests_run():
    assert doc_table(DOC.read_text(encoding="utf-8")) == markdown_table(), (
        "docs/checkpoints.md is out of date: run `python tests/support/model_table.py`")


def test_every_refused_cell_says_why():
    for row in ROWS:
        for column in COLUMNS:
            refusal = expected(row, column)
            assert refusal is None or (refusal.short and refusal.cause), (row.name, column.name)


def test_the_rows_share_the_fixtures_vocabulary():
    for folder in ("encoder/vocab.txt", "pretrainer/vocab.txt", "hub_encoder/assets/vocab.txt",
                   "hub_masked_lm/assets/vocab.txt"):
        assert tuple((FIXTURES / folder).read_text(encoding="utf-8").split("\n")[:-1]) == VOCAB
