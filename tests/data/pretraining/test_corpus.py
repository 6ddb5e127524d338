"""Tests of data/pretraining/corpus.py: documents, counts and chunks of a text corpus."""
import pytest

from data.pretraining import corpus as corpus


def _write(path, data: bytes):
    path.write_bytes(data)
    return str(path)


def test_expand_input_patterns(tmp_path):
    for name in ("b.txt", "a.txt", "c.dat"):
        (tmp_path / name).write_text("x\n")
    paths = corpus.expand_input_patterns(f"{tmp_path}/*.txt, {tmp_path}/c.dat")
    assert paths == [f"{tmp_path}/a.txt", f"{tmp_path}/b.txt", f"{tmp_path}/c.dat"]
    assert corpus.expand_input_patterns([f"{tmp_path}/a.txt"]) == [f"{tmp_path}/a.txt"]
    with pytest.raises(ValueError, match=r"'.*/\*.json' matches no file"):
        corpus.expand_input_patterns(f"{tmp_path}/a.txt,{tmp_path}/*.json")
    with pytest.raises(ValueError, match=r"input file '.*missing.txt' does not exist"):
        corpus.expand_input_patterns(f"{tmp_path}/missing.txt")
    with pytest.raises(ValueError, match="no input file"):
        corpus.expand_input_patterns(" , ")


def test_documents_blank_lines_and_invalid_utf8(tmp_path):
    first = _write(tmp_path / "1.txt", b"one\r\ntwo  \n\n\n \xe3\x80\x80\nthree\xff\xfe end\n"
                                       b"four\x1cfive\xe2\x80\xa8six\n")
    second = _write(tmp_path / "2.txt", b"seven\n\n")
    counts = corpus.ReadCounts()
    documents = [lines for lines, _ in corpus.iter_documents([first, second], counts)]
    # A line of U+3000 only is blank; invalid bytes are dropped; lines end at "\n" only;
    # the end of a file ends a document.
    assert [d for d in documents if d] == [["one", "two"], ["three end",
                                                            "four\x1cfive\u2028six"],
                                           ["seven"]]
    assert counts.lines == 9 and counts.blank_lines == 4 and counts.invalid_utf8_lines == 1
    assert counts.documents == 3


def test_chunks_close_on_bytes_and_documents(tmp_path):
    text = "".join(f"doc {i} sentence\nsecond\n\n" for i in range(10)).encode()
    path = _write(tmp_path / "c.txt", text)
    counts = corpus.ReadCounts()
    chunks = list(corpus.iter_chunks([path], chunk_bytes=50, min_chunk_documents=3,
                                     counts=counts))
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert [len(c.documents) for c in chunks] == [3, 3, 4]  # the last single one joins
    assert sum(c.num_bytes for c in chunks) == len(text) == counts.bytes_read
    assert [d[0] for c in chunks for d in c.documents] == [f"doc {i} sentence" for i in
                                                           range(10)]
    chunks = list(corpus.iter_chunks([path], 40, 2, corpus.ReadCounts()))
    assert [len(c.documents) for c in chunks] == [2, 2, 2, 2, 2]
    assert len(list(corpus.iter_chunks([path], 10**9, 1, corpus.ReadCounts()))) == 1


def test_a_chunk_of_long_documents_closes_at_the_byte_cap(tmp_path):
    document = ("word " * 40 + "\n") * 5 + "\n"  # about 1 KB
    path = _write(tmp_path / "long.txt", (document * 40).encode())
    chunks = list(corpus.iter_chunks([path], chunk_bytes=100, min_chunk_documents=1000,
                                     counts=corpus.ReadCounts()))
    cap = corpus.MAX_CHUNK_FACTOR * 100
    assert len(chunks) > 1
    assert all(c.num_bytes < cap + len(document) for c in chunks)
    assert sum(len(c.documents) for c in chunks) == 40
