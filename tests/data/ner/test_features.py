"""Tests of data/ner/features.py on a tiny hand-made vocabulary and on real CoNLL-2003 data."""
import numpy as np
import pytest

from data import tokenization
from data.ner import conll, features as ner_features

# Ids: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 john=4 lives=5 in=6 new=7 york=8 .=9 he=10 work=11
# ##s=12 acme=13 corp=14
_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "john", "lives", "in", "new", "york", ".",
          "he", "work", "##s", "acme", "corp"]
# O=0 B-LOC=1 I-LOC=2 B-ORG=3 I-ORG=4 B-PER=5 I-PER=6
_LABELS = conll.label_list(["PER", "LOC", "ORG"])
_X = -1


@pytest.fixture
def tokenizer(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(_VOCAB) + "\n", encoding="utf-8")
    return tokenization.FullTokenizer(path, do_lower_case=True)


def _sentence(pairs, first_line=1):
    return conll.ConllSentence(
        tuple(conll.ConllToken(word, tag) for word, tag in pairs), first_line)


def _document():
    return conll.ConllDocument((
        # Pieces: john lives in new york .  (6)
        _sentence([("John", "B-PER"), ("lives", "O"), ("in", "O"), ("New", "B-LOC"),
                   ("York", "I-LOC"), (".", "O")]),
        # Pieces: he work ##s .  (4)
        _sentence([("He", "O"), ("works", "O"), (".", "O")], first_line=8),
        # Pieces: acme corp .  (3)
        _sentence([("Acme", "B-ORG"), ("Corp", "I-ORG"), (".", "O")], first_line=12),
    ))


def test_labels_order():
    assert _LABELS == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


