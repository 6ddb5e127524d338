"""Tests of data/swag/examples.py on CSVs in the SWAG distribution layout and a tiny hand-made vocabulary."""
import csv
import json
import re

import numpy as np
import pytest

from data import tokenization
from data.swag import examples as swag

_HEADER = (",video-id,fold-ind,startphrase,sent1,sent2,gold-source,"
           "ending0,ending1,ending2,ending3,label")
# Two rows as the distribution writes them: an unnamed index column, fields with commas
# quoted, a quoted field spanning two lines.
_VAL_CSV = _HEADER + """
0,lsmdc1052_Harry_Potter-94857,18313,"Students lower their eyes nervously. She",\
Students lower their eyes nervously.,She,gold,"pats her shoulder, then saunters toward someone.",\
turns with two students.,walks slowly towards someone.,"wait, then nods.",0
7,anetv_jkn6uvmqwh4,3,"A man, smiling, sits. He","A man, smiling,
sits.",He,gold,stands up.,runs away.,sits down.,stands.,3
"""

# Ids: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 a=4 man=5 sits=6 .=7 he=8 stands=9 up=10 runs=11
# away=12 down=13
_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "man", "sits", ".", "he", "stands", "up",
          "runs", "away", "down"]


def _write(tmp_path, text, name="val.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _example(label=3):
    return swag.SwagExample(example_id="7", context_sentence="A man sits.", start_ending="He",
                            endings=("stands up.", "runs away.", "sits down.", "stands."),
                            label=label)


@pytest.fixture
def tokenizer(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(_VOCAB) + "\n", encoding="utf-8")
    return tokenization.FullTokenizer(path, do_lower_case=True)


def test_reads_distribution_layout(tmp_path):
    examples = swag.read_swag_examples(_write(tmp_path, _VAL_CSV), require_labels=True)
    assert examples == [
        swag.SwagExample(
            example_id="0", context_sentence="Students lower their eyes nervously.",
            start_ending="She",
            endings=("pats her shoulder, then saunters toward someone.",
                     "turns with two students.", "walks slowly towards someone.",
                     "wait, then nods."),
            label=0),
        swag.SwagExample(example_id="7", context_sentence="A man, smiling,\nsits.",
                         start_ending="He",
                         endings=("stands up.", "runs away.", "sits down.", "stands."),
                         label=3)]


def test_test_file_has_no_labels(tmp_path):
    # Line 3 ends inside a quoted field; every other line ends with ",label".
    lines = [line if number == 3 else line.rsplit(",", 1)[0]
             for number, line in enumerate(_VAL_CSV.splitlines(), start=1)]
    path = _write(tmp_path, "\n".join(lines) + "\n", "test.csv")
    examples = swag.read_swag_examples(path)
    assert [e.label for e in examples] == [None, None]
    assert examples[1].endings == ("stands up.", "runs away.", "sits down.", "stands.")
    with pytest.raises(ValueError, match=re.escape(f"{path}:1: no 'label' column")):
        swag.read_swag_examples(path, require_labels=True)


def test_without_index_column_ids_are_row_numbers(tmp_path):
    text = ("video-id,fold-ind,startphrase,sent1,sent2,gold-source,"
            "ending0,ending1,ending2,ending3,label\n"
            "v1,1,x,s1,s2,gold,e0,e1,e2,e3,2\n\nv2,2,x,t1,t2,gold,f0,f1,f2,f3,1\n")
    examples = swag.read_swag_examples(_write(tmp_path, text))
    assert [(e.example_id, e.context_sentence, e.label) for e in examples] == [
        ("0", "s1", 2), ("1", "t1", 1)]


@pytest.mark.parametrize("row, line, message", [
    ("9,v,1,x,s1,s2,gold,e0,e1,e2,1", 5, "expected 12 fields"),    # Three endings.
    ("9,v,1,x,s1,s2,gold,e0,e1,e2,e3,4", 5, "label '4' is not an ending index 0..3"),
    ("9,v,1,x,s1,s2,gold,e0,e1,e2,e3,-1", 5, "label '-1'"),
    ("9,v,1,x,s1,s2,gold,e0,e1,e2,e3,", 5, "label ''"),
    ("9,v,1,x,s1,s2,gold,e0,e1,e2,e3,one", 5, "label 'one'"),
])
def test_bad_rows_name_file_and_line(tmp_path, row, line, message):
    # The second example spans lines 3-4, so the bad row starts on line 5.
    path = _write(tmp_path, _VAL_CSV + row + "\n")
    with pytest.raises(ValueError, match=re.escape(f"{path}:{line}: ") + ".*" + re.escape(message)):
        swag.read_swag_examples(path)


def test_header_without_endings(tmp_path):
    path = _write(tmp_path,
                  ",video-id,sent1,sent2,ending0,ending1,ending2,label\n0,v,a,b,c,d,e,0\n")
    with pytest.raises(ValueError, match=re.escape(f"{path}:1: header lacks") + ".*ending3"):
        swag.read_swag_examples(path)
    with pytest.raises(ValueError, match="empty file"):
        swag.read_swag_examples(_write(tmp_path, "", "empty.csv"))


def test_real_sample_in_distribution_layout(tmp_path, shared_data_dir):
    with open(shared_data_dir / "swag" / "transformers_fixture_sample.jsonl",
              encoding="utf-8") as reader:
        records = [json.loads(line) for line in reader]
    path = tmp_path / "val.csv"
    with open(path, "w", encoding="utf-8", newline="") as output:
        writer = csv.writer(output)
        writer.writerow(_HEADER.split(","))
        for index, r in enumerate(records):
            writer.writerow([index, "video", index, f"{r['sent1']} {r['sent2']}", r["sent1"],
                             r["sent2"], "gold", r["ending0"], r["ending1"], r["ending2"],
                             r["ending3"], r["label"]])
    examples = swag.read_swag_examples(path, require_labels=True)
    assert len(examples) == 10
    assert [e.label for e in examples] == [0, 3, 1, 3, 0, 3, 0, 1, 3, 3]
    assert examples[1].endings[3] == "continue to play marching, interspersed."
    assert examples[0].start_ending == "A drum line"
    assert [e.example_id for e in examples] == [str(i) for i in range(10)]


def test_four_sequences_per_example(tokenizer):
    unlabelled = swag.SwagExample("8", "A man sits.", "He", ("up", "down", "away", "."), None)
    arrays = swag.convert_examples_to_arrays([_example(), unlabelled], tokenizer, 12)
    assert arrays["input_ids"].shape == (2, 4, 12)
    assert all(a.dtype == np.int32 for a in arrays.values())
    np.testing.assert_array_equal(arrays["input_ids"][0], [
        [2, 4, 5, 6, 7, 3, 8, 9, 10, 7, 3, 0],   # [CLS] a man sits . [SEP] he stands up . [SEP]
        [2, 4, 5, 6, 7, 3, 8, 11, 12, 7, 3, 0],
        [2, 4, 5, 6, 7, 3, 8, 6, 13, 7, 3, 0],
        [2, 4, 5, 6, 7, 3, 8, 9, 7, 3, 0, 0]])
    np.testing.assert_array_equal(arrays["segment_ids"][0, 0], [0] * 6 + [1] * 5 + [0])
    np.testing.assert_array_equal(arrays["segment_ids"][0, 3], [0] * 6 + [1] * 4 + [0] * 2)
    np.testing.assert_array_equal(arrays["input_mask"][0, 3], [1] * 10 + [0] * 2)
    np.testing.assert_array_equal(arrays["input_ids"][1, 0], [2, 4, 5, 6, 7, 3, 8, 10, 3, 0, 0, 0])
    np.testing.assert_array_equal(arrays["label_ids"], [3, 0])


def test_truncation_is_longest_first_ending_on_ties(tokenizer):
    # Room 5: context "a man sits ." (4) and "he stands up ." (4) -> pop ending (tie), then
    # context (4 > 3), then ending (tie): "a man sits" + "he stands".
    arrays = swag.convert_examples_to_arrays([_example()], tokenizer, 8)
    np.testing.assert_array_equal(arrays["input_ids"][0], [
        [2, 4, 5, 6, 3, 8, 9, 3],
        [2, 4, 5, 6, 3, 8, 11, 3],
        [2, 4, 5, 6, 3, 8, 6, 3],
        [2, 4, 5, 6, 3, 8, 9, 3]])
    np.testing.assert_array_equal(arrays["segment_ids"][0], [[0] * 5 + [1] * 3] * 4)
    np.testing.assert_array_equal(arrays["input_mask"][0], np.ones((4, 8)))


def test_an_empty_ending_keeps_its_sep(tokenizer):
    # Start and ending both empty: [CLS] a man sits . [SEP] [SEP], the [SEP] of segment 1 kept.
    example = swag.SwagExample("9", "A man sits.", "", ("", "", "", ""), 0)
    arrays = swag.convert_examples_to_arrays([example], tokenizer, 9)
    np.testing.assert_array_equal(arrays["input_ids"][0, 0], [2, 4, 5, 6, 7, 3, 3, 0, 0])
    np.testing.assert_array_equal(arrays["segment_ids"][0, 0], [0] * 6 + [1] + [0] * 2)


def test_accuracy():
    examples = [_example(3), _example(0), _example(1)]
    probabilities = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1], [0.4, 0.3, 0.2, 0.1]])
    assert swag.accuracy(examples, probabilities) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="labelled"):
        swag.accuracy([_example(None)], probabilities[:1])
    with pytest.raises(ValueError, match="shape"):
        swag.accuracy(examples, probabilities[:2])


def test_write_predictions(tmp_path):
    examples = [_example(), swag.SwagExample("12", "c", "s", ("a", "b", "c", "d"), None)]
    probabilities = np.array([[0.125, 0.25, 0.5, 0.125], [0.75, 0.0625, 0.0625, 0.125]],
                             dtype=np.float32)
    path = tmp_path / "test_results.csv"
    swag.write_predictions(path, examples, probabilities)
    assert path.read_text(encoding="utf-8") == (
        "id,prob0,prob1,prob2,prob3,prediction\n"
        "7,0.125,0.25,0.5,0.125,2\n"
        "12,0.75,0.0625,0.0625,0.125,0\n")
    assert [p.name for p in tmp_path.iterdir()] == ["test_results.csv"]
    with pytest.raises(ValueError, match="shape"):
        swag.write_predictions(tmp_path / "other.csv", examples, probabilities[:, :3])
    assert [p.name for p in tmp_path.iterdir()] == ["test_results.csv"]
