"""The `keras` format: this project's TF2 object-based checkpoints (`model.ckpt`)."""
