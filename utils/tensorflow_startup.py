"""Imports TensorFlow with its start-up messages kept off the terminal.

Importing TensorFlow and finding its devices writes, from C++ and before a script says anything:
oneDNN's notice, the CPU instructions the binary was not built for, and on a machine without a
GPU "Could not find cuda drivers" and, at error level, "failed call to cuInit". Importing this
module first (every script that runs a model does) holds what is written to stderr meanwhile,
drops the lines of those kinds and writes out every other line as it came.
`TF_CPP_MIN_LOG_LEVEL=0` shows them all.

Importing TensorFlow imports Keras, and Keras imports scikit-learn and matplotlib where they are
installed, for its scikit-learn wrappers and image plots, which no script uses: 2-3 s of every
start on a 2-core machine. They are kept out while TensorFlow imports (Keras takes them as not
installed) and can be imported as usual afterwards.
"""
from __future__ import annotations

import glob
import importlib
import os
import re
import sys
import tempfile

# Start-up lines that say nothing about the run: TensorFlow's C++ info lines and their
# continuation, absl's note on early logs, and the CUDA plugins' registration notices.
_NOISE = re.compile(r"I\d{4} |WARNING: All log messages before absl::InitializeLog|"
                    r"To enable the following instructions|"
                    r"E\d{4} .*Unable to register cu(DNN|FFT|BLAS) factory")
# cuInit failing is news on a machine that has an NVIDIA device, not on one without.
_NO_DEVICE = re.compile(r"E\d{4} .*failed call to cuInit")


# What Keras imports, where installed, for features the scripts do not use.
_UNUSED_BY_THE_SCRIPTS = ("sklearn", "matplotlib")


def _is_noise(line: str, has_nvidia_device: bool) -> bool:
    return bool(_NOISE.match(line)) or (not has_nvidia_device and bool(_NO_DEVICE.match(line)))


def import_tensorflow_quietly() -> None:
    """Imports TensorFlow and Keras, scikit-learn and matplotlib kept out, and lists the GPUs
    (which initialises CUDA) with stderr held, unless `TF_CPP_MIN_LOG_LEVEL=0`."""
    if "tensorflow" in sys.modules:
        return
    blocked = [name for name in _UNUSED_BY_THE_SCRIPTS if name not in sys.modules]
    # A None entry makes `import name` raise ImportError.
    sys.modules.update(dict.fromkeys(blocked))
    try:
        if os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0":
            importlib.import_module("tensorflow")
        else:
            _import_with_stderr_held()
        importlib.import_module("keras")
    finally:
        for name in blocked:
            if sys.modules.get(name, ...) is None:
                del sys.modules[name]


def _import_with_stderr_held() -> None:
    sys.stderr.flush()
    stderr = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            import tensorflow as tf  # pylint: disable=import-outside-toplevel
            tf.config.list_physical_devices("GPU")
        finally:
            sys.stderr.flush()
            os.dup2(stderr, 2)
            os.close(stderr)
            held.seek(0)
            has_device = bool(glob.glob("/dev/nvidia[0-9]*"))
            lines = held.read().decode("utf-8", "replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if not _is_noise(line, has_device)))
            sys.stderr.flush()


import_tensorflow_quietly()
