"""Text to model inputs: the tokenizers, vocabulary learning and the TFRecord schema at this level;
one subpackage per pipeline (`pretraining`, `classifier`, `squad`, `swag`, `ner`). Imports only
`utils`, never `modeling` or `training`."""
