"""run_squad.py end to end, as a subprocess on SQuAD files in the official format.

Tiny models (hidden 32, 2 layers) train for a few steps on the fixture files; the outputs are
checked against the predict file's question ids, the original's file formats, the official
evaluation and the original code's fine-tuned checkpoint. A learning test trains on generated
questions until the official F1 is high.
"""
import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from modeling.checkpoints.tf1.checkpoint import load_tf1_checkpoint
from modeling.models.encoder import BertEncoder
from modeling.models.task_models import BertSpanLabeler
from tasks.squad import TIMING as SQUAD_TIMING
from data.squad import metrics
from data.squad.examples import load_squad_json, read_squad_examples
from data.squad.features import convert_examples_to_features, features_to_arrays
from data.squad.predictions import RawResult, compute_predictions
from data.tokenization import FullTokenizer
from modeling.checkpoints import save_tf1_checkpoint
from modeling.config import BertConfig
from synthetic.squad import write_squad_files
from tests.support.paths import REPO_ROOT
from tests.support.script_runner import run_cells

pytestmark = pytest.mark.slow

TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, hidden_act="gelu", hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, max_position_embeddings=128, type_vocab_size=2,
            initializer_range=0.02)
# The fixture features' settings.
WINDOW_FLAGS = ["--max_seq_length=128", "--doc_stride=64", "--max_query_length=32"]
NBEST_KEYS = ["text", "probability", "start_logit", "end_logit"]
V2_KEYS = ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact",
           "NoAns_f1", "NoAns_total", "best_exact", "best_exact_thresh", "best_f1",
           "best_f1_thresh"]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A random tiny BERT in the original checkpoint format: (bert_config.json, checkpoint)."""
    folder = tmp_path_factory.mktemp("pretrained")
    config_file = folder / "bert_config.json"
    config_file.write_text(json.dumps(TINY))
    prefix = save_tf1_checkpoint(BertEncoder(BertConfig(**TINY)), str(folder / "bert_model.ckpt"))
    return config_file, prefix


def run_squad(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "run_squad.py"), *flags],
                          capture_output=True, text=True, cwd=REPO_ROOT)


def check_success(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr[-5000:]


def question_ids(path) -> list[str]:
    return [qa["id"] for article in load_squad_json(path)["data"]
            for paragraph in article["paragraphs"] for qa in paragraph["qas"]]


def read_json(path):
    with open(path, encoding="utf-8") as reader:
        return json.load(reader)


def check_prediction_files(out, dev_file, n_best_size: int, version_2: bool) -> dict:
    """Checks the original's files and formats; returns predictions.json."""
    ids = question_ids(dev_file)
    predictions = read_json(out / "predictions.json")
    nbest = read_json(out / "nbest_predictions.json")
    assert list(predictions) == ids and list(nbest) == ids
    for path in (out / "predictions.json", out / "nbest_predictions.json"):
        text = path.read_text(encoding="utf-8")
        assert text == json.dumps(json.loads(text), indent=4) + "\n"
    for qid in ids:
        entries = nbest[qid]
        assert 1 <= len(entries) <= n_best_size + int(version_2)
        assert all(list(entry) == NBEST_KEYS for entry in entries)
        assert sum(entry["probability"] for entry in entries) == pytest.approx(1.0)
        scores = [entry["start_logit"] + entry["end_logit"] for entry in entries]
        assert scores == sorted(scores, reverse=True) or version_2
        if not version_2:
            assert predictions[qid] == entries[0]["text"]
    assert (out / "null_odds.json").exists() == version_2
    assert not list(out.glob("*.tmp"))
    return predictions


