"""Hugging Face BERT folders (`config.json` + `model.safetensors`)."""
