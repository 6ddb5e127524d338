"""Tagging files (CoNLL-2003 and the like): reader, tag schemes (IOB1, IOB2, IOBES) and labels.

A file holds one token a line in whitespace-separated columns, a blank line after each sentence
and optionally a `-DOCSTART-` line before each document. CoNLL-2003 has four columns (word,
part-of-speech tag, syntactic chunk tag, named-entity tag); WNUT-17, WikiANN and most other sets
two (word, tag): the word and the tag are the columns `token_column` and `tag_column` say (by
default the first and the last). The original CoNLL-2003 distribution (eng.train, eng.testa,
eng.testb) tags entities in IOB1, where `B-` only marks an entity that directly follows one of
the same type and every other entity starts with `I-`; most copies in circulation use IOB2, where
every entity starts with `B-`; IOBES (BILOU) also marks an entity's last word (`E-`, `L-`) and a
one-word entity (`S-`, `U-`). The reader accepts all three and hands out IOB2, the labels the
model is trained on: the entities, which conlleval scores, are the same.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Iterable, Sequence

TAG_SCHEMES = ("auto", "iob1", "iob2", "iobes")
OUTSIDE_TAG = "O"
_DOCSTART = "-DOCSTART-"
_TAG_PATTERN = re.compile(r"^([BI])-(.+)$")
# IOBES's prefixes, and BILOU's spelling of the same: each in its IOB2 form.
_IOBES_PATTERN = re.compile(r"^([BIESLU])-(.+)$")
_IOBES_TO_IOB2 = {"B": "B", "I": "I", "E": "I", "L": "I", "S": "B", "U": "B"}


@dataclasses.dataclass(frozen=True)
class ConllToken:
    """One line of a tagging file: the word and its tag (CoNLL-2003's other columns are not
    read)."""

    word: str
    tag: str


@dataclasses.dataclass(frozen=True)
class ConllSentence:
    """A sentence: its tokens and the file line of the first one (1-based)."""

    tokens: tuple[ConllToken, ...]
    first_line: int

    @property
    def words(self) -> list[str]:
        return [token.word for token in self.tokens]

    @property
    def tags(self) -> list[str]:
        return [token.tag for token in self.tokens]


@dataclasses.dataclass(frozen=True)
class ConllDocument:
    """The sentences between two `-DOCSTART-` lines (or of a whole file without them)."""

    sentences: tuple[ConllSentence, ...]


@dataclasses.dataclass(frozen=True)
class ConllData:
    """A read file: documents with IOB2 tags, and the scheme the file itself used."""

    documents: tuple[ConllDocument, ...]
    source_scheme: str

    @property
    def sentences(self) -> list[ConllSentence]:
        return [sentence for document in self.documents for sentence in document.sentences]


def parse_tag(tag: str) -> tuple[str, str]:
    """Splits a tag into its prefix and entity type.

    `"B-PER"` gives `("B", "PER")`, `"O"` gives `("O", "")`.

    Raises:
        ValueError: If the tag is neither `O` nor `B-TYPE` / `I-TYPE`.
    """
    if tag == OUTSIDE_TAG:
        return OUTSIDE_TAG, ""
    match = _TAG_PATTERN.match(tag)
    if match is None:
        raise ValueError(f"tag {tag!r} is not O, B-TYPE or I-TYPE (IOB1/IOB2 schemes)")
    return match.group(1), match.group(2)


def starts_chunk(previous_tag: str, tag: str) -> bool:
    """Whether `tag` opens an entity, by conlleval's rules for IOB1 and IOB2 alike.

    `B-` always opens one; `I-` opens one after `O` (or at a sentence start, where
    `previous_tag` is `O`) or after a tag of another type.
    """
    prefix, chunk_type = parse_tag(tag)
    if prefix == OUTSIDE_TAG:
        return False
    previous_prefix, previous_type = parse_tag(previous_tag)
    return prefix == "B" or previous_prefix == OUTSIDE_TAG or previous_type != chunk_type


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """Rewrites one sentence's tags so that every entity starts with `B-`.

    IOB2 input comes back unchanged; so does the entity segmentation, which conlleval
    reads the same way from either scheme.
    """
    converted = []
    previous = OUTSIDE_TAG
    for tag in tags:
        prefix, chunk_type = parse_tag(tag)
        if prefix != OUTSIDE_TAG:
            prefix = "B" if starts_chunk(previous, tag) else "I"
            converted.append(f"{prefix}-{chunk_type}")
        else:
            converted.append(tag)
        previous = tag
    return converted


def _first_iob1_start(tags: Sequence[str]) -> int | None:
    """Index of the first `I-` tag that opens an entity (allowed in IOB1 only), if any."""
    previous = OUTSIDE_TAG
    for index, tag in enumerate(tags):
        if tag.startswith("I-") and starts_chunk(previous, tag):
            return index
        previous = tag
    return None


def _parse_documents(path: str, token_column: int,
                     tag_column: int) -> list[list[ConllSentence]]:
    """Reads the file into documents of sentences, checking columns and tags line by line."""
    documents: list[list[ConllSentence]] = [[]]
    tokens: list[ConllToken] = []
    first_line = 0
    needed = max(_width(token_column), _width(tag_column), 2)
    width = None  # every token line of a file has the columns of its first

    def end_sentence() -> None:
        if tokens:
            documents[-1].append(ConllSentence(tuple(tokens), first_line))
            tokens.clear()

    with open(path, encoding="utf-8") as reader:
        for line_number, line in enumerate(reader, start=1):
            fields = line.split()
            if not fields:
                end_sentence()
            elif _DOCSTART in (fields[0], fields[min(token_column, len(fields) - 1)]):
                end_sentence()
                documents.append([])
            else:
                if len(fields) < needed or len(fields) != (width or len(fields)):
                    raise ValueError(
                        f"{path}:{line_number}: expected {width or f'at least {needed}'} "
                        f"whitespace-separated columns (the word in column {token_column}, the "
                        f"tag in column {tag_column}), found {len(fields)}: {line.rstrip()!r}")
                width = len(fields)
                try:
                    _scheme_tag(fields[tag_column])
                except ValueError as error:
                    raise ValueError(f"{path}:{line_number}: {error}") from None
                if not tokens:
                    first_line = line_number
                tokens.append(ConllToken(fields[token_column], fields[tag_column]))
        end_sentence()
    return [sentences for sentences in documents if sentences]


def _width(column: int) -> int:
    """The fields a line needs for `column` (negative counts from the end)."""
    return column + 1 if column >= 0 else -column


def _scheme_tag(tag: str) -> tuple[str, str]:
    """(prefix, type) of an IOB1, IOB2 or IOBES / BILOU tag; ("O", "") for O."""
    if tag == OUTSIDE_TAG:
        return OUTSIDE_TAG, ""
    match = _IOBES_PATTERN.match(tag)
    if match is None:
        raise ValueError(f"tag {tag!r} is not O or a B-, I-, E-, S- (IOBES), L- or U- (BILOU) "
                         "tag of a type")
    return match.group(1), match.group(2)


def _detect_scheme(path: str, sentences: Iterable[ConllSentence], tag_scheme: str) -> str:
    """Returns `iob1`, `iob2` or `iobes`: an E-, S-, L- or U- tag means IOBES; else an `I-`
    opening an entity means IOB1.

    Raises:
        ValueError: Naming the line, for a tag the scheme asked for does not have.
    """
    sentences = list(sentences)
    for sentence in sentences:
        for offset, tag in enumerate(sentence.tags):
            if _scheme_tag(tag)[0] in "ESLU":
                if tag_scheme in ("iob1", "iob2"):
                    raise ValueError(f"{path}:{sentence.first_line + offset}: tag {tag!r} is an "
                                     f"IOBES / BILOU tag, not {tag_scheme.upper()} (pass the "
                                     "iobes scheme for such files)")
                return "iobes"
    if tag_scheme == "iobes":
        return "iobes"
    for sentence in sentences:
        index = _first_iob1_start(sentence.tags)
        if index is None:
            continue
        if tag_scheme == "iob2":
            raise ValueError(
                f"{path}:{sentence.first_line + index}: tag {sentence.tags[index]!r} starts an "
                "entity with I-, which IOB2 does not allow (pass the iob1 scheme for such files)")
        return "iob1"
    return "iob1" if tag_scheme == "iob1" else "iob2"


def read_conll_file(path: str | os.PathLike, tag_scheme: str = "auto", token_column: int = 0,
                    tag_column: int = -1) -> ConllData:
    """Reads a tagging file into documents of sentences with IOB2 tags.

    Args:
        path: The file: whitespace-separated columns, blank lines between sentences, optional
            `-DOCSTART-` lines between documents (without any, the file is one document).
        tag_scheme: `iob1`, `iob2`, `iobes`, or `auto` to detect it: a file with E-, S-, L- or
            U- tags is IOBES; one where some `I-` tag opens an entity is IOB1; any other is
            IOB2 (both IOB schemes read the same then).
        token_column, tag_column: the columns of the word and of its tag (negative count from
            the end of the line).

    Returns:
        The documents, tags converted to IOB2, and the scheme of the file.

    Raises:
        ValueError: On an unknown `tag_scheme`, and, naming the file and line, on a line
            without the columns, a tag of no scheme, or a tag the scheme asked for lacks.
    """
    if tag_scheme not in TAG_SCHEMES:
        raise ValueError(f"tag_scheme must be one of {TAG_SCHEMES}, got {tag_scheme!r}")
    path = os.fspath(path)
    documents = _parse_documents(path, token_column, tag_column)
    source_scheme = _detect_scheme(
        path, (sentence for sentences in documents for sentence in sentences), tag_scheme)
    converted = []
    for sentences in documents:
        converted.append(ConllDocument(tuple(_to_iob2(sentence, source_scheme)
                                             for sentence in sentences)))
    return ConllData(documents=tuple(converted), source_scheme=source_scheme)


def iobes_to_iob2(tags: Sequence[str]) -> list[str]:
    """Rewrites one sentence's IOBES (or BILOU) tags in IOB2: S- and U- become B-, E- and L-
    become I-; the entities are the same."""
    converted = []
    for tag in tags:
        prefix, chunk_type = _scheme_tag(tag)
        converted.append(tag if prefix == OUTSIDE_TAG else
                         f"{_IOBES_TO_IOB2[prefix]}-{chunk_type}")
    return converted


def _to_iob2(sentence: ConllSentence, scheme: str) -> ConllSentence:
    tags = iobes_to_iob2(sentence.tags) if scheme == "iobes" else iob1_to_iob2(sentence.tags)
    tokens = tuple(dataclasses.replace(token, tag=tag)
                   for token, tag in zip(sentence.tokens, tags))
    return ConllSentence(tokens, sentence.first_line)


def label_list(entity_types: Iterable[str]) -> list[str]:
    """The IOB2 labels in class-index order: `O`, then `B-T`, `I-T` for each type T sorted.

    CoNLL-2003's types LOC, MISC, ORG, PER give `O, B-LOC, I-LOC, B-MISC, ..., I-PER`.
    """
    labels = [OUTSIDE_TAG]
    for chunk_type in sorted(set(entity_types)):
        labels += [f"B-{chunk_type}", f"I-{chunk_type}"]
    return labels


def entity_types(data: ConllData) -> set[str]:
    """The entity types that occur in a read file."""
    return {parse_tag(tag)[1] for sentence in data.sentences for tag in sentence.tags} - {""}
