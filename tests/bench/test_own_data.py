"""Tests of the own-data benchmark's files, metrics and report (bench/fine_tuning/own_data*.py)."""
import os
import shutil

import pytest

from bench.fine_tuning import own_data_files as files
from bench.fine_tuning import own_data_report
from bench.fine_tuning.own_data_sections import labels_metrics
from bench.support import shared_data_dir
from data import tokenization
from data.ner import conll
from tests.support.dependencies import require

CONLL_LINES = ["-DOCSTART- -X- -X- O\n", "\n", "EU NNP B-NP B-ORG\n", "rejects VBZ B-VP O\n",
               "German JJ B-NP B-MISC\n", "\n", "\n", "Peter NNP B-NP B-PER\n",
               "Blackburn NNP I-NP I-PER\n", "-DOCSTART- -X- -X- O\n", "\n", "Hi UH O O\n"]


def test_conll_sentences_are_the_lines_columns_between_blank_and_docstart_lines():
    sentences = files.conll_sentences(CONLL_LINES)
    assert sentences == [
        [["EU", "NNP", "B-NP", "B-ORG"], ["rejects", "VBZ", "B-VP", "O"],
         ["German", "JJ", "B-NP", "B-MISC"]],
        [["Peter", "NNP", "B-NP", "B-PER"], ["Blackburn", "NNP", "I-NP", "I-PER"]],
        [["Hi", "UH", "O", "O"]]]


def test_entity_types_of_any_scheme_sorted_once_each():
    assert files.entity_types(["B-ORG", "O", "B-MISC", "I-MISC", "B-ORG"]) == ["MISC", "ORG"]
    assert files.entity_types(["S-PER", "B-LOC", "E-LOC"]) == ["LOC", "PER"]
    assert files.entity_types(["I-LOC", "I-LOC"]) == ["LOC"]  # IOB1
    assert files.entity_types(["O", "O"]) == []


def test_multi_label_rows_join_the_words_and_the_types_an_empty_label_without_entities():
    first, second, third = files.conll_sentences(CONLL_LINES)
    assert files.multi_label_row(first) == {"text": "EU rejects German", "labels": "MISC,ORG"}
    assert files.multi_label_row(second) == {"text": "Peter Blackburn", "labels": "PER"}
    assert files.multi_label_row(third) == {"text": "Hi", "labels": ""}
    assert files.jsonl_text([files.multi_label_row(third)]) == '{"text": "Hi", "labels": ""}\n'


def test_iob2_to_iobes():
    assert files.iob2_to_iobes(["B-PER", "I-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC",
                                "B-ORG"]) == \
        ["B-PER", "I-PER", "E-PER", "O", "S-LOC", "B-LOC", "E-LOC", "S-ORG"]
    assert files.iob2_to_iobes(["B-PER", "B-PER", "I-LOC"]) == ["S-PER", "S-PER", "S-LOC"]
    assert files.iob2_to_iobes(["B-PER", "I-PER", "B-PER"]) == ["B-PER", "E-PER", "S-PER"]
    assert files.iob2_to_iobes([]) == []


def test_iobes_reads_back_as_conll_2003s_own_tags():
    path = os.path.join(shared_data_dir(), "conll2003", "valid.txt")
    if not os.path.isfile(path):
        pytest.skip("no shared CoNLL-2003")
    with open(path, encoding="utf-8") as f:
        sentences = files.conll_sentences(f)
    tags = [[row[-1] for row in sentence] for sentence in sentences]
    assert all(conll.iobes_to_iob2(files.iob2_to_iobes(t)) == t for t in tags)
    assert len(sentences) == 3250


