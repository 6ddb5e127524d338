"""Keras `.weights.h5` files (what `save_weights` writes, and KerasHub presets hold), read and
written as data with h5py: no Keras object is built or deserialized.

The file's groups follow the model's layers: `layers/<layer>/vars/<index>` holds a layer's
variables in order, and each `vars` group carries the layer's name as the attribute `name`. Reading
refuses what Keras itself refuses in such a file (soft and external links, external and virtual
datasets) and datasets that declare far more data than they store.
"""
from __future__ import annotations

import dataclasses

import h5py
import numpy as np

from modeling.checkpoints.errors import CorruptCheckpointError, UnsupportedCheckpointError

VARS = "vars"
# A dataset declaring more than this many bytes must store at least a thousandth of them.
_SPARSE_FLOOR_BYTES = 1 << 24
_MAX_EXPANSION = 1000


@dataclasses.dataclass
class WeightsFile:
    """The variables of a `.weights.h5` file and the layer name of each of its groups."""

    # {dataset path, e.g. "layers/dense/vars/0": array}; floats widened to float32 exactly.
    arrays: dict[str, np.ndarray]
    # {group path ("" for the model itself): the layer name of its `vars` group}.
    layer_names: dict[str, str]


def read_weights_file(path: str) -> WeightsFile:
    """Every variable of a Keras `.weights.h5` file and the name of every layer in it.

    Raises:
        CorruptCheckpointError: the file cannot be read as HDF5.
        UnsupportedCheckpointError: links, external or virtual datasets, a dtype other than
            floats (float16, bfloat16, float32) or the integers of an optimizer.
    """
    weights = WeightsFile({}, {})
    try:
        with h5py.File(path, "r") as f:
            _walk(f, "", weights, path)
    except OSError as error:
        raise CorruptCheckpointError(f"{path} cannot be read: {error}") from None
    return weights


def _walk(group: h5py.Group, prefix: str, weights: WeightsFile, source: str) -> None:
    for key in group:
        path = prefix + key
        link = group.get(key, getlink=True)
        if not isinstance(link, h5py.HardLink):
            raise UnsupportedCheckpointError(
                f"{source}: {path} is a {type(link).__name__}; not read")
        item = group[key]
        if isinstance(item, h5py.Group):
            if key == VARS:
                weights.layer_names[prefix[:-1]] = _text(item.attrs.get("name", ""))
            _walk(item, path + "/", weights, source)
        else:
            weights.arrays[path] = _read_dataset(item, path, source)


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _read_dataset(dataset: h5py.Dataset, path: str, source: str) -> np.ndarray:
    if dataset.external or dataset.is_virtual:
        raise UnsupportedCheckpointError(f"{source}: {path} is an external or virtual dataset; "
                                         "not read")
    declared = int(np.prod(dataset.shape)) * dataset.dtype.itemsize
    if declared > _SPARSE_FLOOR_BYTES and declared > _MAX_EXPANSION * dataset.id.get_storage_size():
        raise CorruptCheckpointError(f"{source}: {path} declares {declared} bytes but stores "
                                     f"{dataset.id.get_storage_size()}; not read")
    if _text(dataset.attrs.get("dtype", "")) == "bfloat16":  # Keras stores bfloat16 as 2 bytes
        import ml_dtypes  # a dependency of keras
        return np.asarray(dataset[()]).view(ml_dtypes.bfloat16).astype(np.float32)
    if dataset.dtype.kind == "f" and dataset.dtype.itemsize <= 4:
        return np.asarray(dataset[()], dtype=np.float32)
    if dataset.dtype.kind in "iu":  # an optimizer's iteration count
        return np.asarray(dataset[()])
    raise UnsupportedCheckpointError(f"{source}: {path} has dtype {dataset.dtype}; only float16, "
                                     "bfloat16 and float32 weights are read")


def write_weights_file(path: str, layer_names: dict[str, str],
                       arrays: dict[str, np.ndarray]) -> None:
    """Writes a `.weights.h5` file as Keras writes it: a `vars` group named after its layer for
    every group of `layer_names` (layers without variables too), then the arrays."""
    with h5py.File(path, "w") as f:
        for group, name in layer_names.items():
            f.require_group(f"{group}/{VARS}" if group else VARS).attrs["name"] = name
        for key, value in arrays.items():
            f[key] = np.asarray(value, order="C")  # (ascontiguousarray makes scalars 1-D)
