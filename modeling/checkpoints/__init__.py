"""Checkpoints in three formats: Google's TF1 release (`tf1`), this project's (`project`) and
Hugging Face folders (`hf`). `formats` detects the format and loads any of them into a model (the
one entry point of `--init_checkpoint`); `folders` reads and writes whole model folders for
conversion; `errors` holds what a strict load raises; `names` and `heads` map variable names and
detect a checkpoint's head."""
# TEMPORARY public API until the checkpoint package's own lands.
import json as _json
import os as _os

from modeling.checkpoints.errors import CheckpointMismatchError, CorruptCheckpointError
from modeling.checkpoints.folders import SPEC_FILE
from modeling.checkpoints.formats import checkpoint_step, load_checkpoint
from modeling.checkpoints.heads import model_spec
from modeling.checkpoints.tf1 import resolve_checkpoint_prefix, save_tf1_checkpoint
from utils.output_files import write_text_atomically as _write


def write_model_spec(folder, spec, do_lower_case=None):
    data = spec.to_dict()
    if do_lower_case is not None:
        data["do_lower_case"] = do_lower_case
    _write(_os.path.join(folder, SPEC_FILE), _json.dumps(data, indent=2, sort_keys=True) + "\n")


def save_tf1_checkpoint(model, prefix, global_step=None, moments=None, **kwargs):
    from modeling.checkpoints import tf1 as _tf1
    from modeling.checkpoints.names import tf1_name as _name
    extra = {}
    for path, (m, v) in (moments or {}).items():
        extra[f"{_name(path)}/adam_m"] = m.numpy()
        extra[f"{_name(path)}/adam_v"] = v.numpy()
    return _tf1.save_tf1_checkpoint(model, prefix, global_step=global_step, extra=extra or None,
                                    **kwargs)
