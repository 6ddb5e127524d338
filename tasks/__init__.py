"""The task layer: one module per task, above `data/`, `modeling/` and `training/`.

Each module owns its task end to end: how examples become features, the model with its head and
loss (`training.fine_tuning.FineTuningTask`), and how the model's outputs become answers and
output files. The scripts (`run_*.py`, `predict_text.py`) turn flags into calls of these modules;
`serving/` exports their models. Every check and default of a task is written once, here.

- `classifier`: GLUE and XNLI sentence (pair) classification; `TextClassifier` on new text.
- `squad`: SQuAD v1.1 / v2.0 question answering; `QuestionAnswerer`.
- `swag`: SWAG multiple choice; `MultipleChoice`.
- `ner`: CoNLL-2003 named entities, fine-tuned (`EntityTagger`) and `ner_feature_based`.
- `pretraining`: masked LM and next sentence prediction on TFRecords; `fill_mask` on new text.
- `embedding`: sentence vectors (`SentenceEmbedder`, sentence-transformers folders).
- `text_model`: what the text APIs share: texts -> features -> batched prediction, in order.
"""
