"""Bad input to every script, as people have it: one table of cases, each run as a user runs it.

Each case writes its files, runs the real script's `main` with its flags and checks that it exits
with status 1 and one line, `error: ...`, that names the cause (file and line, flag or variable)
and no traceback, and that the user's earlier file in the output folder is unchanged and nothing
else was written there. Each script runs all its cases in one process
(`tests/support/script_runner.py`, the script's flag parsing and error reporting as from the
shell); some cases also run as separate processes, as a user runs them, with the same result.
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.pretraining_runs import write_config
from tests.support.script_errors import assert_user_error
from tests.support.script_runner import run_cells
from tests.support.tiny_task_model import write_tiny_model

_EARLIER = "earlier_results.txt"
_RTE_HEADER = "index\tsentence1\tsentence2\tlabel\n"
_RTE_ROW = "0\tthe cat sat\ta cat sat\tentailment\n"
_SWAG_HEADER = "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2," \
               "ending3,label\n"
_SWAG_ROW = "v,1,a b,a,b,gold,c,d,e,f,0\n"
_SQUAD = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{
    "context": "The cat sat on the mat.",
    "qas": [{"id": "q1", "question": "Where?", "answers": [{"text": "mat",
                                                               "answer_start": 19}]}]}]}]}


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> dict[str, pathlib.Path]:
    return write_tiny_model(tmp_path_factory.mktemp("tiny_model"))


def _write(folder: pathlib.Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def _damaged_checkpoint(model, folder: pathlib.Path) -> str:
    """A copy of the tiny model's checkpoint whose .data file was cut short."""
    folder.mkdir()
    prefix = pathlib.Path(model["init_checkpoint"])
    for path in prefix.parent.glob(prefix.name + ".*"):
        data = path.read_bytes()
        (folder / path.name).write_bytes(data[:len(data) // 2] if ".data-" in path.name
                                         else data)
    return str(folder / prefix.name)


def _records(fixtures_dir) -> str:
    return str(fixtures_dir / "pretraining_data" / "original_wwm_false.tfrecord")


# (case id, script, files under data/, flags (with {data}, {out}, {model keys}), cause shown).
_CLASSIFIER = ["--task_name=rte", "--data_dir={data}", "--do_train"]
_NER = ["--data_dir={data}", "--do_train"]
_SWAG = ["--data_dir={data}", "--do_train"]
_SQUAD_FLAGS = ["--do_train", "--train_file={data}/train.json"]
_PRETRAIN = ["--do_train", "--num_train_steps=2", "--train_batch_size=2",
             "--max_predictions_per_seq=20"]
_OWN = ["--do_train", "--do_eval", "--train_file={data}/train.csv", "--dev_file={data}/dev.csv"]
_OWN_TRAIN = "text,label\nthe cat sat,yes\na dog ran,no\n"
_CASES = [
    ("own_missing_column", "run_classifier.py", {"train.csv": _OWN_TRAIN, "dev.csv":
     "sentence,label\nthe cat,yes\n"}, _OWN,
     "{data}/dev.csv:2: no column 'text' (its columns: 'sentence', 'label')"),
    ("own_empty_text", "run_classifier.py", {"train.csv": _OWN_TRAIN, "dev.csv":
     "text,label\nthe cat,yes\n ,no\n"}, _OWN, "{data}/dev.csv:3: empty text in column 'text'"),
    ("own_label_never_trained_on", "run_classifier.py", {"train.csv": _OWN_TRAIN, "dev.csv":
     "text,label\nthe cat,maybe\n"}, _OWN,
     "{data}/dev.csv:2: label 'maybe' is not one of the labels ['no', 'yes']"),
    ("own_label_outside_label_list", "run_classifier.py", {"train.csv": _OWN_TRAIN, "dev.csv":
     "text,label\nthe cat,yes\n"}, _OWN + ["--label_list=yes,maybe"],
     "{data}/train.csv:3: label 'no' is not one of the labels ['maybe', 'yes']"),
    ("own_unreadable_row", "run_classifier.py", {"train.csv": _OWN_TRAIN + '"open,yes\n',
     "dev.csv": "text,label\nthe cat,yes\n"}, _OWN,
     "{data}/train.csv:4: unreadable row (unexpected end of data)"),
    ("own_regression_label_not_a_number", "run_classifier.py", {"train.csv": "text,label\n"
     "the cat,0.5\na dog,high\n", "dev.csv": "text,label\nthe cat,1.0\n"},
     _OWN + ["--problem_type=regression"],
     "{data}/train.csv:3: regression label 'high' is not a number"),
    ("own_and_task_name", "run_classifier.py", {"train.csv": _OWN_TRAIN, "dev.csv": _OWN_TRAIN},
     _OWN + ["--task_name=rte", "--data_dir={data}"], "give either --task_name"),
    ("glue_missing_column", "run_classifier.py", {"train.tsv": _RTE_HEADER + "0\tonly one\n"},
     _CLASSIFIER, "train.tsv:2: expected 4 tab-separated columns"),
    ("glue_unknown_label", "run_classifier.py",
     {"train.tsv": _RTE_HEADER + _RTE_ROW + "1\ta\tb\tmaybe\n"}, _CLASSIFIER,
     "train.tsv:3: label 'maybe' is not one of the rte labels"),
    ("glue_empty_file", "run_classifier.py", {"train.tsv": ""}, _CLASSIFIER,
     "train.tsv: no rte examples in the train file"),
    ("glue_header_only", "run_classifier.py", {"train.tsv": _RTE_HEADER}, _CLASSIFIER,
     "train.tsv: no rte examples in the train file"),
    ("glue_invalid_utf8", "run_classifier.py",
     {"train.tsv": _RTE_HEADER.encode() + b"0\ta\xff\tb\tentailment\n"}, _CLASSIFIER,
     "train.tsv:2: not valid UTF-8"),
    ("glue_missing_file", "run_classifier.py", {}, _CLASSIFIER,
     "train.tsv does not exist"),
    ("glue_unknown_task", "run_classifier.py", {"train.tsv": _RTE_HEADER + _RTE_ROW},
     ["--task_name=glue", "--data_dir={data}", "--do_train"], "Unknown task 'glue'"),
    ("stsb_score_not_a_number", "run_classifier.py", {"train.tsv": (
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
        "0\tg\tf\t2012\t1\ts\ts\ta\tb\thigh\n")},
     ["--task_name=stsb", "--data_dir={data}", "--do_train"], "stsb score 'high' is not a number"),
    ("glue_max_seq_length_too_long", "run_classifier.py", {"train.tsv": _RTE_HEADER + _RTE_ROW},
     _CLASSIFIER + ["--max_seq_length=1000"], "--max_seq_length=1000 must be between 3"),
    ("glue_no_action", "run_classifier.py", {"train.tsv": _RTE_HEADER + _RTE_ROW},
     ["--task_name=rte", "--data_dir={data}"], "At least one of --do_train, --do_eval"),
    ("glue_checkpoint_not_found", "run_classifier.py", {"train.tsv": _RTE_HEADER + _RTE_ROW},
     _CLASSIFIER + ["--init_checkpoint={data}/nothing.ckpt"], "nothing.ckpt.index does not exist"),
    ("glue_truncated_checkpoint", "run_classifier.py", {"train.tsv": _RTE_HEADER + _RTE_ROW},
     _CLASSIFIER + ["--init_checkpoint={damaged}"], "checkpoint {damaged} cannot be read"),
    ("glue_bad_batch_size", "run_classifier.py", {"train.tsv": _RTE_HEADER + _RTE_ROW},
     _CLASSIFIER + ["--eval_batch_size=0"], "--eval_batch_size=0 must be positive"),
    ("glue_adam_epsilon_zero", "run_classifier.py", {"train.tsv": _RTE_HEADER + _RTE_ROW},
     _CLASSIFIER + ["--adam_epsilon=0"], "--adam_epsilon=0.0 must be positive"),
    ("ner_empty_file", "run_ner.py", {"train.txt": ""}, _NER,
     "train.txt: no sentences in the train file"),
    ("ner_docstart_only", "run_ner.py", {"train.txt": "-DOCSTART- -X- -X- O\n\n"}, _NER,
     "train.txt: no sentences in the train file"),
    ("ner_missing_file", "run_ner.py", {}, _NER, "no train file in --data_dir"),
    ("ner_dev_tag_unknown", "run_ner.py",
     {"train.txt": "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n",
      "valid.txt": "Peter NNP B-NP B-PER\n\n"}, _NER + ["--do_eval"],
     "{data}/valid.txt: Line 1: tag 'B-PER' is not one of the labels"),
    ("ner_feature_based_without_checkpoint", "run_ner.py", {"train.txt": "EU NNP B-NP B-ORG\n\n"},
     _NER + ["--feature_based", "--init_checkpoint="],
     "--feature_based needs --init_checkpoint"),
    ("ner_bad_layers", "run_ner.py", {"train.txt": "EU NNP B-NP B-ORG\n\n"},
     _NER + ["--feature_based", "--feature_layers=-7"],
     "--feature_layers=-7: --layers: -7 is outside the model's 2 layers"),
    ("ner_zero_stride", "run_ner.py", {"train.txt": "EU NNP B-NP B-ORG\n\n"},
     _NER + ["--doc_stride=0"], "--doc_stride=0 must be at least 1"),
    ("squad_missing_train_file", "run_squad.py", {}, _SQUAD_FLAGS,
     "{data}/train.json: cannot read the SQuAD file"),
    ("squad_not_json", "run_squad.py", {"train.json": "{not json"}, _SQUAD_FLAGS,
     "{data}/train.json: the SQuAD file is not valid JSON"),
    ("squad_no_questions", "run_squad.py",
     {"train.json": json.dumps({"version": "1.1", "data": []})}, _SQUAD_FLAGS,
     "train.json: no training questions"),
    ("squad_query_longer_than_sequence", "run_squad.py", {"train.json": json.dumps(_SQUAD)},
     _SQUAD_FLAGS + ["--max_seq_length=32", "--max_query_length=40"],
     "--max_seq_length=32 leaves no room for the context: it must exceed --max_query_length=40"),
    ("swag_empty_file", "run_swag.py", {"train.csv": ""}, _SWAG,
     "train.csv: empty file, expected a SWAG header row"),
    ("swag_label_not_an_index", "run_swag.py",
     {"train.csv": _SWAG_HEADER + _SWAG_ROW.replace(",0\n", ",7\n")}, _SWAG,
     "train.csv:2: label '7' is not an ending index"),
    ("swag_missing_columns", "run_swag.py", {"train.csv": "sent1,sent2\na,b\n"}, _SWAG,
     "train.csv:1: header lacks the SWAG columns"),
    ("pretraining_no_input_file", "run_pretraining.py", {},
     _PRETRAIN + ["--input_file={data}/*.tfrecord"], "matches no file"),
    ("pretraining_not_a_tfrecord", "run_pretraining.py", {"x.tfrecord": "plain text\n" * 20},
     _PRETRAIN + ["--input_file={data}/x.tfrecord"], "x.tfrecord: not a readable TFRecord file"),
    ("pretraining_wrong_lengths", "run_pretraining.py", {},
     _PRETRAIN + ["--input_file={records}", "--max_seq_length=64"],
     "the records were written with --max_seq_length=128, this run has --max_seq_length=64: "
     "pass the lengths create_pretraining_data.py wrote them with"),
    ("pretraining_eval_zero_steps", "run_pretraining.py", {},
     ["--do_eval", "--input_file={records}", "--max_eval_steps=0"],
     "--max_eval_steps=0 must be >= 1"),
    ("create_data_missing_input", "create_pretraining_data.py", {},
     ["--input_file={data}/corpus*.txt", "--output_file={out}/x.tfrecord"],
     "input pattern '{data}/corpus*.txt' matches no file"),
    ("create_data_vocab_without_mask", "create_pretraining_data.py",
     {"corpus.txt": "One sentence.\nTwo sentences.\n", "vocab.txt": "[PAD]\n[UNK]\n[CLS]\n[SEP]\n"},
     ["--input_file={data}/corpus.txt", "--output_file={out}/x.tfrecord",
      "--vocab_file={data}/vocab.txt"], "{data}/vocab.txt: the vocabulary lacks [MASK]"),
    ("extract_features_vocab_beyond_the_embeddings", "extract_features.py",
     {"input.txt": "a b\n"},
     ["--input_file={data}/input.txt", "--output_file={out}/features.jsonl",
      "--layers=-1", "--vocab_file={longer_vocab}"], "more than the model's vocab_size"),
    ("glue_vocab_beyond_the_embeddings", "run_classifier.py",
     {"train.tsv": _RTE_HEADER + _RTE_ROW}, _CLASSIFIER + ["--vocab_file={longer_vocab}"],
     "tokens, more than the model's vocab_size"),
    ("glue_config_vocab_size_zero", "run_classifier.py",
     {"train.tsv": _RTE_HEADER + _RTE_ROW, "bert_config.json": json.dumps({
         "vocab_size": 0, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
         "intermediate_size": 16})},
     _CLASSIFIER + ["--bert_config_file={data}/bert_config.json", "--init_checkpoint="],
     "bert_config.json: vocab_size (0) must be at least 1"),
    ("swag_config_dropout_of_one", "run_swag.py",
     {"train.csv": _SWAG_HEADER + _SWAG_ROW, "bert_config.json": json.dumps({
         "vocab_size": 30, "hidden_dropout_prob": 1.0})},
     _SWAG + ["--bert_config_file={data}/bert_config.json", "--init_checkpoint="],
     "hidden_dropout_prob (1.0) must be in [0, 1)"),
    ("squad_question_id_twice", "run_squad.py", {"train.json": json.dumps(
        {**_SQUAD, "data": _SQUAD["data"] * 2})}, _SQUAD_FLAGS,
     "train.json: question id 'q1' is given twice (articles 0 and 1)"),
    ("squad_paragraph_without_context", "run_squad.py", {"train.json": json.dumps(
        {"version": "1.1", "data": [{"paragraphs": [{"qas": []}]}]})}, _SQUAD_FLAGS,
     'train.json: a paragraph of article 0: missing key "context"'),
    ("extract_features_bad_layers", "extract_features.py", {"input.txt": "a b\n"},
     ["--input_file={data}/input.txt", "--output_file={out}/features.jsonl", "--layers=-5"],
     "--layers: -5 is outside the model's 2 layers"),
    ("extract_features_missing_vocab", "extract_features.py", {"input.txt": "a b\n"},
     ["--input_file={data}/input.txt", "--output_file={out}/features.jsonl",
      "--vocab_file={data}/vocab.txt", "--layers=-1"],
     "cannot read vocab file {data}/vocab.txt: [Errno 2] No such file or directory"),
    ("glue_eval_with_a_pretrained_checkpoint", "run_classifier.py",
     {"dev.tsv": _RTE_HEADER + _RTE_ROW}, ["--task_name=rte", "--data_dir={data}", "--do_eval"],
     "--init_checkpoint must hold a fine-tuned model"),
    ("glue_config_not_json", "run_classifier.py",
     {"train.tsv": _RTE_HEADER + _RTE_ROW, "bert_config.json": "{hidden_size: 8"},
     _CLASSIFIER + ["--bert_config_file={data}/bert_config.json"],
     "cannot read BERT config {data}/bert_config.json"),
    ("ner_config_heads_do_not_divide", "run_ner.py",
     {"train.txt": "EU NNP B-NP B-ORG\n\n", "bert_config.json": json.dumps({
         "vocab_size": 30, "hidden_size": 8, "num_attention_heads": 3})},
     _NER + ["--bert_config_file={data}/bert_config.json", "--init_checkpoint="],
     "hidden_size (8) is not a multiple of num_attention_heads (3)"),
    ("squad_question_without_id", "run_squad.py", {"train.json": json.dumps(
        {"version": "1.1", "data": [{"paragraphs": [{"context": "a b", "qas": [
            {"question": "a?", "answers": [{"text": "a", "answer_start": 0}]}]}]}]})},
     _SQUAD_FLAGS, 'train.json: a question: missing key "id"'),
    ("swag_ending_missing", "run_swag.py", {"train.csv": _SWAG_HEADER + "v,1,a b,a,b,gold,c,d\n"},
     _SWAG, "train.csv:2: expected 11 fields"),
    ("convert_into_a_folder_with_files", "convert_checkpoint.py", {},
     ["--output={out}"], "exists and is not an empty folder"),
    ("convert_unknown_input", "convert_checkpoint.py", {"nothing.txt": "x\n"},
     ["--input={data}/nothing.txt", "--output={out}/converted"],
     "nothing.txt.index does not exist"),
    ("export_into_a_folder_with_files", "export_savedmodel.py", {}, ["--output={out}"],
     "exists and is not an empty folder"),
    ("predict_text_missing_input", "predict_text.py", {},
     ["--input_file={data}/lines.txt"], "No such file or directory: '{data}/lines.txt'"),
    ("predict_text_zero_batch", "predict_text.py", {"lines.txt": "a b\n"},
     ["--batch_size=0"], "--batch_size=0 must be positive"),
    ("predict_text_zero_stride", "predict_text.py", {"lines.txt": "a b\n"},
     ["--task=ner", "--doc_stride=0"], "--doc_stride=0 must be at least 1"),
    ("pretraining_config_from_nowhere", "run_pretraining.py", {},
     _PRETRAIN + ["--input_file={records}", "--bert_config_file="],
     "--bert_config_file is needed: no --init_checkpoint names a model to take it from"),
    ("pretraining_too_few_predictions", "run_pretraining.py", {},
     _PRETRAIN[:-1] + ["--input_file={records}", "--max_predictions_per_seq=5"],
     "the records were written with --max_predictions_per_seq=20, this run has "
     "--max_predictions_per_seq=5"),
]
# Each script's other flags: the tiny model, the output folder, lengths it allows. A flag of
# the case (e.g. --init_checkpoint) replaces the one here.
_MODEL = ["--vocab_file={vocab_file}", "--bert_config_file={bert_config_file}",
          "--init_checkpoint={init_checkpoint}", "--max_seq_length=32"]
_BASE_FLAGS = {
    "run_classifier.py": _MODEL + ["--output_dir={out}"],
    "run_ner.py": _MODEL + ["--output_dir={out}"],
    "run_squad.py": _MODEL + ["--output_dir={out}", "--max_query_length=8", "--doc_stride=8"],
    "run_swag.py": _MODEL + ["--output_dir={out}"],
    # The fixture records are 128 tokens long: a model with 128 positions.
    "run_pretraining.py": ["--bert_config_file={pretraining_config}", "--output_dir={out}",
                           "--max_seq_length=128"],
    "create_pretraining_data.py": ["--vocab_file={vocab_file}", "--max_seq_length=32"],
    "extract_features.py": _MODEL,
    "convert_checkpoint.py": ["--input={init_checkpoint}", "--to=hf",
                              "--bert_config_file={bert_config_file}", "--vocab_file={vocab_file}"],
    "export_savedmodel.py": ["--input={init_checkpoint}", "--bert_config_file={bert_config_file}",
                             "--vocab_file={vocab_file}", "--output={out}/exported"],
    "predict_text.py": ["--task=embed", "--model={init_checkpoint}",
                        "--bert_config_file={bert_config_file}", "--vocab_file={vocab_file}",
                        "--input_file={data}/lines.txt", "--output_file={out}/vectors.jsonl"],
}


def test_the_table_covers_every_script_with_fifty_cases():
    assert len(_CASES) >= 50
    assert {script for _, script, *_ in _CASES} == set(_BASE_FLAGS)


def _prepare(model, fixtures_dir, folder: pathlib.Path, script, files, flags):
    """The case's files under `folder` (data/, and out/ holding the user's earlier file); the
    values its flags name, and the script's arguments."""
    data, out = folder / "data", folder / "out"
    data.mkdir(parents=True)
    out.mkdir()
    _write(data, files)
    (out / _EARLIER).write_text("the user's earlier results\n")
    values = {"data": data, "out": out, "records": _records(fixtures_dir),
              "pretraining_config": write_config(str(folder)), **model}
    if any("{longer_vocab}" in flag for flag in flags):
        values["longer_vocab"] = folder / "longer_vocab.txt"
        extra = "".join(f"extra{i}\n" for i in range(50))
        values["longer_vocab"].write_text(pathlib.Path(model["vocab_file"]).read_text() + extra)
    if any("{damaged}" in flag for flag in flags):
        values["damaged"] = _damaged_checkpoint(model, folder / "damaged")
    named = {flag.split("=")[0] for flag in flags}
    args = [flag.format(**values) for flag in _BASE_FLAGS[script]
            if flag.split("=")[0] not in named]
    return values, args + [flag.format(**values) for flag in flags]


@pytest.fixture(scope="module")
def outcomes(model, fixtures_dir, tmp_path_factory) -> dict[str, tuple]:
    """{case id: (its folder, the values its flags name, its arguments, what the script did)},
    each script running its cases in one process."""
    root = tmp_path_factory.mktemp("bad_inputs")
    prepared, by_script = {}, {}
    for case_id, script, files, flags, _ in _CASES:
        values, args = _prepare(model, fixtures_dir, root / case_id, script, files, flags)
        prepared[case_id] = (root / case_id, values, args)
        by_script.setdefault(script, {})[case_id] = args
    results = {}
    for script, cells in by_script.items():
        results.update(run_cells(script, cells, str(root)))
    return {case_id: (*prepared[case_id], results[case_id]) for case_id in prepared}


def _check(folder: pathlib.Path, status: int, stderr: str, cause: str) -> None:
    assert status == 1, stderr[-2000:]
    assert_user_error(stderr, cause)
    out = folder / "out"
    assert sorted(p.name for p in out.iterdir()) == [_EARLIER]
    assert (out / _EARLIER).read_text() == "the user's earlier results\n"


@pytest.mark.slow
@pytest.mark.parametrize("case", _CASES, ids=[case[0] for case in _CASES])
def test_bad_input_is_named_and_nothing_is_written(outcomes, case):
    folder, values, _, result = outcomes[case[0]]
    _check(folder, result["status"], result["stderr"], case[-1].format(**values))


@pytest.mark.slow
@pytest.mark.parametrize("case_id", ["glue_unknown_label", "create_data_vocab_without_mask"])
def test_a_case_run_as_its_own_process_ends_the_same(outcomes, case_id):
    """As a user runs it: the script in a fresh process prints the same `error:` line."""
    script, cause = next((case[1], case[-1]) for case in _CASES if case[0] == case_id)
    folder, values, args, result = outcomes[case_id]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    alone = subprocess.run([sys.executable, str(REPO_ROOT / script), *args], capture_output=True,
                           text=True, env=env, cwd=REPO_ROOT, timeout=600)
    _check(folder, alone.returncode, alone.stderr, cause.format(**values))

    def error_line(stderr):
        return next(line for line in stderr.splitlines() if line.startswith("error: "))

    assert error_line(alone.stderr) == error_line(result["stderr"])
