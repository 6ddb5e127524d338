"""run_pretraining.py end to end: outputs, evaluation as the original's, resumption after SIGKILL,
corrupt checkpoints, NaN, two workers against one process."""
import json
import os
import pathlib
import re
import signal
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

from modeling.checkpoints import load_checkpoint
from modeling.checkpoints.tf1.checkpoint import read_tf1_checkpoint
from modeling.config import BertConfig
from modeling.models.pretrainer import BertPretrainer
from tests.support.pretraining_runs import command, free_ports, read_results, run, write_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def records(fixtures_dir):
    return str(fixtures_dir / "pretraining_data" / "original_wwm_false.tfrecord")


def _weights(folder):
    return read_tf1_checkpoint(os.path.join(folder, "bert_model.ckpt"))


def _assert_same_weights(a, b, atol):
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_allclose(a[name], b[name], atol=atol, err_msg=name)


def test_train_and_eval_from_the_original_checkpoint(records, fixtures_dir, tmp_path):
    tiny = fixtures_dir / "original" / "tiny"
    out = tmp_path / "run"
    result = run(command(records, out, str(tiny / "bert_config.json"), do_eval=True,
                         init_checkpoint=str(tiny / "bert_model.ckpt"), num_train_steps=3,
                         train_batch_size=4, eval_batch_size=4, max_eval_steps=2))
    assert "original TF1" in result.stderr
    results = read_results(out / "eval_results.txt")
    assert sorted(results) == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                               "next_sentence_accuracy", "next_sentence_loss"]
    assert results["global_step"] == "3"
    assert 0.0 <= float(results["masked_lm_accuracy"]) <= 1.0
    reader = tf.train.load_checkpoint(str(out / "bert_model.ckpt"))
    written = reader.get_variable_to_shape_map()
    original = read_tf1_checkpoint(str(tiny / "bert_model.ckpt"))
    slots = {f"{name}/adam_{moment}" for name in original for moment in "mv"}
    assert set(written) == set(original) | slots | {"global_step"}
    assert reader.get_tensor("global_step") == 3
    for name, value in original.items():
        assert tuple(written[name]) == value.shape
    assert json.loads((out / "bert_config.json").read_text())["hidden_size"] == 128
    assert any(f.startswith("events.") for f in os.listdir(out / "train"))


def _read_examples(path, max_seq_length=128, max_predictions=20):
    """Every record of a pretraining TFRecord file, in file order, as [N, ...] tensors."""
    lengths = {"input_ids": max_seq_length, "input_mask": max_seq_length,
               "segment_ids": max_seq_length, "masked_lm_positions": max_predictions,
               "masked_lm_ids": max_predictions, "next_sentence_labels": 1}
    spec = {key: tf.io.FixedLenFeature([n], tf.int64) for key, n in lengths.items()}
    spec["masked_lm_weights"] = tf.io.FixedLenFeature([max_predictions], tf.float32)
    serialized = [record.numpy() for record in tf.data.TFRecordDataset(path)]
    features = tf.io.parse_example(serialized, spec)
    return {key: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
            for key, value in features.items()}


def _terms(logits, labels):
    """Per-row negative log-likelihood of `labels` and whether the arg-max is the label."""
    log_probs = tf.nn.log_softmax(logits, axis=-1).numpy()
    nll = -np.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
    return nll.astype(np.float64), (np.argmax(log_probs, axis=-1) == labels).astype(np.float64)


