"""Checkpoints in three formats: Google's TF1 release (`tf1`), this project's (`project`) and
Hugging Face folders (`hf`). `formats` detects the format and loads any of them into a model (the
one entry point of `--init_checkpoint`); `folders` reads and writes whole model folders for
conversion; `errors` holds what a strict load raises; `names` and `heads` map variable names and
detect a checkpoint's head."""
