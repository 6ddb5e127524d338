"""Tests of data/vocab_extension.py: which words fill the [unusedN] slots, the lines kept, the
extension file, and that texts without the new words tokenize as before on the shared corpora."""
import collections
import json

import pytest

from data import tokenization, vocab_extension, wordpiece_vocab

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
LETTERS = ["a", "b", "c", "d", "e"]


def _lines(*tokens, unused=6):
    """A vocabulary's lines: the special tokens, `unused` slots, the tokens, a final newline."""
    return SPECIALS + [f"[unused{i}]" for i in range(unused)] + list(tokens) + [""]


def _counts(text):
    return wordpiece_vocab.count_words([text], do_lower_case=True)


def _letters_only():
    """Every word of a-e splits into its letters: a word of n letters is n pieces."""
    return _lines(*LETTERS, *[f"##{letter}" for letter in LETTERS])


def test_words_are_ranked_by_the_tokens_they_save():
    counts = _counts("bad bad cab dace dace dace ace a a be bead")
    extension = vocab_extension.extend_vocabulary(_letters_only(), counts)
    # Savings, (pieces - 1) x count plus what a word saves on the longer words starting with it:
    # dace 3 x 3 = 9, bad 2 x 2 = 4, bead 3 x 1 = 3, ace 2, cab 2, and be: 1 for itself plus 1
    # on bead (b ##e ##a ##d -> be ##a ##d) = 2, but once bead is in, only its own 1.
    # Equal savings and counts go in code-point order; "a" is one piece already.
    assert [(t.token, t.saving) for t in extension.new_tokens] == [
        ("dace", 9), ("bad", 4), ("bead", 3), ("ace", 2), ("cab", 2), ("be", 1)]
    assert [t.id for t in extension.new_tokens] == [5, 6, 7, 8, 9, 10]
    assert extension.new_tokens[0].pieces == ("d", "##a", "##c", "##e")
    assert extension.new_tokens[0].piece_ids == (14, 16, 18, 20)
    assert extension.new_tokens[0].count == 3
    assert extension.lines[5:11] == ["dace", "bad", "bead", "ace", "cab", "be"]
    # 2x3 + 1x3 + 3x4 + 1x3 + 2x1 + 1x2 + 1x4 = 32 tokens for 11 words, then one each.
    assert (extension.tokens_before, extension.tokens_after, extension.words) == (32, 11, 11)


def test_max_new_tokens_takes_the_best():
    counts = _counts("bad bad cab dace dace dace")
    extension = vocab_extension.extend_vocabulary(_letters_only(), counts, max_new_tokens=2)
    assert [t.token for t in extension.new_tokens] == ["dace", "bad"]
    assert extension.lines[7:11] == ["[unused2]", "[unused3]", "[unused4]", "[unused5]"]
    assert vocab_extension.extend_vocabulary(_letters_only(), counts, 0).lines == _letters_only()


@pytest.mark.parametrize("tokens, text, harmed", [
    # abc would make abcd "abc ##d", and there is no ##d: [UNK] instead of "ab ##cd".
    (["ab", "##c", "##cd"], "abc abc abc abcd", "abcd"),
    # abc would make abcde "abc ##d ##e", three pieces instead of "ab ##cde".
    (["ab", "##c", "##d", "##e", "##cde"], "abc abc abc abcde", "abcde"),
])
def test_a_word_that_would_split_a_corpus_word_worse_is_left_out(tokens, text, harmed):
    lines = _lines(*LETTERS, *tokens)
    before = tokenization.WordpieceTokenizer(vocab_extension._tokens(lines)).tokenize("abc")
    assert before == ["ab", "##c"]  # two pieces, three times: the largest saving alone
    extension = vocab_extension.extend_vocabulary(lines, _counts(text))
    assert [t.token for t in extension.new_tokens] == [harmed]


def test_unknown_characters_and_single_pieces_are_not_added():
    extension = vocab_extension.extend_vocabulary(_letters_only(), _counts("bx bx bx a b ab"))
    assert [t.token for t in extension.new_tokens] == ["ab"]


