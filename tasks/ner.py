"""Named-entity recognition: CoNLL-2003 (paper section 5.3), fine-tuned, and new text.

Sentences (with their document's context, if asked) -> sequences whose words' first pieces carry
the tags (`data.ner`), the token classifier and its loss over those pieces, the conlleval
evaluation and its files, and `EntityTagger` for new text. Training cuts a sentence longer than a
sequence; tagging (dev, test, new text) cuts it into overlapping windows and takes each word's tag
from the window where its first piece has the most context (`data.windows`, SQuAD's rule). The
feature-based mode (BERT frozen, a BiLSTM on its features) is `tasks.ner_feature_based`.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from typing import Sequence

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from data import tokenization, windows
from data.ner import conll, features as ner_features, metrics
from modeling import losses
from modeling.config import BertConfig
from modeling.task_models import BertTokenClassifier
from tasks.text_model import TextModel, model_folder, read_fine_tuned
from training import fine_tuning
from training.batching import FIXED, Batching
from utils.output_files import write_eval_results, written_together

# The file names of each split, in the order they are looked for.
FILES = {"train": ("train.txt", "eng.train"),
         "dev": ("valid.txt", "dev.txt", "testa.txt", "eng.testa"),
         "test": ("test.txt", "testb.txt", "eng.testb")}
RESULTS = {"dev": "eval_results.txt", "test": "test_results.txt"}


@dataclasses.dataclass(frozen=True)
class Settings:
    """How sentences become sequences (run_ner.py's flags)."""

    max_seq_length: int = 128
    tag_scheme: str = "auto"
    document_context: bool = False
    # Tokens between the windows of a dev or test sentence longer than a sequence; None: half a
    # window (`tagging_stride`).
    doc_stride: int | None = None


def tagging_stride(max_seq_length: int, doc_stride: int | None) -> int:
    """The stride of a tagged sentence's windows: `doc_stride`, else half a window.

    Raises:
        ValueError: `doc_stride` < 1.
    """
    if doc_stride is not None and doc_stride < 1:
        raise ValueError(f"doc_stride={doc_stride} must be at least 1")
    return doc_stride or windows.default_stride(max_seq_length - 2)


def split_path(data_dir: str, split: str) -> str:
    for name in FILES[split]:
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"no {split} file in --data_dir={data_dir} (looked for "
                            f"{', '.join(FILES[split])})")


def read_splits(data_dir: str, splits: Sequence[str], tag_scheme: str
                ) -> dict[str, tuple[str, conll.ConllData]]:
    """Reads every split's file, so that bad input fails before anything is written."""
    found = {}
    for split in splits:
        path = split_path(data_dir, split)
        found[split] = (path, conll.read_conll_file(path, tag_scheme))
        if not found[split][1].sentences:
            raise ValueError(f"{path}: no sentences in the {split} file (empty, or only "
                             "-DOCSTART- lines)")
    return found


