"""Checkpoints: the TF1 (Google's release), project and Hugging Face formats, head detection, conversion."""
