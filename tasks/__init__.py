"""The task layer: one module per task, above `data/`, `modeling/`, `running/` and `training/`.

Each module owns its task end to end: how examples become features, the model with its head and
loss (`training.fine_tuning.FineTuningTask`), and how the model's outputs become answers and
output files. Every check and default of a task is written once, here; the scripts (`run_*.py`,
`predict_text.py`) turn flags into a task's `Settings` and call it, and `serving/` exports its
models.

The fine-tuning tasks have one surface (`runner.FineTunedTask`): `Settings`, `read_splits`,
`fine_tuning_task`, `train`, `evaluate`, `predict`, and a class for new text; `runner.fine_tune` is
the order in which every fine-tuning script calls them.

- `classifier`: GLUE and XNLI sentence (pair) classification; `TextClassifier` on new text.
- `squad`: SQuAD v1.1 / v2.0 question answering; `QuestionAnswerer`.
- `swag`: SWAG multiple choice; `MultipleChoice`.
- `ner`: CoNLL-2003 named entities, fine-tuned or on frozen features (`ner_feature_based`);
  `EntityTagger`.
- `pretraining`: masked LM and next sentence prediction on TFRecords; `fill_mask` on new text.
- `embedding`: sentence vectors (`SentenceEmbedder`, sentence-transformers folders).
- `text_model`: what the text APIs share: texts -> features -> batched prediction, in order.
"""
