"""Tests of data/classifier/glue_tasks.py: the task table and the reader of the distribution files."""
import json

import pytest

from data.classifier import glue_tasks
from data.classifier.glue_tasks import get_task, read_examples

_FIXTURE_SPLITS = {("CoLA", "train"): "train", ("CoLA", "dev"): "dev", ("CoLA", "test"): "test",
                   ("MNLI", "train"): "train", ("MNLI", "dev"): "dev_matched",
                   ("MNLI", "test"): "test_matched", ("XNLI", "train"): "train",
                   ("XNLI", "dev"): "dev"}
_NLI_HEADER = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
               "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
               "sentence2"]


def _write_tsv(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_examples_match_the_original_processors(fixtures_dir):
    with open(fixtures_dir / "glue" / "features.jsonl", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    for (task_name, fixture_split), split in _FIXTURE_SPLITS.items():
        expected = [(r["guid"], r["text_a"], r["text_b"], r["label"]) for r in records
                    if (r["task"], r["split"], r["max_seq_length"])
                    == (task_name, fixture_split, 128)]
        task = get_task(task_name)
        examples = read_examples(task, fixtures_dir / "glue" / "inputs" / task_name, split)
        assert [(e.guid, e.text_a, e.text_b, e.label) for e in examples] == expected, split


@pytest.mark.parametrize("task_name,folder,split,count,first_text,first_label", [
    ("cola", "CoLA", "dev", 1043, "The sailors rode the breeze clear of the rocks.", "1"),
    ("cola", "CoLA", "test", 1063, "Bill whistled past the house.", "0"),
    ("cola", "CoLA/resplit_from_train", "train", 7250,
     "Our friends won't buy this analysis, let alone the next one we propose.", "1"),
    ("sst2", "SST-2", "dev", 872, "it 's a charming and often affecting journey . ", "1"),
    ("sst2", "SST-2/resplit_from_train", "train", 60614, "when are bears bears and ", "1"),
    ("mrpc", "MRPC", "train", 3668, "Amrozi accused his brother, whom he called \"the "
     "witness\", of deliberately distorting his evidence.", "1"),
    ("mrpc", "MRPC", "dev", 408,
     "He said the foodservice pie business doesn't fit the company's long-term growth "
     "strategy.", "1"),
    ("mrpc", "MRPC", "test", 1725, "PCCW's chief operating officer, Mike Butcher, and Alex "
     "Arena, the chief financial officer, will report directly to Mr So.", "0"),
    ("stsb", "STS-B", "train", 5749, "A plane is taking off.", "5.000"),
    ("stsb", "STS-B", "dev", 1500, "A man with a hard hat is dancing.", "5.000"),
    ("stsb", "STS-B", "test", 1379, "A girl is styling her hair.", "0"),
    ("qnli", "QNLI", "dev", 5463,
     "What came into force after the new constitution was herald?", "entailment"),
    ("qnli", "QNLI", "test", 5463,
     "What organization is devoted to Jihad against Israel?", "entailment"),
    ("rte", "RTE", "dev", 277, "Dana Reeve, the widow of the actor Christopher Reeve, has "
     "died of lung cancer at age 44, according to the Christopher Reeve Foundation.",
     "not_entailment"),
    ("rte", "RTE/resplit_from_train", "train", 2127,
     "No Weapons of Mass Destruction Found in Iraq Yet.", "not_entailment"),
    ("rte", "RTE", "test", 3000, "Mangla was summoned after Madhumita's sister Nidhi Shukla, "
     "who was the first witness in the case.", "entailment"),
    ("wnli", "WNLI", "dev", 71, "The drain is clogged with hair. It has to be cleaned.", "0"),
    ("wnli", "WNLI/resplit_from_train", "train", 518, "John couldn't see the stage with "
     "Billy in front of him because he is so short.", "1"),
])
def test_real_glue_files(shared_data_dir, task_name, folder, split, count, first_text,
                         first_label):
    task = get_task(task_name)
    examples = read_examples(task, shared_data_dir / "glue" / folder, split)
    assert len(examples) == count
    assert (examples[0].text_a, examples[0].label) == (first_text, first_label)
    assert (examples[0].text_b is None) == (task_name in ("cola", "sst2"))
    labels = {e.label for e in examples}
    if task.is_regression:
        assert all(0.0 <= float(label) <= 5.0 for label in labels)
    elif task.split(split).role != "predict":
        assert labels == set(task.labels)
    if task.split(split).role == "predict":
        # GLUE test files number their rows 0..N-1 in the id column.
        assert [e.index for e in examples] == [str(i) for i in range(count)]


def test_mnli_mismatched_splits(tmp_path):
    dev_header = _NLI_HEADER + ["label1", "label2", "label3", "label4", "label5", "gold_label"]
    dev_row = ["7", "63735", "63735n", "fiction", "( x )", "( y )", "(ROOT x)", "(ROOT y)",
               "Premise one.", "Hypothesis one.", "neutral", "neutral", "entailment",
               "neutral", "neutral", "neutral"]
    _write_tsv(tmp_path / "dev_mismatched.tsv", [dev_header, dev_row])
    test_row = ["12", "1", "1n", "letters", "( x )", "( y )", "(ROOT x)", "(ROOT y)",
                "Premise two.", "Hypothesis two."]
    _write_tsv(tmp_path / "test_mismatched.tsv", [_NLI_HEADER, test_row])
    mnli = get_task("MNLI")
    (dev,) = read_examples(mnli, tmp_path, "dev_mismatched")
    assert (dev.guid, dev.text_a, dev.text_b, dev.label) == (
        "dev_mismatched-7", "Premise one.", "Hypothesis one.", "neutral")
    (test,) = read_examples(mnli, tmp_path, "test_mismatched")
    assert (test.guid, test.index, test.label) == ("test_mismatched-12", "12", "contradiction")
    assert [s.name for s in mnli.splits_for("eval")] == ["dev_matched", "dev_mismatched"]
    assert [s.results_suffix for s in mnli.splits_for("predict")] == ["", "_mismatched"]


def test_qqp_skips_malformed_rows_and_reads_test_ids(tmp_path, caplog):
    header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
    rows = [header, ["133273", "213221", "213222", "How old is the sun?", "Is the sun old?", "0"],
            # A question with a line break: one record split over two lines.
            ["9", "17", "18", "What is"], ["a tab?", "Tabs?", "1"],
            ["402555", "536040", "536041", "Why?", "Why not?", "1"]]
    _write_tsv(tmp_path / "train.tsv", rows)
    _write_tsv(tmp_path / "test.tsv", [["id", "question1", "question2"],
                                       ["0", "Question one?", "Question two?"]])
    qqp = get_task("qqp")
    examples = read_examples(qqp, tmp_path, "train")
    assert [(e.guid, e.label) for e in examples] == [("train-1", "0"), ("train-4", "1")]
    assert "skipped 2 malformed rows" in caplog.text
    (test,) = read_examples(qqp, tmp_path, "test")
    assert (test.index, test.text_a, test.text_b) == ("0", "Question one?", "Question two?")


def test_single_sentence_and_diagnostic_test_layouts(tmp_path):
    _write_tsv(tmp_path / "SST-2" / "test.tsv", [["index", "sentence"], ["0", "a gem ."]])
    (sst,) = read_examples(get_task("SST-2"), tmp_path / "SST-2", "test")
    assert (sst.guid, sst.index, sst.text_a, sst.text_b, sst.label) == (
        "test-1", "0", "a gem .", None, "0")
    _write_tsv(tmp_path / "diagnostic" / "diagnostic.tsv",
               [["index", "sentence1", "sentence2"], ["0", "The cat sat.", "The cat did not sit."]])
    ax = get_task("AX")
    (example,) = read_examples(ax, tmp_path / "diagnostic", "test")
    assert (example.index, example.text_b, example.label) == ("0", "The cat did not sit.",
                                                               "contradiction")
    assert not ax.splits_for("train") and not ax.splits_for("eval")


def test_qnli_and_wnli_train_layouts(tmp_path):
    _write_tsv(tmp_path / "QNLI" / "train.tsv", [["index", "question", "sentence", "label"],
                                                 ["0", "Who?", "Him.", "not_entailment"]])
    (qnli,) = read_examples(get_task("qnli"), tmp_path / "QNLI", "train")
    assert (qnli.text_a, qnli.text_b, qnli.label) == ("Who?", "Him.", "not_entailment")
    _write_tsv(tmp_path / "WNLI" / "test.tsv", [["index", "sentence1", "sentence2"],
                                                ["0", "It fell.", "The cup fell."]])
    (wnli,) = read_examples(get_task("wnli"), tmp_path / "WNLI", "test")
    assert (wnli.index, wnli.text_b, wnli.label) == ("0", "The cup fell.", "0")


def test_xnli_language_and_label_alias(fixtures_dir, tmp_path):
    folder = fixtures_dir / "glue" / "inputs" / "XNLI"
    xnli = get_task("xnli")
    (english,) = read_examples(xnli, folder, "dev", language="en")
    assert (english.guid, english.label) == ("dev-5", "neutral")
    train = read_examples(xnli, folder, "train")
    assert train[1].label == "contradiction"  # "contradictory" in the file
    with pytest.raises(FileNotFoundError, match="multinli.train.de.tsv"):
        read_examples(xnli, folder, "train", language="de")


def test_bad_rows_name_the_file_and_line(tmp_path):
    rte = get_task("rte")
    header = ["index", "sentence1", "sentence2", "label"]
    _write_tsv(tmp_path / "train.tsv", [header, ["0", "a", "b", "entailment"], ["1", "a", "b"]])
    with pytest.raises(ValueError, match=r"train\.tsv:3: expected 4 tab-separated columns"):
        read_examples(rte, tmp_path, "train")
    _write_tsv(tmp_path / "dev.tsv", [header, ["0", "a", "b", "entailment"],
                                      ["1", "a", "b", "contradiction"]])
    with pytest.raises(ValueError, match=r"dev\.tsv:3: label 'contradiction' is not one of"):
        read_examples(rte, tmp_path, "dev")
    _write_tsv(tmp_path / "STS-B" / "dev.tsv", [[str(i) for i in range(10)],
                                                ["x"] * 9 + ["high"]])
    with pytest.raises(ValueError, match=r"dev\.tsv:2: stsb score 'high' is not a number"):
        read_examples(get_task("stsb"), tmp_path / "STS-B", "dev")


def test_other_bad_input(tmp_path):
    (tmp_path / "dev.tsv").write_bytes(b"gj04\t1\t\tfine\ngj04\t0\t*\tbad \xff byte\n")
    with pytest.raises(ValueError, match=r"dev\.tsv:2: not valid UTF-8"):
        read_examples(get_task("cola"), tmp_path, "dev")
    (tmp_path / "train.tsv").write_bytes(b"gj04\t1\t\tfine\ngj04\t1\t\tcarriage\rreturn\n")
    with pytest.raises(ValueError, match=r"train\.tsv:2: unreadable row"):
        read_examples(get_task("cola"), tmp_path, "train")
    _write_tsv(tmp_path / "train.tsv", [["sentence", "label"], ["fine", "1"]])
    with pytest.raises(ValueError, match=r"train\.tsv:1: the header has 2 columns"):
        read_examples(get_task("mrpc"), tmp_path, "train")
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "test.tsv")):
        read_examples(get_task("mrpc"), tmp_path, "test")
    with pytest.raises(ValueError, match="has no split 'dev'; its splits: train, dev_matched"):
        read_examples(get_task("mnli"), tmp_path, "dev")


