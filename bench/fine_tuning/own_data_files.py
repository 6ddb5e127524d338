"""The own-data benchmark's files, made from ../shared/data (never committed): CoNLL-2003
sentences as multi-label JSON lines (the entity types each holds) and as two-column tagging
files (IOB2 and IOBES), and WikiText-2 as plain text, one sentence a line, a blank line between
articles. Pure functions over lines and lists; `bench/fine_tuning/own_data.py` writes the files.
"""
from __future__ import annotations

import json
import random
import re
from typing import Iterable, Sequence, TypeVar

from data import tokenization
from data.ner import conll

# A sentence of a CoNLL file: its lines' columns (CoNLL-2003: word, POS, chunk, tag).
Rows = list[list[str]]
T = TypeVar("T")

ENTITY_TYPES = ("LOC", "MISC", "ORG", "PER")  # CoNLL-2003's, in label-index order


def conll_sentences(lines: Iterable[str]) -> list[Rows]:
    """The sentences of a CoNLL file's lines, each a list of its lines' columns; `-DOCSTART-`
    lines and blank lines only separate."""
    sentences, rows = [], []
    for line in lines:
        columns = line.split()
        if columns and columns[0] != "-DOCSTART-":
            rows.append(columns)
            continue
        if rows:
            sentences.append(rows)
        rows = []
    if rows:
        sentences.append(rows)
    return sentences


def entity_types(tags: Sequence[str]) -> list[str]:
    """The entity types of a sentence's tags (any of IOB1, IOB2, IOBES), sorted, each once."""
    return sorted({tag.split("-", 1)[1] for tag in tags if tag != "O"})


def multi_label_row(sentence: Rows) -> dict:
    """A JSON line: the sentence's words joined by spaces, and its entity types joined by commas
    ("" for a sentence without an entity)."""
    return {"text": " ".join(row[0] for row in sentence),
            "labels": ",".join(entity_types([row[-1] for row in sentence]))}


def iob2_to_iobes(tags: Sequence[str]) -> list[str]:
    """One sentence's IOB2 tags in IOBES: an entity of one word is S-, of more B- ... I- ... E-
    (entities as conlleval reads them: an `I-` after `O` or another type starts one)."""
    converted = []
    for index, tag in enumerate(tags):
        if tag == conll.OUTSIDE_TAG:
            converted.append(tag)
            continue
        previous = tags[index - 1] if index else conll.OUTSIDE_TAG
        following = tags[index + 1] if index + 1 < len(tags) else conll.OUTSIDE_TAG
        begins = conll.starts_chunk(previous, tag)
        continues = following != conll.OUTSIDE_TAG and not conll.starts_chunk(tag, following)
        prefix = ("B" if continues else "S") if begins else ("I" if continues else "E")
        converted.append(f"{prefix}-{conll.parse_tag(tag)[1]}")
    return converted


def conll_text(sentences: Sequence[Rows]) -> str:
    """Sentences as a CoNLL file: a line a token, columns joined by spaces, a blank line after
    each sentence."""
    return "".join("".join(" ".join(row) + "\n" for row in sentence) + "\n"
                   for sentence in sentences)


def two_columns(sentences: Sequence[Rows], iobes: bool = False) -> list[Rows]:
    """Each token's word and tag only (the tag in IOBES where asked)."""
    result = []
    for sentence in sentences:
        tags = [row[-1] for row in sentence]
        tags = iob2_to_iobes(tags) if iobes else tags
        result.append([[row[0], tag] for row, tag in zip(sentence, tags)])
    return result


def jsonl_text(rows: Iterable[dict]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def subsample(items: Sequence[T], count: int | None, seed: int = 0) -> list[T]:
    """`count` of the items drawn without replacement by `seed`, in their order; all of them
    where `count` is None or at least their number."""
    if count is None or count >= len(items):
        return list(items)
    chosen = sorted(random.Random(seed).sample(range(len(items)), count))
    return [items[index] for index in chosen]


# ---------------------------------------------------------------------------------------------
# WikiText-2.

_SPLIT_NUMBER = re.compile(r" @([-.,])@ ")  # WikiText's "1 @,@ 000", "guest @-@ starring"
_SENTENCE_END = re.compile(r"(?<= [.!?]) (?=[A-Z\"'(])")


def wikitext_documents(lines: Iterable[str]) -> list[list[str]]:
    """WikiText-2's tokenized lines as articles of sentences: a ` = Title = ` line starts an
    article, other headings are dropped, `<unk>` removed, `@-@` `@,@` `@.@` joined, each
    paragraph cut into sentences after ` . `, ` ! ` or ` ? ` before a capital or a quote."""
    documents: list[list[str]] = []
    for line in lines:
        text = line.strip()
        if not text:
            continue
        if text.startswith("= ") and text.endswith(" ="):
            if not text.startswith("= ="):
                documents.append([])
            continue
        if not documents:
            documents.append([])
        text = _SPLIT_NUMBER.sub(r"\1", text.replace("<unk>", " "))
        text = re.sub(r"\s+", " ", text).strip()
        documents[-1].extend(s for s in _SENTENCE_END.split(text) if s)
    return [document for document in documents if document]


def documents_text(documents: Sequence[Sequence[str]]) -> str:
    """create_pretraining_data.py's input: a sentence a line, a blank line between documents."""
    return "\n".join("".join(sentence + "\n" for sentence in document)
                     for document in documents)


def pieces_per_word(tokenizer: tokenization.FullTokenizer, texts: Iterable[str]
                    ) -> tuple[int, int]:
    """(words, WordPieces) of the texts: BasicTokenizer's words and the pieces of each."""
    words = pieces = 0
    for text in texts:
        for word in tokenizer.basic_tokenizer.tokenize(text):
            words += 1
            pieces += len(tokenizer.wordpiece_tokenizer.tokenize(word))
    return words, pieces


def changed_texts(before: tokenization.FullTokenizer, after: tokenization.FullTokenizer,
                  texts: Iterable[str]) -> tuple[int, int]:
    """(texts, those of them that the two tokenizers cut into different tokens)."""
    count = changed = 0
    for text in texts:
        count += 1
        changed += before.tokenize(text) != after.tokenize(text)
    return count, changed
