"""Tests of data/ner/conll.py on hand-written files and the real CoNLL-2003 splits."""
import re

import pytest

from data.ner import conll

_TWO_DOCUMENTS = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC
1996-08-22 CD I-NP O
"""


def _write(tmp_path, text, name="data.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_reads_documents_sentences_and_columns(tmp_path):
    data = conll.read_conll_file(_write(tmp_path, _TWO_DOCUMENTS))
    assert len(data.documents) == 2
    first, second = data.documents
    assert [s.words for s in first.sentences] == [["EU", "rejects", "German", "call"],
                                                 ["Peter", "Blackburn"]]
    assert [s.tags for s in first.sentences] == [["B-ORG", "O", "B-MISC", "O"],
                                                ["B-PER", "I-PER"]]
    assert first.sentences[0].tokens[2] == conll.ConllToken("German", "B-MISC")
    assert [s.first_line for s in first.sentences] == [3, 8]
    assert second.sentences[0].words == ["BRUSSELS", "1996-08-22"]
    assert second.sentences[0].first_line == 13
    assert data.source_scheme == "iob2"
    assert len(data.sentences) == 3


def test_file_without_docstart_is_one_document(tmp_path):
    text = "A DT B-NP O\n\n\nB NN B-NP B-PER\nC NN I-NP I-PER\n\nD NN B-NP O"
    data = conll.read_conll_file(_write(tmp_path, text))
    assert len(data.documents) == 1
    assert [s.words for s in data.sentences] == [["A"], ["B", "C"], ["D"]]
    assert [s.first_line for s in data.sentences] == [1, 4, 7]


def test_iob1_file_is_detected_and_converted(tmp_path):
    # IOB1: entities start with I-; B- only separates two adjacent entities of one type.
    text = ("Peter I-PER\nBlackburn I-PER\nand O\nParis I-LOC\nLondon B-LOC\n"
            "Smith I-PER\nUN I-ORG\n\nKohl I-PER\n")
    text = "\n".join(" ".join([line.split()[0], "NNP", "B-NP", line.split()[1]]) if line else ""
                     for line in text.split("\n"))
    data = conll.read_conll_file(_write(tmp_path, text))
    assert data.source_scheme == "iob1"
    assert data.sentences[0].tags == ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "B-PER", "B-ORG"]
    assert data.sentences[1].tags == ["B-PER"]
    # The words and other columns are untouched.
    assert data.sentences[0].tokens[3] == conll.ConllToken("Paris", "B-LOC")


def test_iob1_to_iob2_rules():
    assert conll.iob1_to_iob2(["I-PER", "I-PER", "B-PER", "I-PER"]) == [
        "B-PER", "I-PER", "B-PER", "I-PER"]
    # A type change opens an entity even without B-.
    assert conll.iob1_to_iob2(["B-PER", "I-LOC", "I-LOC", "O", "I-MISC"]) == [
        "B-PER", "B-LOC", "I-LOC", "O", "B-MISC"]
    iob2 = ["O", "B-ORG", "I-ORG", "B-ORG", "O", "B-PER"]
    assert conll.iob1_to_iob2(iob2) == iob2


def test_starts_chunk():
    assert conll.starts_chunk("O", "I-PER")
    assert conll.starts_chunk("I-PER", "B-PER")
    assert conll.starts_chunk("I-LOC", "I-PER")
    assert not conll.starts_chunk("B-PER", "I-PER")
    assert not conll.starts_chunk("I-PER", "O")


def test_forced_iob2_rejects_i_opening_an_entity(tmp_path):
    text = "A NN B-NP O\n\nB NN B-NP O\nC NN B-NP I-ORG\n"
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}:4: .*'I-ORG'"):
        conll.read_conll_file(path, tag_scheme="iob2")
    assert conll.read_conll_file(path, tag_scheme="iob1").sentences[1].tags == ["O", "B-ORG"]


def test_forced_iob1_on_iob2_file_keeps_tags(tmp_path):
    data = conll.read_conll_file(_write(tmp_path, _TWO_DOCUMENTS), tag_scheme="iob1")
    assert data.source_scheme == "iob1"
    assert data.sentences[1].tags == ["B-PER", "I-PER"]


@pytest.mark.parametrize("line", ["Peter NNP B-NP", "Peter NNP B-NP B-PER extra", "Peter"])
def test_wrong_column_count_names_file_and_line(tmp_path, line):
    path = _write(tmp_path, f"-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\n{line}\n")
    expected = rf"{re.escape(str(path))}:4: expected 4 .*found {len(line.split())}: "
    with pytest.raises(ValueError, match=expected):
        conll.read_conll_file(path)


@pytest.mark.parametrize("tag", ["PER", "B-", "o", "X-PER"])
def test_unknown_tag_scheme_names_file_and_line(tmp_path, tag):
    path = _write(tmp_path, f"EU NNP B-NP B-ORG\n\nPeter NNP B-NP {tag}\n")
    expected = rf"{re.escape(str(path))}:3: tag '{tag}' is not O or a B-, I-, E-, S- \(IOBES\)"
    with pytest.raises(ValueError, match=expected):
        conll.read_conll_file(path)


def test_unknown_scheme_argument(tmp_path):
    with pytest.raises(ValueError, match="tag_scheme"):
        conll.read_conll_file(_write(tmp_path, _TWO_DOCUMENTS), tag_scheme="bioes")


def test_parse_tag():
    assert conll.parse_tag("O") == ("O", "")
    assert conll.parse_tag("B-PER") == ("B", "PER")
    assert conll.parse_tag("I-NAME-2") == ("I", "NAME-2")
    with pytest.raises(ValueError):
        conll.parse_tag("X-PER")


def test_label_list_and_entity_types(tmp_path):
    assert conll.label_list(["PER", "LOC", "PER"]) == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    data = conll.read_conll_file(_write(tmp_path, _TWO_DOCUMENTS))
    assert conll.entity_types(data) == {"ORG", "MISC", "PER", "LOC"}


@pytest.mark.parametrize("split, documents, sentences, tokens, entities", [
    ("valid", 216, 3250, 51362, {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}),
    ("test", 231, 3453, 46435, {"LOC": 1668, "MISC": 702, "ORG": 1661, "PER": 1617}),
])
def test_real_conll2003_counts(shared_data_dir, split, documents, sentences, tokens, entities):
    path = shared_data_dir / "conll2003" / f"{split}.txt"
    data = conll.read_conll_file(path)
    assert data.source_scheme == "iob2"
    assert len(data.documents) == documents
    assert len(data.sentences) == sentences
    assert sum(len(s.tokens) for s in data.sentences) == tokens
    # MANIFEST counts, and the B- counts of `awk '{print $4}' | sort | uniq -c` on the files.
    found = {}
    for sentence in data.sentences:
        for tag in sentence.tags:
            if tag.startswith("B-"):
                found[tag[2:]] = found.get(tag[2:], 0) + 1
    assert found == entities
    assert conll.label_list(conll.entity_types(data)) == [
        "O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


def test_empty_documents_and_a_missing_final_blank_line(tmp_path):
    path = _write(tmp_path, "-DOCSTART- -X- -X- O\n\n-DOCSTART- -X- -X- O\n\n"
                            "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n"
                            "Peter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER")
    data = conll.read_conll_file(path)
    assert [s.words for s in data.sentences] == [["EU", "rejects"], ["Peter", "Blackburn"]]
    assert [s.tags for s in data.sentences] == [["B-ORG", "O"], ["B-PER", "I-PER"]]


def test_a_two_column_file_reads_as_the_four_column_one(tmp_path):
    four = conll.read_conll_file(_write(tmp_path, _TWO_DOCUMENTS))
    two_columns = "\n".join(" ".join([line.split()[0], line.split()[-1]]) if line.strip() else ""
                            for line in _TWO_DOCUMENTS.split("\n"))
    two = conll.read_conll_file(_write(tmp_path, two_columns, "two.txt"))
    assert two == four
    # Other columns by index: the tag first and the word last.
    swapped = "\n".join(" ".join(reversed(line.split())) if line.strip() else ""
                        for line in two_columns.split("\n"))
    assert conll.read_conll_file(_write(tmp_path, swapped, "swapped.txt"), token_column=-1,
                                 tag_column=0) == four


def test_iobes_and_bilou_files_are_detected_and_read_as_iob2(tmp_path):
    iobes = "Peter B-PER\nBlackburn E-PER\nin O\nParis S-LOC\n\nthe O\nUnited B-ORG\nStates I-ORG\nArmy E-ORG\n"
    data = conll.read_conll_file(_write(tmp_path, iobes))
    assert data.source_scheme == "iobes"
    assert [s.tags for s in data.sentences] == [["B-PER", "I-PER", "O", "B-LOC"],
                                                ["O", "B-ORG", "I-ORG", "I-ORG"]]
    bilou = iobes.replace("E-", "L-").replace("S-", "U-")
    assert conll.read_conll_file(_write(tmp_path, bilou, "bilou.txt")).sentences == data.sentences
    with pytest.raises(ValueError, match=r":2: tag 'E-PER' is an IOBES / BILOU tag, not IOB2"):
        conll.read_conll_file(_write(tmp_path, iobes, "forced.txt"), tag_scheme="iob2")


def test_a_line_with_other_columns_than_the_first_is_refused(tmp_path):
    path = _write(tmp_path, "EU B-ORG\nrejects O\n\nPeter NNP B-PER\n")
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}:4: expected 2 "):
        conll.read_conll_file(path)