def test_task_names():
    assert get_task("MNLI") is get_task("mnli")
    assert get_task("STS-B").is_regression and get_task("stsb").num_labels == 1
    assert get_task("SST-2").name == "sst2"
    with pytest.raises(ValueError, match="valid tasks: cola, sst2, mrpc, stsb, qqp, mnli, "
                                         "qnli, rte, wnli, ax, xnli"):
        get_task("squad")


def test_table_is_consistent():
    submission_files = set()
    for task in glue_tasks.TASKS.values():
        assert len({s.name for s in task.splits}) == len(task.splits)
        for split in task.splits:
            assert (split.label_column is None) == (split.role == "predict")
            assert (split.submission_file is not None) == (split.role == "predict")
            assert split.has_header or split.num_columns
            if split.submission_file:
                submission_files.add(split.submission_file)
    assert submission_files == {"CoLA.tsv", "SST-2.tsv", "MRPC.tsv", "STS-B.tsv", "QQP.tsv",
                                "MNLI-m.tsv", "MNLI-mm.tsv", "QNLI.tsv", "RTE.tsv", "WNLI.tsv",
                                "AX.tsv"}


def test_windows_line_endings_and_a_byte_order_mark_read_as_plain_files(tmp_path):
    rows = ["index\tsentence1\tsentence2\tlabel", "0\tthe cat\ta cat\tentailment",
            "1\tthe dog\ta dog\tnot_entailment"]
    plain = tmp_path / "plain"
    windows = tmp_path / "windows"
    plain.mkdir()
    windows.mkdir()
    (plain / "train.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (windows / "train.tsv").write_bytes(("\ufeff" + "\r\n".join(rows) + "\r\n").encode("utf-8"))
    expected = read_examples(get_task("rte"), plain, "train")
    assert [(e.text_a, e.text_b, e.label) for e in expected] == [
        ("the cat", "a cat", "entailment"), ("the dog", "a dog", "not_entailment")]
    assert read_examples(get_task("rte"), windows, "train") == expected