def test_two_column_files(tmp_path):
    sentences = files.conll_sentences(CONLL_LINES)[:2]
    assert files.conll_text(files.two_columns(sentences)) == \
        "EU B-ORG\nrejects O\nGerman B-MISC\n\nPeter B-PER\nBlackburn I-PER\n\n"
    assert files.conll_text(files.two_columns(sentences, iobes=True)) == \
        "EU S-ORG\nrejects O\nGerman S-MISC\n\nPeter B-PER\nBlackburn E-PER\n\n"
    path = tmp_path / "iobes.txt"
    path.write_text(files.conll_text(files.two_columns(sentences, iobes=True)))
    data = conll.read_conll_file(path)
    assert data.source_scheme == "iobes"
    assert [s.tags for s in data.sentences] == [["B-ORG", "O", "B-MISC"], ["B-PER", "I-PER"]]


def test_subsample_keeps_the_order_and_is_the_same_for_a_seed():
    items = list("abcdefghij")
    assert files.subsample(items, None) == items
    assert files.subsample(items, 20) == items
    drawn = files.subsample(items, 4)
    assert len(drawn) == 4 and drawn == sorted(drawn)
    assert drawn == files.subsample(items, 4) and set(drawn) <= set(items)
    assert files.subsample(items, 4, seed=1) != drawn or files.subsample(items, 4, seed=2) != drawn


def test_wikitext_documents():
    lines = [" \n", " = Homarus = \n", " \n",
             " Homarus is a <unk> lobster . It weighs 5 @,@ 000 g @-@ ish . \n", " \n",
             " = = Description = = \n", " The claws are big ! Yes . \n", " = Second = \n",
             " Text here . \n"]
    documents = files.wikitext_documents(lines)
    assert documents == [["Homarus is a lobster .", "It weighs 5,000 g-ish .",
                          "The claws are big !", "Yes ."], ["Text here ."]]
    assert files.documents_text(documents) == \
        "Homarus is a lobster .\nIt weighs 5,000 g-ish .\nThe claws are big !\nYes .\n\n" \
        "Text here .\n"


