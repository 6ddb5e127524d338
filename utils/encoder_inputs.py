"""The encoder's input names, shared by the features that feed it (`data/`) and the models that
read them (`modeling/`): each is also the key of its TFRecord feature and of its array."""

INPUT_IDS = "input_ids"
INPUT_MASK = "input_mask"
SEGMENT_IDS = "segment_ids"
# The encoder's inputs, int32 [B, T] (or [B, C, T] for multiple choice).
ENCODER_INPUTS = (INPUT_IDS, INPUT_MASK, SEGMENT_IDS)
