"""BERT in Keras 3: `config` and `losses`; `layers/` (embeddings, attention, the Transformer block,
the output heads' layers, ...); `models/` (the encoder, the pretrainer, the task models, the text
models); `checkpoints/`, every format this project reads and writes, one subpackage a format,
behind one entry point. Imports only `utils`."""
