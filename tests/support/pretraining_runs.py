"""Running run_pretraining.py as a user would, for the end-to-end tests."""
import json
import os
import socket
import subprocess
import sys

from tests.support.paths import REPO_ROOT

# A model small enough for CPU tests, with the uncased vocabulary of the fixture TFRecords.
TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=128, type_vocab_size=2)


def write_config(folder, **overrides) -> str:
    path = os.path.join(folder, "bert_config.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({**TINY, **overrides}, f)
    return path


def command(records, output_dir, config, **flags) -> list[str]:
    values = dict(input_file=records, output_dir=output_dir, bert_config_file=config,
                  do_train=True, train_batch_size=8, max_seq_length=128,
                  max_predictions_per_seq=20, num_train_steps=4, num_warmup_steps=1,
                  learning_rate=1e-3, save_checkpoints_steps=2, log_steps=1)
    values.update(flags)
    return [sys.executable, str(REPO_ROOT / "run_pretraining.py")] + [
        f"--{k}={v}" for k, v in values.items() if v is not None]


def run(args, env=None, check=True) -> subprocess.CompletedProcess:
    result = subprocess.run(args, capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    if check and result.returncode:
        raise AssertionError(f"exit {result.returncode}\n{result.stderr[-4000:]}")
    return result


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def read_results(path) -> dict:
    with open(path, encoding="utf-8") as f:
        return {k: v for k, v in (line.strip().split(" = ") for line in f)}
