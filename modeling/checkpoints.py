"""One entry point for `--init_checkpoint`: detects the format and loads the checkpoint strictly."""
import logging

import keras

from modeling.hf_checkpoint import is_hf_folder, load_hf_checkpoint
from modeling.project_checkpoint import is_project_checkpoint, load_project_checkpoint
from modeling.tf1_checkpoint import load_tf1_checkpoint, resolve_checkpoint_prefix

TF1 = "original TF1 (name-based) checkpoint"
PROJECT = "project (TF2 object-based) checkpoint"
HF = "Hugging Face folder"


def load_checkpoint(model: keras.Model, path: str) -> str:
    """Loads an original TF1, a project or a Hugging Face checkpoint and says which it found.

    Args:
        model: the model, or only its encoder (`model.encoder`) to initialise an encoder from a
            checkpoint written with other heads.
        path: checkpoint prefix or the folder holding it; a Hugging Face folder (config.json +
            model.safetensors).

    Returns:
        The format found (`TF1`, `PROJECT` or `HF`).
    """
    if is_hf_folder(path):
        load_hf_checkpoint(model, path)
        found, source = HF, path
    else:
        source = resolve_checkpoint_prefix(path)
        if is_project_checkpoint(source):
            load_project_checkpoint(model, source)
            found = PROJECT
        else:
            load_tf1_checkpoint(model, source)
            found = TF1
    logging.info("loaded %s %s into %s", found, source, model.name)
    return found
