"""The models built from the layers: the encoder, the pretrainer, the task models, the
feature-based BiLSTM tagger and the models for new text."""
