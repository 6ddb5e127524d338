"""run_pretraining.py end to end: outputs, resumption after SIGKILL, corrupt checkpoints, NaN, two
workers against one process."""
import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

from modeling.tf1_checkpoint import read_tf1_checkpoint
from tests.pretraining_runs import command, free_ports, read_results, run, write_config


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