def predictions_from_parts(config_file, checkpoint, dev_file, vocab_file, version_2: bool,
                           padding_competes: bool = False):
    """What run_squad.py should write, from its parts (each tested against the original's
    outputs): the model read from a TF1 checkpoint, features and the prediction writer.

    `padding_competes`: as the original, which runs every feature padded to max_seq_length, a
    padding position may take one of the n best start or end slots (`--pad_to_max_length`);
    otherwise (batches cut to their length) padding positions are never candidates."""
    model = BertSpanLabeler(BertConfig.from_json_file(config_file))
    load_tf1_checkpoint(model, str(checkpoint))
    examples = read_squad_examples(dev_file, is_training=False).examples
    features = list(convert_examples_to_features(
        examples, FullTokenizer(vocab_file, do_lower_case=True), 128, 64, 32, False))
    arrays = features_to_arrays(features, is_training=False)
    logits = model({k: arrays[k] for k in ("input_ids", "input_mask", "segment_ids")})
    logits = {name: value.numpy() for name, value in logits.items()}
    if not padding_competes:
        for value in logits.values():
            value[arrays["input_mask"] == 0] = -np.inf
    results = [RawResult(int(unique_id), start, end) for unique_id, start, end in zip(
        arrays["unique_ids"], logits["start_logits"], logits["end_logits"])]
    return compute_predictions(examples, features, results, 20, 30, True, version_2, 0.0)


def check_same_predictions(out, expected) -> None:
    """The files hold `expected`'s answers and logits to 1e-4; where float rounding can reorder
    near-equal candidates, the answer chosen must score within 1e-4 of the expected one."""
    predictions = read_json(out / "predictions.json")
    nbest = read_json(out / "nbest_predictions.json")
    for qid, entries in expected.nbest.items():
        ours = {e["text"]: (e["start_logit"], e["end_logit"]) for e in nbest[qid]}
        theirs = {e["text"]: (e["start_logit"], e["end_logit"]) for e in entries}
        common = ours.keys() & theirs.keys()
        assert len(common) >= len(theirs) - 1, qid
        for text in common:
            np.testing.assert_allclose(ours[text], theirs[text], atol=1e-4)
        answer, expected_answer = predictions[qid], expected.predictions[qid]
        if answer != expected_answer:
            assert sum(theirs[answer]) == pytest.approx(sum(theirs[expected_answer]), abs=1e-4)
    if expected.null_odds:
        assert read_json(out / "null_odds.json") == pytest.approx(expected.null_odds, abs=1e-4)


def test_v1_trains_predicts_and_evaluates(fixtures_dir, uncased_vocab, pretrained, tmp_path):
    inputs = fixtures_dir / "squad" / "inputs"
    config_file, checkpoint = pretrained
    out = tmp_path / "out"
    result = run_squad(
        f"--vocab_file={uncased_vocab}", f"--bert_config_file={config_file}",
        f"--init_checkpoint={checkpoint}", "--do_train",
        f"--train_file={inputs / 'train-v1.1.json'}", "--do_predict",
        f"--predict_file={inputs / 'dev-v1.1.json'}", *WINDOW_FLAGS, "--train_batch_size=8",
        "--num_train_epochs=1", f"--output_dir={out}")
    check_success(result)
    predictions = check_prediction_files(out, inputs / "dev-v1.1.json", 20, version_2=False)
    # 31 readable training questions (one answer is not in its context): int(31 / 8) steps.
    reader = tf.train.load_checkpoint(str(out / "model.ckpt"))
    shapes = reader.get_variable_to_shape_map()
    assert shapes["cls/squad/output_weights"] == [2, 32]
    assert shapes["cls/squad/output_bias"] == [2]
    assert reader.get_tensor("global_step") == 3
    assert read_json(out / "bert_config.json") == TINY
    # The fine-tuned model, read back from the original format, gives the same predictions.
    check_same_predictions(out, predictions_from_parts(
        out / "bert_config.json", out / "model.ckpt", inputs / "dev-v1.1.json", uncased_vocab,
        version_2=False))
    expected = metrics.evaluate(load_squad_json(inputs / "dev-v1.1.json"), predictions,
                                      metrics.VERSION_1)
    assert read_json(out / "eval_results.json") == expected
    assert list(expected) == ["exact_match", "f1"]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == expected
    # The original's fixed shapes, padding positions competing for the n best slots.
    fixed = tmp_path / "fixed"
    check_success(run_squad(
        f"--vocab_file={uncased_vocab}", f"--bert_config_file={config_file}",
        f"--init_checkpoint={out / 'model.ckpt'}", "--do_predict", "--pad_to_max_length",
        f"--predict_file={inputs / 'dev-v1.1.json'}", *WINDOW_FLAGS, f"--output_dir={fixed}"))
    check_same_predictions(fixed, predictions_from_parts(
        out / "bert_config.json", out / "model.ckpt", inputs / "dev-v1.1.json", uncased_vocab,
        version_2=False, padding_competes=True))


