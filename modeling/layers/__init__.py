"""The Keras layers of BERT: embeddings, attention, the Transformer block, LayerNorm, dropout,
activations, initialisers, token packing and the output heads' layers."""