@pytest.fixture(scope="module")
def eval_case(records, fixtures_dir, tmp_path_factory):
    """The 60 original records, with masked-LM labels made right for the tiny original checkpoint
    where it makes the accuracy tell the evaluated records apart (a random model predicts none):
    every slot of every third record, and the zero-weight padding slots of all (which must not
    count). Returns that file and the checkpoint's per-record terms on it."""
    tiny = fixtures_dir / "original" / "tiny"
    model = BertPretrainer(BertConfig.from_json_file(str(tiny / "bert_config.json")))
    load_checkpoint(model, str(tiny / "bert_model.ckpt"))
    features = _read_examples(records)
    outputs = model(features, training=False)
    predicted = np.argmax(outputs["masked_lm_logits"].numpy(), axis=-1)
    weights = features["masked_lm_weights"].numpy().astype(np.float64)
    labels = features["masked_lm_ids"].numpy()
    labels = np.where((np.arange(len(labels)) % 3 == 0)[:, None] | (weights == 0), predicted,
                      labels)
    path = str(tmp_path_factory.mktemp("eval") / "relabelled.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record, row in zip(tf.data.TFRecordDataset(records), labels):
            example = tf.train.Example.FromString(record.numpy())
            ids = example.features.feature["masked_lm_ids"].int64_list
            del ids.value[:]
            ids.value.extend(row.tolist())
            writer.write(example.SerializeToString())
    mlm_nll, mlm_correct = _terms(outputs["masked_lm_logits"], labels)
    nsp_nll, nsp_correct = _terms(outputs["next_sentence_logits"],
                                  features["next_sentence_labels"][:, 0].numpy())
    return path, dict(weights=weights, mlm_nll=mlm_nll, mlm_correct=mlm_correct,
                      nsp_nll=nsp_nll, nsp_correct=nsp_correct)


def _expected_eval(terms, batches):
    """The original's eval metrics over `batches` (lists of record indices), by its rules:
    tf.metrics means over every evaluated example (masked-LM terms weighted by
    masked_lm_weights) and the Estimator's `loss`, the mean of the batch losses."""
    index = np.concatenate(batches)
    weights = terms["weights"][index]
    batch_losses = [
        np.sum(terms["weights"][b] * terms["mlm_nll"][b]) / (np.sum(terms["weights"][b]) + 1e-5)
        + np.mean(terms["nsp_nll"][b]) for b in batches]
    return {
        "masked_lm_accuracy": np.sum(weights * terms["mlm_correct"][index]) / np.sum(weights),
        "masked_lm_loss": np.sum(weights * terms["mlm_nll"][index]) / np.sum(weights),
        "next_sentence_accuracy": np.mean(terms["nsp_correct"][index]),
        "next_sentence_loss": np.mean(terms["nsp_nll"][index]),
        "loss": np.mean(batch_losses),
    }


@pytest.mark.parametrize("max_eval_steps, single_pass", [(7, False), (8, False), (100, False),
                                                          (100, True)])
def test_eval_matches_the_original_eval_input(fixtures_dir, eval_case, tmp_path,
                                              max_eval_steps, single_pass):
    """The original evaluates max_eval_steps full batches of its input repeated in file order
    (TFRecordDataset(files).repeat(), drop_remainder=True): on the 60 records, 7 batches of 8
    leave the last 4 out, 8 batches wrap around to records 0-3, 100 batches read the file 13
    times and more. --eval_single_pass reads each record once, the last batch of 4."""
    tiny = fixtures_dir / "original" / "tiny"
    path, terms = eval_case
    out = tmp_path / "eval"
    result = run(command(path, out, str(tiny / "bert_config.json"), do_train=False,
                         do_eval=True, init_checkpoint=str(tiny / "bert_model.ckpt"),
                         eval_batch_size=8, max_eval_steps=max_eval_steps,
                         eval_single_pass=single_pass))
    num_records = len(terms["nsp_nll"])
    assert num_records == 60
    if single_pass:
        order = np.arange(num_records)
    else:
        order = np.arange(max_eval_steps * 8) % num_records
    batches = [order[start:start + 8] for start in range(0, len(order), 8)]
    expected = _expected_eval(terms, batches)
    assert 0.2 < expected["masked_lm_accuracy"] < 0.5
    results = read_results(out / "eval_results.txt")
    assert sorted(results) == sorted([*expected, "global_step"])
    for key, value in expected.items():
        np.testing.assert_allclose(float(results[key]), value, rtol=2e-5, err_msg=key)
    repeated = f"{max_eval_steps * 8} examples from {num_records} records" in result.stderr
    assert repeated == (not single_pass and max_eval_steps * 8 > num_records)


def test_eval_refuses_zero_steps_without_single_pass(records, tmp_path):
    config = write_config(tmp_path)
    result = run(command(records, tmp_path / "run", config, do_train=False, do_eval=True,
                         max_eval_steps=0), check=False)
    assert result.returncode != 0 and "--max_eval_steps=0 must be >= 1" in result.stderr


@pytest.fixture(scope="module")
def straight_run(records, tmp_path_factory):
    """An uninterrupted 6-step run to compare interrupted ones with."""
    folder = tmp_path_factory.mktemp("straight")
    config = write_config(folder)
    run(command(records, folder / "run", config, num_train_steps=6))
    return config, _weights(folder / "run")


def test_killed_run_resumes_to_the_same_weights(records, straight_run, tmp_path):
    config, expected = straight_run
    resumed = tmp_path / "resumed"
    process = subprocess.Popen(command(records, resumed, config, num_train_steps=6,
                                       save_checkpoints_steps=1),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (resumed / "ckpt-2.index").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (resumed / "bert_model.ckpt.index").exists()
    result = run(command(records, resumed, config, num_train_steps=6, save_checkpoints_steps=1))
    assert "resumed from" in result.stderr
    _assert_same_weights(expected, _weights(resumed), atol=1e-6)


def test_corrupt_latest_checkpoint_falls_back_to_the_previous(records, straight_run, tmp_path):
    config, expected = straight_run
    partial = tmp_path / "partial"
    run(command(records, partial, config, num_train_steps=6))
    data_file = next(partial.glob("ckpt-6.data-*"))
    data_file.write_bytes(data_file.read_bytes()[:100])
    (partial / "bert_model.ckpt.index").unlink()
    result = run(command(records, partial, config, num_train_steps=6))
    assert "ckpt-6 is unreadable" in result.stderr and "ckpt-4" in result.stderr
    _assert_same_weights(expected, _weights(partial), atol=1e-6)


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(records, tmp_path):
    config = write_config(tmp_path)
    out = tmp_path / "run"
    result = run(command(records, out, config, num_train_steps=6, save_checkpoints_steps=1,
                         learning_rate=1e38, num_warmup_steps=0), check=False)
    assert result.returncode != 0
    assert "NaN or infinite" in result.stderr
    assert not (out / "bert_model.ckpt.index").exists()
    saved = list(out.glob("ckpt-*.index"))
    assert saved
    for index in saved:
        reader = tf.train.load_checkpoint(str(index)[:-len(".index")])
        for name in reader.get_variable_to_shape_map():
            if name.startswith("model/") and name.endswith("VARIABLE_VALUE"):
                assert np.isfinite(reader.get_tensor(name)).all(), (index, name)


def test_two_workers_match_one_process_with_the_same_global_batch(records, tmp_path):
    config = write_config(tmp_path, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    single = tmp_path / "single"
    run(command(records, single, config, num_train_steps=2))
    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    shared = tmp_path / "multi"
    processes = []
    for index in range(2):
        env = {**os.environ, "TF_CONFIG": json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}})}
        output = shared if index == 0 else tmp_path / f"worker{index}"
        processes.append(subprocess.Popen(
            command(records, output, config, num_train_steps=2,
                    distribution_strategy="multi_worker_mirrored"),
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    for process in processes:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr[-4000:]
    _assert_same_weights(_weights(single), _weights(shared), atol=1e-5)


def test_checkpoint_without_heads_initialises_the_encoder(records, fixtures_dir, tmp_path):
    tiny = fixtures_dir / "original" / "tiny"
    out = tmp_path / "run"
    result = run(command(records, out, str(tiny / "bert_config.json"), num_train_steps=1,
                         train_batch_size=2, init_checkpoint=str(tiny / "classifier")))
    assert "no pretraining heads" in result.stderr
    bad_config = write_config(tmp_path, hidden_size=64)
    result = run(command(records, tmp_path / "bad", bad_config, num_train_steps=1,
                         init_checkpoint=str(tiny / "bert_model.ckpt")), check=False)
    assert result.returncode != 0
    assert "bert/encoder/layer_0/attention/self/query/kernel: checkpoint shape (128, 128)" \
        in result.stderr
    assert not (tmp_path / "bad" / "bert_model.ckpt.index").exists()


@pytest.mark.parametrize("damage", ["truncated", "corrupted"])
def test_a_damaged_record_is_named_with_its_file_and_index(records, tmp_path, damage):
    data = bytearray(pathlib.Path(records).read_bytes())
    if damage == "truncated":  # an interrupted copy
        data = data[:len(data) * 2 // 5]
    else:
        data[len(data) // 10] ^= 0xFF
    damaged = tmp_path / "damaged.tfrecord"
    damaged.write_bytes(bytes(data))
    output_dir = tmp_path / "out"
    config = write_config(tmp_path)
    # 10 steps of 8 need more records than the file holds before the damage.
    result = run(command(str(damaged), str(output_dir), config, num_train_steps=10,
                         save_checkpoints_steps=100), check=False)
    assert result.returncode != 0
    assert re.search(rf"{damaged}: record \d+ \(after \d+ readable ones\) is damaged: {damage} "
                     r"record at \d+", result.stderr), result.stderr[-3000:]
    assert not list(output_dir.glob("ckpt-*"))
