"""`utils.tensorflow_startup`: TensorFlow starts without the libraries Keras would import for
features the scripts do not use, and they import as usual afterwards."""
import subprocess
import sys

import pytest

from tests.support.dependencies import require
from tests.support.paths import REPO_ROOT

_PROGRAM = """
import sys
import utils.tensorflow_startup
import keras
print(sorted({name.split(".")[0] for name in sys.modules} & {"matplotlib", "sklearn"}))
import matplotlib.pyplot
print(matplotlib.pyplot.__name__)
"""


@pytest.mark.slow
def test_tensorflow_and_keras_start_without_matplotlib_which_imports_afterwards():
    require("matplotlib")
    result = subprocess.run([sys.executable, "-c", _PROGRAM], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines() == ["[]", "matplotlib.pyplot"]