def test_v2_null_odds_and_a_rerun_with_a_threshold(fixtures_dir, uncased_vocab, pretrained,
                                                   tmp_path):
    inputs = fixtures_dir / "squad" / "inputs"
    config_file, checkpoint = pretrained
    out = tmp_path / "out"
    common = [f"--vocab_file={uncased_vocab}", f"--bert_config_file={config_file}",
              f"--init_checkpoint={checkpoint}", "--do_predict",
              f"--predict_file={inputs / 'dev-v2.0.json'}", "--version_2_with_negative",
              *WINDOW_FLAGS, f"--output_dir={out}"]
    check_success(run_squad(*common, "--do_train", f"--train_file={inputs / 'train-v2.0.json'}",
                            "--train_batch_size=8", "--num_train_epochs=1"))
    predictions = check_prediction_files(out, inputs / "dev-v2.0.json", 20, version_2=True)
    null_odds = read_json(out / "null_odds.json")
    assert list(null_odds) == list(predictions)
    assert all((predictions[qid] == "") == (null_odds[qid] > 0.0) for qid in predictions)
    results = read_json(out / "eval_results.json")
    assert list(results) == V2_KEYS
    assert results == metrics.evaluate(load_squad_json(inputs / "dev-v2.0.json"),
                                             predictions, metrics.VERSION_2, null_odds)
    nbest = read_json(out / "nbest_predictions.json")

    # The original's v2.0 recipe, predicting again with a threshold: --init_checkpoint still
    # the pretrained model (no SQuAD head) is refused, whatever --output_dir holds, and leaves
    # the predictions as they were; without it, the model fine-tuned in --output_dir answers.
    threshold = float(np.median(list(null_odds.values())))
    before = (out / "predictions.json").read_bytes()
    refused = run_squad(*common, f"--null_score_diff_threshold={threshold}")
    assert refused.returncode != 0
    assert "cls/squad/output_weights: missing" in refused.stderr
    assert "--init_checkpoint must hold a fine-tuned model" in refused.stderr
    assert (out / "predictions.json").read_bytes() == before
    without_init = [flag for flag in common if not flag.startswith("--init_checkpoint=")]
    check_success(run_squad(*without_init, f"--null_score_diff_threshold={threshold}"))
    assert read_json(out / "null_odds.json") == pytest.approx(null_odds, abs=1e-5)
    rerun = read_json(out / "predictions.json")
    for qid, odds in null_odds.items():
        best_non_null = next(entry["text"] for entry in nbest[qid] if entry["text"])
        assert rerun[qid] == ("" if odds > threshold else best_non_null)
    assert any(rerun[qid] for qid in rerun) and any(not rerun[qid] for qid in rerun)