def test_the_file_keeps_every_other_line_byte_for_byte(tmp_path, uncased_vocab):
    source = uncased_vocab.read_bytes()
    path = tmp_path / "released.txt"
    path.write_bytes(source.replace(b"\n", b"\r\n", 3))  # the lines keep their own endings
    lines = vocab_extension.read_vocab_lines(str(path))
    extension = vocab_extension.extend_vocabulary(lines, _counts("chloroplasts " * 3))
    output = tmp_path / "vocab.txt"
    json_path = vocab_extension.write_extension(extension, str(output), str(path), True)
    assert json_path == str(tmp_path / "vocab_extension.json")
    old, new = path.read_bytes().split(b"\n"), output.read_bytes().split(b"\n")
    assert len(new) == len(old) and new[-1] == b""
    changed = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
    assert changed == [1] and old[1] == b"[unused0]\r" and new[1] == b"chloroplasts\r"
    pieces = tokenization.FullTokenizer(str(path)).tokenize("chloroplasts")
    assert vocab_extension.read_extension(json_path, str(output)) == {
        1: tuple(tokenization.load_vocab(str(path))[p] for p in pieces)}


def test_real_words_by_hand_computed_savings(uncased_vocab):
    """The released uncased vocabulary and words none of which starts another."""
    words = {"chloroplasts": 3, "thylakoid": 5, "genghis": 4, "pharmacists": 2, "hemoglobin": 1,
             "the": 50, "protein": 7}
    text = " ".join(" ".join([word] * count) for word, count in words.items())
    lines = vocab_extension.read_vocab_lines(str(uncased_vocab))
    extension = vocab_extension.extend_vocabulary(lines, _counts(text))
    tokenizer = tokenization.FullTokenizer(str(uncased_vocab))
    saving = {word: (len(tokenizer.tokenize(word)) - 1) * count for word, count in words.items()}
    expected = sorted((w for w in words if saving[w] > 0), key=lambda w: (-saving[w], -words[w], w))
    assert len(expected) == 5  # "the" and "protein" are one piece each
    assert [(t.token, t.saving) for t in extension.new_tokens] == [(w, saving[w]) for w in expected]
    assert [t.id for t in extension.new_tokens] == [1, 2, 3, 4, 5]  # [unused0] is line 1
    unused = [i for i, line in enumerate(lines) if tokenization.is_unused_token(line)]
    assert len(unused) == 994 and len(extension.lines) == len(lines)
    assert all(old == new for i, (old, new) in enumerate(zip(lines, extension.lines))
               if i not in unused)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="vocab.txt has no \\[unusedN\\] slot"):
        vocab_extension.extend_vocabulary(SPECIALS + LETTERS, _counts("ab"), None, "vocab.txt")
    for bad in (-1, 7):
        with pytest.raises(ValueError, match=f"max_new_tokens={bad} must be in \\[0, 6\\]"):
            vocab_extension.extend_vocabulary(_letters_only(), _counts("ab"), bad)
    with pytest.raises(ValueError, match="holds no word"):
        vocab_extension.extend_vocabulary(_letters_only(), collections.Counter())
    cased = _lines(*"ABCDE", *LETTERS)
    with pytest.raises(ValueError, match="cased.vocab.txt is cased .* --do_lower_case=False"):
        vocab_extension.check_casing(cased, True, "cased/vocab.txt")
    vocab_extension.check_casing(cased, False, "cased/vocab.txt")
    vocab_extension.check_casing(_letters_only(), True, "uncased/vocab.txt")


def test_extension_files_that_do_not_fit_are_named(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "word", "a", "##b"]) + "\n")
    cases = {
        "not json": "is not a vocabulary extension",
        json.dumps({"tokens": []}): "is not a vocabulary extension",
        json.dumps({"new_tokens": [{"id": 1, "token": "word", "piece_ids": 2}]}):
            "is not a vocabulary extension",
        json.dumps({"new_tokens": [{"id": 9, "token": "word", "piece_ids": [3]}]}):
            "vocab.txt has no id 9 where .* puts 'word'",
        json.dumps({"new_tokens": [{"id": 2, "token": "word", "piece_ids": [3]}]}):
            "vocab.txt has 'a' at id 2 where .* puts 'word': pass the extended vocabulary",
    }
    for content, message in cases.items():
        (tmp_path / "extension.json").write_text(content)
        with pytest.raises(ValueError, match=message):
            vocab_extension.read_extension(str(tmp_path / "extension.json"), str(vocab))
    with pytest.raises(OSError):
        vocab_extension.read_extension(str(tmp_path / "none.json"), str(vocab))