def test_pieces_per_word(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nun\n##aff\n##able\n.\n")
    tokenizer = tokenization.FullTokenizer(str(vocab), do_lower_case=True)
    # the (1), unaffable (3), . (1), The (1), zzz ([UNK], 1)
    assert files.pieces_per_word(tokenizer, ["the unaffable.", "The zzz"]) == (5, 7)


def test_changed_texts(tmp_path):
    released, extended = tmp_path / "released.txt", tmp_path / "extended.txt"
    released.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nun\n##aff\n##able\n[unused0]\n")
    extended.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nun\n##aff\n##able\nunaffable\n")
    before, after = (tokenization.FullTokenizer(str(v)) for v in (released, extended))
    assert files.changed_texts(before, after, ["the", "the unaffable", "un the", "zz"]) == (4, 1)


def test_labels_metrics_micro_and_macro_f1():
    results = labels_metrics([["PER"], ["LOC", "ORG"], []], [["PER"], ["LOC"], ["MISC"]])
    # tp 2 (PER, LOC), fp 1 (ORG), fn 1 (MISC): 2 * 2 / (2 * 2 + 1 + 1)
    assert results["eval_f1_micro"] == pytest.approx(2 / 3)
    # LOC 1, MISC 0, ORG 0, PER 1
    assert results["eval_f1_macro"] == pytest.approx(0.5)
    assert labels_metrics([[]], [[""]])["eval_f1_micro"] == 0.0


def _run(micro, seconds, **extra):
    return {"eval_f1_micro": micro, "eval_f1_macro": micro - 0.1, "seconds_per_epoch": seconds,
            **extra}


def test_report_has_a_table_per_section_run_and_the_ratios():
    settings = {"eval_every_steps": 20, "early_stopping_patience": 3}
    common = {"section_seconds": 10, "settings": settings, "command": "python -m x"}
    ours = [_run(0.9, 10, from_predictions=_run(0.9, 10)),
            _run(0.92, 12, from_predictions=_run(0.92, 12))]
    results = {"command": "python -m bench.fine_tuning.own_data", "machine": {
        "cpu": "CPU", "cores": 2, "isa": ["avx2"], "memory_gib": 8, "python": "3.11",
        "versions": {"tensorflow": "2"}, "load_average_start": [1.0, 1.0, 1.0]},
        "sections": {
            "multi_label": {**common, "train_examples": 10, "dev_examples": 5,
                            "train_without_entity": 2, "train_label_counts": {"PER": 3},
                            "runs": {"this_project": ours,
                                     "transformers": [_run(0.9, 20), _run(0.9, 24)]}},
            "multi_label_optimizer": {**common, "flags": ["--optimizer=x"], "runs": [
                _run(0.905, 11, from_predictions=_run(0.905, 11)),
                _run(0.91, 13, from_predictions=_run(0.91, 13))]},
            "tagging": {**common, "train_sentences": 10, "dev_sentences": 5, "seed": 1,
                        "runs": {"four_columns": {"eval_f1": 0.8},
                                 "two_columns_iob2": {"eval_f1": 0.8},
                                 "two_columns_iobes": {"eval_f1": 0.75}}},
            "early_stopping": {**common, "train_examples": 100, "full_steps": 30,
                               "stopped_at_step": 20, "best_step": 10, "best_eval_f1": 0.9,
                               "best_saved_eval_f1": 0.9,
                               "full": {"eval_f1": 0.88, "wall_seconds": 100},
                               "early": {"eval_f1": 0.87, "wall_seconds": 80}}}}
    text = own_data_report.markdown(results)
    assert "| this project (`run_classifier.py`) | 91.00 ± 1.41 (90.00, 92.00) |" in text
    assert "| this project against transformers | +1.00 | +1.00 | 2.00x the speed |" in text
    assert ("micro-F1 within 1 point of transformers': yes; an epoch at least as fast as "
            "transformers': yes") in text
    assert "gives, every seed: yes" in text
    assert ("| this project, transformers' optimizer | 90.75 ± 0.35 (90.50, 91.00) | "
            "80.75 ± 0.35 (80.50, 81.00) |") in text
    assert "micro-F1 +0.75 points; within 1 point: yes." in text
    assert "| saved | 10 steps | +2.00 | 20 s (0.80x the full run's time) |" in text
    assert "| two columns (word, tag), IOBES | 75.00 | -5.00 |" in text
    assert "four-column file's `eval_f1` to the printed digit: yes" in text
    assert "## Domain vocabulary" not in text


def test_the_transformers_run_reads_the_json_lines_targets_as_this_project(uncased_vocab,
                                                                           tmp_path):
    """One 0/1 target per entity type, in --label_list's order; an empty label is all zeros."""
    transformers = require("transformers")
    from bench.fine_tuning.transformers_run import _multi_label_encodings
    from data.classifier import own_files
    rows = [{"text": "EU rejects German", "labels": "MISC,ORG"}, {"text": "Hi", "labels": ""}]
    path = tmp_path / "train.jsonl"
    path.write_text(files.jsonl_text(rows))
    read = own_files.read_file(own_files.OwnFiles(
        {"train": str(path)}, own_files.Columns(text="text", label="labels"),
        problem_type="multi_label"), "train", None)
    assert [example.label for example in read] == [("MISC", "ORG"), ()]
    shutil.copyfile(uncased_vocab, tmp_path / "vocab.txt")
    tokenizer = transformers.BertTokenizerFast(str(tmp_path / "vocab.txt"), do_lower_case=True)
    encoded = _multi_label_encodings(tokenizer, read, list(files.ENTITY_TYPES), 16)
    assert encoded["labels"].tolist() == [[0.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    ours = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
    ids = ours.convert_tokens_to_ids(["[CLS]", *ours.tokenize(rows[0]["text"]), "[SEP]"])
    assert encoded["input_ids"][0].tolist() == ids + [0] * (16 - len(ids))
