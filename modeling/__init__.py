"""BERT in Keras 3: config, layers, encoder, heads, task models and losses; `checkpoints` reads
and writes the TF1, project and Hugging Face formats. Imports only `utils`."""
