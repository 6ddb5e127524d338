"""Tests of training/distribution.py with real tf.distribute strategies."""
import json
import os
import socket
import subprocess
import sys

import pytest
import tensorflow as tf

from tests.support.paths import REPO_ROOT
from training.distribution import STRATEGY_NAMES, get_strategy



def _sum_over_replicas(strategy: tf.distribute.Strategy) -> float:
    """Each replica contributes its id + 1; the SUM reduction returns n(n+1)/2."""
    def replica_value():
        context = tf.distribute.get_replica_context()
        return tf.cast(context.replica_id_in_sync_group + 1, tf.float32)
    per_replica = strategy.run(tf.function(replica_value))
    return float(strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None))


def test_one_device_uses_first_gpu_else_cpu():
    strategy = get_strategy("one_device")
    assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    expected = "GPU:0" if tf.config.list_logical_devices("GPU") else "CPU:0"
    with strategy.scope():
        variable = tf.Variable(1.0)
    assert variable.device.endswith(expected)
    assert strategy.num_replicas_in_sync == 1
    assert _sum_over_replicas(strategy) == 1.0


def test_mirrored_uses_every_local_gpu():
    strategy = get_strategy("mirrored")
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    replicas = max(1, len(tf.config.list_logical_devices("GPU")))
    assert strategy.num_replicas_in_sync == replicas
    with strategy.scope():
        variable = tf.Variable(1.0)
    assert isinstance(variable, tf.distribute.DistributedValues)
    assert _sum_over_replicas(strategy) == replicas * (replicas + 1) / 2


def multi_worker_check() -> None:
    """Builds the strategy from TF_CONFIG (set by the caller) and checks what it read."""
    strategy = get_strategy("multi_worker_mirrored")
    assert isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
    resolver = strategy.cluster_resolver
    assert (resolver.task_type, resolver.task_id) == ("worker", 0)
    assert strategy.num_replicas_in_sync == 1
    assert _sum_over_replicas(strategy) == 1.0


def test_multi_worker_mirrored_reads_tf_config():
    # A one-worker cluster in a fresh process: collective ops are configured at TF start-up.
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        port = probe.getsockname()[1]
    tf_config = {"cluster": {"worker": [f"localhost:{port}"]},
                 "task": {"type": "worker", "index": 0}}
    env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), TF_CPP_MIN_LOG_LEVEL="2")
    code = ("import sys; sys.path[:0] = [sys.argv[1]]; "
            "from tests.training import test_distribution; test_distribution.multi_worker_check()")
    result = subprocess.run([sys.executable, "-c", code, str(REPO_ROOT)], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match=r"'mirror'.*" + r".*".join(STRATEGY_NAMES)):
        get_strategy("mirror")


def test_tpu_address_only_for_tpu():
    with pytest.raises(ValueError, match=r"tpu_address='grpc://10.0.0.2:8470'.*'mirrored'"):
        get_strategy("mirrored", tpu_address="grpc://10.0.0.2:8470")
