"""Tests of data/classifier/own_files.py: one's own CSV, TSV and JSON lines files, by column."""
import json

import pytest

from data.classifier import glue_tasks, own_files


def _files(paths, problem_type=own_files.SINGLE_LABEL, **columns):
    return own_files.OwnFiles(paths, own_files.Columns(**{"text": "text", **columns}),
                              problem_type)


def test_a_csv_with_a_header_reads_by_name_with_quotes_and_commas(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text('id,label,text,other\n7,pos,"fine, ""really"" fine",x\n8,neg,bad,y\n',
                    encoding="utf-8")
    examples = own_files.read_file(_files({"train": str(path)}, id="id"), "train", None)
    assert [(e.text_a, e.label) for e in examples] == [('fine, "really" fine', "pos"),
                                                       ("bad", "neg")]
    assert own_files.labels_of(examples, own_files.SINGLE_LABEL) == ("neg", "pos")
    # Ids are the test file's, for predictions.jsonl; a test file may lack the labels.
    test = tmp_path / "test.csv"
    test.write_text("id,text\n7,fine\n8,bad\n", encoding="utf-8")
    found = own_files.read_file(_files({"predict": str(test)}, id="id"), "predict",
                                ["neg", "pos"])
    assert [(e.text_a, e.label, e.index) for e in found] == [("fine", "neg", "7"),
                                                             ("bad", "neg", "8")]


def test_a_tsv_without_a_header_reads_by_index(tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_text("a text\tthe other\t1\nmore\tyet more\t0\n", encoding="utf-8")
    files = own_files.OwnFiles({"eval": str(path)}, own_files.Columns("0", "1", "2"))
    examples = own_files.read_file(files, "eval", ["0", "1"])
    assert [(e.text_a, e.text_b, e.label) for e in examples] == [
        ("a text", "the other", "1"), ("more", "yet more", "0")]


def test_json_lines_multi_label_as_lists_or_joined_and_none(tmp_path):
    path = tmp_path / "train.jsonl"
    rows = [{"text": "a", "tags": ["PER", "LOC"]}, {"text": "b", "tags": "ORG,PER"},
            {"text": "c", "tags": ""}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    files = _files({"train": str(path)}, own_files.MULTI_LABEL, label="tags")
    examples = own_files.read_file(files, "train", None)
    assert [e.label for e in examples] == [("LOC", "PER"), ("ORG", "PER"), ()]
    assert own_files.labels_of(examples, own_files.MULTI_LABEL) == ("LOC", "ORG", "PER")


def test_the_task_row_of_the_files(tmp_path):
    files = _files({"train": "t.csv", "eval": "d.csv"}, own_files.MULTI_LABEL)
    task = own_files.task_row(files, ("a", "b"))
    assert task.is_multi_label and task.num_labels == 2 and task.label_list == ["a", "b"]
    assert [(s.name, s.role) for s in task.splits] == [("train", "train"), ("dev", "eval")]
    assert task.metric == glue_tasks.EVERY_METRIC
    regression = own_files.task_row(_files({"train": "t.csv"}, own_files.REGRESSION), ())
    assert regression.is_regression and regression.num_labels == 1


@pytest.mark.parametrize("name, content, columns, problem_type, labels, message", [
    ("train.csv", "text,label\nfine,pos\n", {"text": "body"}, "single_label", None,
     "train.csv:2: no column 'body' (its columns: 'text', 'label')"),
    ("train.csv", "text,label\n  ,pos\n", {}, "single_label", None,
     "train.csv:2: empty text in column 'text'"),
    ("dev.csv", "text,label\nfine,pos\nbad,meh\n", {}, "single_label", ["neg", "pos"],
     "dev.csv:3: label 'meh' is not one of the labels ['neg', 'pos']"),
    ("train.csv", "text,label\nfine,high\n", {}, "regression", None,
     "train.csv:2: regression label 'high' is not a number"),
    ("train.jsonl", '{"text": "a", "label": "x"}\n{"text": "b", "label":\n', {}, "single_label",
     None, "train.jsonl:2: unreadable JSON line"),
    ("train.csv", 'text,label\n"open quote,pos\n', {}, "single_label", None,
     "train.csv:2: unreadable row (unexpected end of data)"),
    ("train.csv", "text,label\nfine,pos,extra\n", {}, "single_label", None,
     "train.csv:2: 3 fields where the header has 2 columns"),
    ("train.txt", "fine\tpos\n", {}, "single_label", None,
     "cannot tell the format from the extension '.txt'"),
])
def test_bad_input_names_the_file_the_line_and_the_value(tmp_path, name, content, columns,
                                                         problem_type, labels, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    role = {"train": "train", "dev": "eval"}[name.split(".")[0]]
    with pytest.raises(ValueError) as raised:
        own_files.read_file(_files({role: str(path)}, problem_type, **columns), role, labels)
    assert str(raised.value).startswith(f"{path}") or message.startswith("cannot")
    assert message in str(raised.value)


def test_columns_are_all_names_or_all_indexes():
    with pytest.raises(ValueError, match="not a mix"):
        own_files.Columns("0", label="label").check()
    own_files.Columns("0", "1", "2").check()
    assert own_files.Columns("0", label="3").by_index