def test_predict_only_with_the_original_fine_tuned_checkpoint(fixtures_dir, uncased_vocab,
                                                              tmp_path):
    tiny = fixtures_dir / "original" / "tiny"
    dev_file = fixtures_dir / "squad" / "inputs" / "dev-v2.0.json"
    out = tmp_path / "out"
    result = run_squad(
        f"--vocab_file={uncased_vocab}", f"--bert_config_file={tiny / 'bert_config.json'}",
        f"--init_checkpoint={tiny / 'squad' / 'model.ckpt'}", "--do_predict",
        f"--predict_file={dev_file}", "--version_2_with_negative", *WINDOW_FLAGS,
        f"--output_dir={out}")
    check_success(result)
    check_prediction_files(out, dev_file, 20, version_2=True)
    # The timing line, as the fine-tuning benchmark reads it.
    questions, seconds, *parts = SQUAD_TIMING.findall(result.stderr)[-1]
    assert int(questions) == len(question_ids(dev_file))
    assert sum(float(p) for p in parts[1:]) == pytest.approx(float(seconds), abs=0.2)
    check_same_predictions(out, predictions_from_parts(
        tiny / "bert_config.json", tiny / "squad" / "model.ckpt", dev_file, uncased_vocab,
        version_2=True))


BAD_FLAGS = {
    "too_long_for_the_model": (["--max_seq_length=256"], "max_position_embeddings=128"),
    "query_fills_the_sequence": (["--max_seq_length=64", "--max_query_length=61"],
                                 "--max_query_length=61"),
    "pretrained_checkpoint": (["--init_checkpoint=PRETRAINED"],
                              "cls/squad/output_weights: missing"),
}


@pytest.fixture(scope="module")
def bad_flag_runs(fixtures_dir, uncased_vocab, pretrained, tmp_path_factory):
    """{case: (its output folder, what run_squad.py did)}, every case in one process
    (`tests/support/script_runner.py`)."""
    root = tmp_path_factory.mktemp("bad_flags")
    config_file, checkpoint = pretrained
    cells = {case: [f"--vocab_file={uncased_vocab}", f"--bert_config_file={config_file}",
                    "--do_predict",
                    f"--predict_file={fixtures_dir / 'squad' / 'inputs' / 'dev-v1.1.json'}",
                    f"--output_dir={root / case}", *WINDOW_FLAGS,
                    *(flag.replace("PRETRAINED", checkpoint) for flag in flags)]
             for case, (flags, _) in BAD_FLAGS.items()}
    results = run_cells("run_squad.py", cells, str(root))
    return {case: (root / case, results[case]) for case in BAD_FLAGS}


@pytest.mark.parametrize("case", BAD_FLAGS)
def test_bad_flags_fail_before_anything_is_written(bad_flag_runs, case):
    out, result = bad_flag_runs[case]
    assert result["status"] != 0
    assert BAD_FLAGS[case][1] in result["stderr"]
    assert not out.exists()


def write_vocab(path, squad_files) -> int:
    """A vocab.txt of the special tokens and every lower-cased word of `squad_files`."""
    words = set()
    for squad_file in squad_files:
        for article in load_squad_json(squad_file)["data"]:
            for paragraph in article["paragraphs"]:
                words.update(paragraph["context"].lower().split())
                words.update(word for qa in paragraph["qas"]
                             for word in qa["question"].lower().split())
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(words)]
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return len(tokens)


def test_a_tiny_model_learns_generated_questions(tmp_path):
    train_file, dev_file = write_squad_files(tmp_path / "data", num_train_paragraphs=270,
                                             num_dev_paragraphs=40)
    vocab_file = tmp_path / "vocab.txt"
    config_file = tmp_path / "bert_config.json"
    config_file.write_text(json.dumps(
        {**TINY, "vocab_size": write_vocab(vocab_file, [train_file, dev_file])}))
    out = tmp_path / "out"
    # 810 questions, 16 epochs of 32: 405 steps from a random encoder.
    check_success(run_squad(
        f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}", "--do_train",
        f"--train_file={train_file}", "--do_predict", f"--predict_file={dev_file}",
        "--max_seq_length=64", "--doc_stride=32", "--max_query_length=16",
        "--train_batch_size=32", "--num_train_epochs=16", "--learning_rate=3e-3",
        f"--output_dir={out}"))
    results = read_json(out / "eval_results.json")
    assert results["f1"] > 95.0, results
    assert results == metrics.evaluate(load_squad_json(dev_file),
                                             read_json(out / "predictions.json"))
