"""The generated SWAG and CoNLL files read with the real readers and say what they promise."""
import re

from data import tokenization
from data.swag import examples as swag
from data.ner import conll
from synthetic import swag_ner
from synthetic.corpus import ANIMALS, PLACES


def test_swag_files_parse_and_the_label_marks_the_coherent_ending(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text(swag_ner.swag_csv(50, seed=3), encoding="utf-8")
    examples = swag.read_swag_examples(path, require_labels=True)
    assert len(examples) == 50
    assert {example.label for example in examples} == {0, 1, 2, 3}
    ending = re.compile(r"^\w+ (back to|away from) the (\w+) where the (\w+) was\.$")
    for example in examples:
        context = re.match(r"^\w+ saw the (\w+) near the (\w+) one \w+\.$",
                           example.context_sentence)
        animal, place = context.groups()
        assert animal in ANIMALS and place in PLACES
        assert example.start_ending == f"The {animal}"
        parts = [ending.match(text).groups() for text in example.endings]
        right = [i for i, (cue, p, a) in enumerate(parts) if (a, p) == (animal, place)]
        assert right == [example.label]
        assert [cue == "back to" for cue, _, _ in parts] == [i == example.label for i in range(4)]
        assert len({(a, p) for _, p, a in parts}) == 4


def test_swag_test_file_has_no_label_column(tmp_path):
    path = tmp_path / "test.csv"
    path.write_text(swag_ner.swag_csv(3, labelled=False), encoding="utf-8")
    assert path.read_text().splitlines()[0] == (
        ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3")
    assert [example.label for example in swag.read_swag_examples(path)] == [None] * 3


def test_conll_files_parse_as_iob2_with_four_types(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(swag_ner.conll_text(20, seed=1), encoding="utf-8")
    data = conll.read_conll_file(path, tag_scheme="iob2")
    assert data.source_scheme == "iob2"
    assert len(data.documents) == 20
    assert all(2 <= len(document.sentences) <= 5 for document in data.documents)
    assert conll.entity_types(data) == {"PER", "LOC", "ORG", "MISC"}
    # The part-of-speech column says NNP exactly where a word is tagged as an entity.
    parts = [line.split() for line in path.read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("-DOCSTART-")]
    assert parts and all((fields[1] == "NNP") == (fields[3] != "O") for fields in parts)
    # Two-word entities exist, so I- tags are learnt too.
    assert any(tag.startswith("I-") for s in data.sentences for tag in s.tags)


def test_vocabulary_covers_every_generated_word(tmp_path):
    vocab = swag_ner.vocabulary()
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(vocab) == len(set(vocab))
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (tmp_path / "train.txt").write_text(swag_ner.conll_text(30, seed=2))
    (tmp_path / "train.csv").write_text(swag_ner.swag_csv(30, seed=2))
    words = [w for s in conll.read_conll_file(tmp_path / "train.txt").sentences for w in s.words]
    for example in swag.read_swag_examples(tmp_path / "train.csv"):
        words += [example.context_sentence, example.start_ending, *example.endings]
    for do_lower_case in (True, False):
        tokenizer = tokenization.FullTokenizer(tmp_path / "vocab.txt", do_lower_case)
        assert "[UNK]" not in tokenizer.tokenize(" ".join(words))


def test_task_folders_in_the_distribution_layouts(tmp_path):
    swag_dir = swag_ner.write_swag_files(tmp_path / "swag", 5, 4, 3, seed=1)
    counts = [len(swag.read_swag_examples(f"{swag_dir}/{name}.csv"))
              for name in ("train", "val", "test")]
    assert counts == [5, 4, 3]
    assert swag.read_swag_examples(f"{swag_dir}/test.csv")[0].label is None
    conll_dir = swag_ner.write_conll_files(tmp_path / "conll", 4, 3, 2, seed=1)
    counts = [len(conll.read_conll_file(f"{conll_dir}/{name}.txt").documents)
              for name in ("train", "valid", "test")]
    assert counts == [4, 3, 2]