def saved_labels(path: str) -> list[str] | None:
    """The labels a training run wrote beside the model at `path` (`label_list.txt`), or None."""
    label_file = os.path.join(model_folder(path), conll.LABEL_FILE)
    if not os.path.isfile(label_file):
        return None
    with open(label_file, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def features(splits: dict[str, tuple[str, conll.ConllData]],
             tokenizer: tokenization.FullTokenizer, labels: Sequence[str],
             settings: Settings, windowed: bool = True) -> dict[str, ner_features.NerFeatures]:
    """Every split's features, made before anything is written (a tag outside the labels fails).

    The train split's long sentences are cut; dev's and test's are windows, unless not
    `windowed` (the feature-based tagger's words are read from one sequence each).
    """
    stride = tagging_stride(settings.max_seq_length, settings.doc_stride)
    found = {}
    for split, (path, data) in splits.items():
        try:
            found[split] = ner_features.convert_documents_to_features(
                data.documents, tokenizer, labels, settings.max_seq_length,
                settings.document_context, stride if windowed and split != "train" else None)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None
    return found


def loss_fn(outputs, batch, normaliser):
    """Cross-entropy over the labelled pieces (label id -1 elsewhere)."""
    count = normaliser.global_sum(tf.reduce_sum(tf.cast(batch["label_ids"] >= 0, tf.float32)))
    return {"loss": losses.token_cross_entropy(outputs["logits"], batch["label_ids"], count)}


def fine_tuning_task(config: BertConfig, labels: Sequence[str], do_lower_case: bool,
                     document_context: bool = False) -> fine_tuning.FineTuningTask:
    """The token classifier (`cls/token_classifier/...`), saved with its labels; with
    `document_context` (each sentence amid unlabelled context), trained on the labelled pieces
    only (`BertTokenClassifier`'s `labelled_pieces_only`)."""
    return fine_tuning.FineTuningTask(
        lambda: BertTokenClassifier(config, len(labels), labelled_pieces_only=document_context),
        loss_fn,
        head=f"a tagger of {len(labels)} labels: cls/token_classifier/output_weights",
        save=functools.partial(fine_tuning.save_fine_tuned, labels=list(labels),
                               do_lower_case=do_lower_case))


def tag(model: keras.Model, found: ner_features.NerFeatures, labels: Sequence[str],
        batch_size: int, batching: Batching = FIXED) -> tuple[list[list[str]], float]:
    """Predicted tags per sentence and word, and the mean loss over the labelled words."""
    logits = fine_tuning.predict(model, found.to_arrays(), batch_size,
                                 batching)["logits"]                         # [N, T, K]
    loss = float(losses.token_cross_entropy(logits, found.label_ids))
    return ner_features.predicted_word_tags(found, np.argmax(logits, -1), labels), loss


def _results(evaluation: metrics.NerEvaluation, loss: float, global_step: int) -> dict:
    results = {"eval_precision": evaluation.overall.precision / 100,
               "eval_recall": evaluation.overall.recall / 100,
               "eval_f1": evaluation.overall.f1 / 100,
               "eval_accuracy": evaluation.accuracy / 100, "eval_loss": loss,
               "global_step": global_step}
    for chunk_type, scores in evaluation.per_type.items():
        results.update({f"eval_precision_{chunk_type}": scores.precision / 100,
                        f"eval_recall_{chunk_type}": scores.recall / 100,
                        f"eval_f1_{chunk_type}": scores.f1 / 100})
    return results


def write_evaluation(split: str, path: str, data: conll.ConllData, tags: list[list[str]],
                     loss: float, global_step: int, output_dir: str) -> None:
    """predictions_{split}.txt, conlleval_{split}.txt and eval/test_results.txt; the conlleval
    report is printed too."""
    sentences = data.sentences
    evaluation = metrics.evaluate_ner([s.tags for s in sentences], tags)
    with written_together():
        ner_features.write_conll_predictions(
            os.path.join(output_dir, f"predictions_{split}.txt"), sentences, tags)
        metrics.write_report(os.path.join(output_dir, f"conlleval_{split}.txt"), evaluation)
        write_eval_results(os.path.join(output_dir, RESULTS[split]),
                           _results(evaluation, loss, global_step))
    print(f"***** {split} ({path}) *****\n{metrics.format_report(evaluation)}", flush=True)


@dataclasses.dataclass(frozen=True)
class TaggedWord:
    """One word of a tagged sentence and its tag (IOB2, as `run_ner.py` writes them)."""

    word: str
    tag: str


class EntityTagger(TextModel):
    """A sentence, its words split at whitespace -> each word's tag, as `run_ner.py` (fine-tuned,
    not `--feature_based`) tags a CoNLL-2003 sentence on its own: the tag predicted at the
    word's first piece. A sentence longer than max_seq_length is tagged in overlapping windows
    `doc_stride` tokens apart (default half a window), each word from the window where its first
    piece has the most context."""

    def __init__(self, model: keras.Model, tokenizer: tokenization.FullTokenizer,
                 labels: Sequence[str], max_seq_length: int = 128, batch_size: int = 32,
                 batching: Batching = Batching(), doc_stride: int | None = None):
        super().__init__(model, tokenizer, max_seq_length, batch_size, batching)
        if len(labels) != model.num_labels:
            raise ValueError(f"{len(labels)} labels for a tagger of {model.num_labels}")
        self.model = model
        self.labels = tuple(labels)
        self.doc_stride = tagging_stride(max_seq_length, doc_stride)

    @classmethod
    def from_checkpoint(cls, path: str, vocab_file: str | None = None,
                        bert_config_file: str | None = None, do_lower_case: bool | None = None,
                        **kwargs) -> "EntityTagger":
        """Reads a fine-tuned tagger (e.g. run_ner.py's --output_dir) and its labels: those of
        `model_spec.json`, else the `label_list.txt` run_ner.py writes beside the model.

        Raises:
            ValueError: the checkpoint holds no tagger, or its labels are nowhere.
        """
        loaded, tokenizer = read_fine_tuned(
            path, "token_classifier", "tagger (cls/token_classifier/output_weights)",
            vocab_file, bert_config_file, do_lower_case)
        labels = loaded.labels or saved_labels(path)
        if labels is None:
            raise ValueError(f"{path}: no labels (model_spec.json, or "
                             f"{os.path.join(model_folder(path), conll.LABEL_FILE)})")
        return cls(loaded.model, tokenizer, labels, **kwargs)

    def __call__(self, texts: Sequence[str]) -> list[list[TaggedWord]]:
        """For each text, its words (split at whitespace) with their tags."""
        if not texts:
            return []
        documents = [conll.ConllDocument((conll.ConllSentence(tuple(
            conll.ConllToken(word, "", "", conll.OUTSIDE_TAG) for word in text.split()),
            number + 1),)) for number, text in enumerate(texts)]
        found = ner_features.convert_documents_to_features(
            documents, self.tokenizer, self.labels, self.max_seq_length,
            doc_stride=self.doc_stride)
        windowed = sum(len(set(rows[rows >= 0].tolist())) > 1 for rows in found.word_rows)
        if windowed:
            logging.info("%d of %d texts were longer than max_seq_length=%d: tagged in %d "
                         "windows, %d tokens apart", windowed, len(texts), self.max_seq_length,
                         len(found.input_ids) - len(texts) + windowed, self.doc_stride)
        tags, _ = tag(self.model, found, self.labels, self.batch_size, self.batching)
        return [[TaggedWord(word, word_tag) for word, word_tag in zip(text.split(), sentence_tags)]
                for text, sentence_tags in zip(texts, tags)]
