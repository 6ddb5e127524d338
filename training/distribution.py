"""A `tf.distribute` strategy from its flag name (`--distribution_strategy`, `--tpu`).

The original scripts ran on one device or, through TPUEstimator, on a TPU; here the same scripts
run under any of these strategies, and the strategy decides how many replicas share a batch.
"""
import tensorflow as tf

from training import keras_internals

STRATEGY_NAMES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


def _one_device_strategy() -> tf.distribute.Strategy:
    # The first GPU when there is one, as the original's single-GPU runs used; else the CPU.
    device = "/gpu:0" if tf.config.list_logical_devices("GPU") else "/cpu:0"
    return tf.distribute.OneDeviceStrategy(device)


def _tpu_strategy(tpu_address: str | None) -> tf.distribute.Strategy:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_address)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def get_strategy(name: str, tpu_address: str | None = None) -> tf.distribute.Strategy:
    """Builds the strategy `name`.

    Args:
        name: One of `STRATEGY_NAMES`:
            "one_device": the first GPU, or the CPU where there is no GPU;
            "mirrored": every local GPU (the CPU where there is none), synchronous all-reduce;
            "multi_worker_mirrored": synchronous training over the machines that the
                `TF_CONFIG` environment variable lists (one worker when it is unset);
            "tpu": the TPU at `tpu_address`.
        tpu_address: Name or `grpc://` address of the TPU ("local" for a TPU VM); only for
            "tpu". None lets the cluster resolver look up `TPU_NAME` and the environment.

    Returns:
        The strategy; build the model and the optimizer under its `scope()`.
    """
    if name not in STRATEGY_NAMES:
        raise ValueError(f"distribution strategy {name!r} is not one of {STRATEGY_NAMES}")
    if tpu_address and name != "tpu":
        raise ValueError(f"tpu_address={tpu_address!r} is only used by the 'tpu' strategy, "
                         f"not by {name!r}")
    if name == "one_device":
        return _one_device_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker_mirrored":
        return tf.distribute.MultiWorkerMirroredStrategy()
    return _tpu_strategy(tpu_address)


def any_worker(strategy: tf.distribute.Strategy, flag: bool) -> bool:
    """Whether `flag` holds on any worker of `strategy` (an all-reduce over the workers, which
    must all call it at the same point; outside multi-worker runs, `flag` itself)."""
    if not keras_internals.is_multi_worker(strategy):
        return flag
    value = strategy.run(lambda: tf.constant(1.0 if flag else 0.0))
    return bool(strategy.reduce(tf.distribute.ReduceOp.MAX, value, axis=None).numpy() > 0)