def test_sentences_alone(tokenizer):
    features = ner_features.convert_documents_to_features([_document()], tokenizer, _LABELS, 10)
    np.testing.assert_array_equal(features.input_ids, [
        [2, 4, 5, 6, 7, 8, 9, 3, 0, 0],
        [2, 10, 11, 12, 9, 3, 0, 0, 0, 0],
        [2, 13, 14, 9, 3, 0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(features.input_mask, [
        [1] * 8 + [0] * 2, [1] * 6 + [0] * 4, [1] * 5 + [0] * 5])
    np.testing.assert_array_equal(features.segment_ids, np.zeros((3, 10)))
    # Only each word's first piece is labelled; "##s" of "works" is not.
    np.testing.assert_array_equal(features.label_ids, [
        [_X, 5, 0, 0, 1, 2, 0, _X, _X, _X],
        [_X, 0, 0, _X, 0, _X, _X, _X, _X, _X],
        [_X, 3, 4, 0, _X, _X, _X, _X, _X, _X]])
    assert [p.tolist() for p in features.word_positions] == [[1, 2, 3, 4, 5, 6], [1, 2, 4],
                                                             [1, 2, 3]]
    arrays = features.to_arrays()
    assert sorted(arrays) == ["input_ids", "input_mask", "label_ids", "segment_ids"]
    assert all(a.dtype == np.int32 and a.shape == (3, 10) for a in arrays.values())


def test_document_context_fills_the_window(tokenizer):
    features = ner_features.convert_documents_to_features(
        [_document()], tokenizer, _LABELS, 10, document_context=True)
    # 8 tokens of room. First sentence: nothing left, 2 of 7 right. Second: 2 left (of 6),
    # 2 right (of 3). Third: nothing right, so all 5 of the room go left.
    np.testing.assert_array_equal(features.input_ids, [
        [2, 4, 5, 6, 7, 8, 9, 10, 11, 3],
        [2, 8, 9, 10, 11, 12, 9, 13, 14, 3],
        [2, 9, 10, 11, 12, 9, 13, 14, 9, 3]])
    np.testing.assert_array_equal(features.input_mask, np.ones((3, 10)))
    # Context tokens are not labelled.
    np.testing.assert_array_equal(features.label_ids, [
        [_X, 5, 0, 0, 1, 2, 0, _X, _X, _X],
        [_X, _X, _X, 0, 0, _X, 0, _X, _X, _X],
        [_X, _X, _X, _X, _X, _X, 3, 4, 0, _X]])
    assert [p.tolist() for p in features.word_positions] == [[1, 2, 3, 4, 5, 6], [3, 4, 6],
                                                             [6, 7, 8]]


def test_context_stays_inside_its_document(tokenizer):
    document = _document()
    single = conll.ConllDocument(document.sentences[1:2])
    features = ner_features.convert_documents_to_features(
        [single, conll.ConllDocument(document.sentences[2:])], tokenizer, _LABELS, 12,
        document_context=True)
    np.testing.assert_array_equal(features.input_ids, [
        [2, 10, 11, 12, 9, 3] + [0] * 6,
        [2, 13, 14, 9, 3] + [0] * 7])


@pytest.mark.parametrize("left, length, right, room, expected", [
    (10, 4, 10, 8, (2, 2)),
    (10, 4, 10, 9, (2, 3)),  # The odd token goes right.
    (1, 4, 10, 8, (1, 3)),   # A short side leaves its share to the other.
    (10, 4, 1, 8, (3, 1)),
    (1, 2, 1, 8, (1, 1)),    # Less context than room: all of it.
    (0, 0, 0, 8, (0, 0)),
    (5, 9, 5, 8, (0, 0)),    # The sentence alone overflows.
])
def test_context_window(left, length, right, room, expected):
    assert ner_features.context_window(left, length, right, room) == expected


def test_long_sentence_is_cut_and_cut_words_predict_o(tokenizer):
    features = ner_features.convert_documents_to_features([_document()], tokenizer, _LABELS, 5,
                                                          document_context=True)
    np.testing.assert_array_equal(features.input_ids[0], [2, 4, 5, 6, 3])
    assert features.word_positions[0].tolist() == [1, 2, 3, _X, _X, _X]
    # "works" keeps its first piece "work"; "." falls outside.
    np.testing.assert_array_equal(features.input_ids[1], [2, 10, 11, 12, 3])
    assert features.word_positions[1].tolist() == [1, 2, _X]
    predicted = np.full((3, 5), 6)  # I-PER everywhere.
    tags = ner_features.predicted_word_tags(features, predicted, _LABELS)
    assert tags[0] == ["I-PER", "I-PER", "I-PER", "O", "O", "O"]
    assert tags[1] == ["I-PER", "I-PER", "O"]


def test_long_sentence_is_tagged_in_windows_of_most_context(tokenizer):
    features = ner_features.convert_documents_to_features([_document()], tokenizer, _LABELS, 6,
                                                          doc_stride=2)
    # 4 tokens of room: "john lives in new york ." is windows 0..3 and 2..5; pieces 0-2 have
    # their most context in the first (2: 1.04 against 0.04), 3-5 in the second. The other
    # sentences fit and are one sequence each, as without windows.
    np.testing.assert_array_equal(features.input_ids, [
        [2, 4, 5, 6, 7, 3], [2, 6, 7, 8, 9, 3], [2, 10, 11, 12, 9, 3], [2, 13, 14, 9, 3, 0]])
    assert [r.tolist() for r in features.word_rows] == [[0, 0, 0, 1, 1, 1], [2, 2, 2],
                                                        [3, 3, 3]]
    assert [p.tolist() for p in features.word_positions] == [[1, 2, 3, 2, 3, 4], [1, 2, 4],
                                                             [1, 2, 3]]
    # Each word is labelled once, in the window it is tagged from.
    np.testing.assert_array_equal(features.label_ids[:2], [[_X, 5, 0, 0, _X, _X],
                                                           [_X, _X, 1, 2, 0, _X]])
    predicted = np.full((4, 6), 6)                       # I-PER everywhere...
    predicted[1, 2] = 1                                  # ...but "new" in its window
    tags = ner_features.predicted_word_tags(features, predicted, _LABELS)
    assert tags[0] == ["I-PER", "I-PER", "I-PER", "B-LOC", "I-PER", "I-PER"]


def test_long_sentence_windows_run_inside_its_document(tokenizer):
    features = ner_features.convert_documents_to_features(
        [_document()], tokenizer, _LABELS, 6, document_context=True, doc_stride=2)
    # The first sentence's windows run over its 6 pieces and up to half a window (2 pieces) of
    # the document after it: windows 0..3, 2..5, 4..7; "." (piece 5) has its most context in
    # the last, beside "he work" of the next sentence.
    np.testing.assert_array_equal(features.input_ids[:3], [
        [2, 4, 5, 6, 7, 3], [2, 6, 7, 8, 9, 3], [2, 8, 9, 10, 11, 3]])
    assert features.word_rows[0].tolist() == [0, 0, 0, 1, 1, 2]
    assert features.word_positions[0].tolist() == [1, 2, 3, 2, 3, 2]
    np.testing.assert_array_equal(features.label_ids[2], [_X, _X, 0, _X, _X, _X])
    # The sentences that fit have the sequences they have without windows.
    alone = ner_features.convert_documents_to_features([_document()], tokenizer, _LABELS, 6,
                                                       document_context=True)
    np.testing.assert_array_equal(features.input_ids[3:], alone.input_ids[1:])
    np.testing.assert_array_equal(features.label_ids[3:], alone.label_ids[1:])
    assert [p.tolist() for p in features.word_positions[1:]] == \
        [p.tolist() for p in alone.word_positions[1:]]
    with pytest.raises(ValueError, match="doc_stride must be at least 1"):
        ner_features.convert_documents_to_features([_document()], tokenizer, _LABELS, 6,
                                                   doc_stride=0)


def test_predictions_map_back_to_first_pieces(tokenizer):
    features = ner_features.convert_documents_to_features([_document()], tokenizer, _LABELS, 10)
    predicted = np.zeros((3, 10), dtype=np.int64)
    predicted[0, [1, 4, 5]] = [5, 1, 2]
    predicted[1, 3] = 3  # On "##s": ignored.
    predicted[2, [1, 2]] = [3, 3]
    tags = ner_features.predicted_word_tags(features, predicted, _LABELS)
    assert tags == [["B-PER", "O", "O", "B-LOC", "I-LOC", "O"], ["O", "O", "O"],
                    ["B-ORG", "B-ORG", "O"]]
    with pytest.raises(ValueError, match="shape"):
        ner_features.predicted_word_tags(features, predicted[:, :9], _LABELS)


def test_word_without_pieces(tokenizer):
    # The tokenizer drops NUL characters, leaving the word no piece to label.
    document = conll.ConllDocument((_sentence([("John", "B-PER"), ("\x00", "O"),
                                               ("lives", "O")]),))
    features = ner_features.convert_documents_to_features([document], tokenizer, _LABELS, 6)
    np.testing.assert_array_equal(features.input_ids, [[2, 4, 5, 3, 0, 0]])
    np.testing.assert_array_equal(features.label_ids, [[_X, 5, 0, _X, _X, _X]])
    assert features.word_positions[0].tolist() == [1, _X, 2]


def test_unknown_gold_tag_and_bad_length(tokenizer):
    document = conll.ConllDocument((_sentence([("John", "B-PER"), ("x", "B-DATE")], 40),))
    with pytest.raises(ValueError, match="Line 41: tag 'B-DATE'"):
        ner_features.convert_documents_to_features([document], tokenizer, _LABELS, 8)
    with pytest.raises(ValueError, match="at least 3"):
        ner_features.convert_documents_to_features([_document()], tokenizer, _LABELS, 2)


def test_write_conll_predictions(tmp_path):
    sentences = _document().sentences[1:]
    path = tmp_path / "test_predictions.txt"
    ner_features.write_conll_predictions(
        path, sentences, [["O", "B-PER", "O"], ["B-ORG", "I-ORG", "I-ORG"]])
    assert path.read_text(encoding="utf-8") == (
        "He O O\nworks O B-PER\n. O O\n\nAcme B-ORG B-ORG\nCorp I-ORG I-ORG\n. O I-ORG\n\n")
    assert [p.name for p in tmp_path.iterdir()] == ["test_predictions.txt"]


def test_write_conll_predictions_checks_before_writing(tmp_path):
    path = tmp_path / "out.txt"
    with pytest.raises(ValueError, match="line 12: 3 words but 2 predicted"):
        ner_features.write_conll_predictions(path, _document().sentences[1:],
                                             [["O", "O", "O"], ["O", "O"]])
    with pytest.raises(ValueError, match="2 sentences but 1 predicted"):
        ner_features.write_conll_predictions(path, _document().sentences[1:], [["O"] * 3])
    assert list(tmp_path.iterdir()) == []


def test_real_documents_round_trip(shared_data_dir, uncased_vocab):
    data = conll.read_conll_file(shared_data_dir / "conll2003" / "valid.txt")
    documents = data.documents[:3]
    labels = conll.label_list(["LOC", "MISC", "ORG", "PER"])
    tokenizer = tokenization.FullTokenizer(uncased_vocab, do_lower_case=True)
    features = ner_features.convert_documents_to_features(documents, tokenizer, labels, 128,
                                                          document_context=True)
    sentences = [s for d in documents for s in d.sentences]
    assert features.input_ids.shape == (len(sentences), 128)
    # Every word of these short sentences is labelled once, at a position that holds its
    # first piece; the gold labels read back at the word positions give the gold tags.
    assert int((features.label_ids >= 0).sum()) == sum(len(s.tokens) for s in sentences)
    assert (features.input_ids[:, 0] == 101).all()  # [CLS]
    for row, sentence, positions in zip(features.input_ids, sentences, features.word_positions):
        first_pieces = [tokenizer.tokenize(word)[0] for word in sentence.words]
        assert tokenizer.convert_ids_to_tokens(row[positions]) == first_pieces
    gold_as_predictions = np.maximum(features.label_ids, 0)
    tags = ner_features.predicted_word_tags(features, gold_as_predictions, labels)
    assert tags == [s.tags for s in sentences]
    # Document context: the window is full wherever the document has enough tokens.
    assert features.input_mask.sum(axis=1).max() == 128


@pytest.mark.parametrize("document_context", [False, True])
def test_real_documents_in_windows_tag_every_word_once(shared_data_dir, uncased_vocab,
                                                       document_context):
    data = conll.read_conll_file(shared_data_dir / "conll2003" / "valid.txt")
    documents = data.documents[:3]
    labels = conll.label_list(["LOC", "MISC", "ORG", "PER"])
    tokenizer = tokenization.FullTokenizer(uncased_vocab, do_lower_case=True)
    features = ner_features.convert_documents_to_features(
        documents, tokenizer, labels, 12, document_context=document_context, doc_stride=3)
    sentences = [s for d in documents for s in d.sentences]
    assert len(features.input_ids) > len(sentences)          # some sentences need windows
    assert int((features.label_ids >= 0).sum()) == sum(len(s.tokens) for s in sentences)
    for sentence, rows, positions in zip(sentences, features.word_rows,
                                         features.word_positions):
        first_pieces = [tokenizer.tokenize(word)[0] for word in sentence.words]
        assert tokenizer.convert_ids_to_tokens(features.input_ids[rows, positions]) == \
            first_pieces
    tags = ner_features.predicted_word_tags(features, np.maximum(features.label_ids, 0),
                                            labels)
    assert tags == [s.tags for s in sentences]