def _squad_texts(path):
    for article in json.loads(path.read_text("utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            yield paragraph["context"]
            yield from (question["question"] for question in paragraph["qas"])


def _conll_sentences(path):
    sentence = []
    for line in path.read_text("utf-8").splitlines() + [""]:
        if line.strip():
            sentence.append(line.split()[0])
        elif sentence:
            yield " ".join(sentence)
            sentence = []


def _shared_corpora(data):
    """Every shared corpus, as the texts a model would be given."""
    glue = sorted(data.glob("glue/**/*.tsv")) + sorted(data.glob("glue/MRPC/*.txt"))
    return {
        "WikiText-2": [line for name in ("wikitext-2-raw/wiki.test.raw",
                                         "wikitext-2-tokenized/wiki.valid.tokens")
                       for line in (data / name).read_text("utf-8").splitlines()],
        "SQuAD": [text for name in ("dev-v1.1.json", "subsets/cs224n_dev-v2.0.json")
                  for text in _squad_texts(data / "squad" / name)],
        "CoNLL-2003": [text for path in sorted(data.glob("conll2003/*.txt"))
                       for text in _conll_sentences(path)],
        "GLUE": [line for path in glue for line in path.read_text("utf-8-sig").splitlines()],
        "SWAG and sample_text": (data / "swag" / "transformers_fixture_sample.jsonl").read_text(
            "utf-8").splitlines() + (data / "pretraining" / "sample_text.txt").read_text(
            "utf-8").splitlines(),
    }


@pytest.fixture(scope="module")
def squad_extension(shared_data_dir, uncased_vocab, tmp_path_factory):
    """Google's uncased vocabulary extended with the words of the SQuAD v1.1 dev contexts."""
    contexts = [p["context"] for a in json.loads(
        (shared_data_dir / "squad" / "dev-v1.1.json").read_text("utf-8"))["data"]
        for p in a["paragraphs"]]
    lines = vocab_extension.read_vocab_lines(str(uncased_vocab))
    extension = vocab_extension.extend_vocabulary(
        lines, wordpiece_vocab.count_words(contexts, do_lower_case=True))
    path = tmp_path_factory.mktemp("extended") / "vocab.txt"
    vocab_extension.write_extension(extension, str(path), str(uncased_vocab), True)
    return contexts, extension, tokenization.FullTokenizer(str(path))


def _changed_texts(texts, old, new, new_words):
    """Texts whose tokens changed; fails on one none of whose words starts with a new word."""
    changed = []
    for text in texts:
        if old.tokenize(text) != new.tokenize(text):
            words = old.basic_tokenizer.tokenize(text)
            assert any(word[:n] in new_words for word in words
                       for n in range(1, len(word) + 1)), text
            changed.append(text)
    return changed


def test_the_squad_contexts_keep_their_tokens_but_for_the_new_words(squad_extension,
                                                                    uncased_vocab):
    contexts, extension, new = squad_extension
    old = tokenization.FullTokenizer(str(uncased_vocab))
    new_words = {token.token for token in extension.new_tokens}
    assert len(new_words) == 994  # every slot filled
    changed = _changed_texts(contexts, old, new, new_words)
    holding = [text for text in contexts if new_words & set(old.basic_tokenizer.tokenize(text))]
    assert set(holding) <= set(changed)  # a new word is one token now
    assert len(holding) > len(contexts) / 2
    old_count = sum(len(old.tokenize(text)) for text in contexts)
    new_count = sum(len(new.tokenize(text)) for text in contexts)
    saved = sum(token.saving for token in extension.new_tokens)
    assert old_count - new_count == saved == extension.tokens_before - extension.tokens_after


@pytest.mark.slow
def test_texts_without_the_new_words_tokenize_as_before_on_every_shared_corpus(
        squad_extension, uncased_vocab, shared_data_dir):
    _, extension, new = squad_extension
    old = tokenization.FullTokenizer(str(uncased_vocab))
    new_words = {token.token for token in extension.new_tokens}
    for name, texts in _shared_corpora(shared_data_dir).items():
        assert len(texts) > 30, name
        changed = _changed_texts(texts, old, new, new_words)
        assert len(changed) < len(texts), name
