"""Named-entity recognition: CoNLL-2003 (paper section 5.3), fine-tuned, and new text.

Sentences (with their document's context, if asked) -> sequences whose words' first pieces carry
the tags (`data.ner`), the token classifier and its loss over those pieces, the conlleval
evaluation and its files, and `EntityTagger` for new text. Training cuts a sentence longer than a
sequence; tagging (dev, test, new text) cuts it into overlapping windows and takes each word's tag
from the window where its first piece has the most context (`data.windows`, SQuAD's rule). The
feature-based mode (BERT frozen, a BiLSTM on its features) runs its helpers in
`tasks.ner_feature_based`.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from typing import NamedTuple, Sequence

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from data import tokenization, windows
from data.ner import conll, features as ner_features, metrics
from modeling import losses
from modeling.config import BertConfig
from modeling.models.task_models import BertTokenClassifier
from running.batching import FIXED, ArrayExamples, Batching
from tasks import ner_feature_based as feature_based
from tasks.text_model import (LABEL_FILE, TextModel, model_folder, read_fine_tuned,
                              saved_labels, write_labels)
from training import fine_tuning
from training.periodic_evaluation import EvaluationPlan
from utils.output_files import write_eval_results, written_together

# The file names of each split, in the order they are looked for.
FILES = {"train": ("train.txt", "eng.train"),
         "dev": ("valid.txt", "dev.txt", "testa.txt", "eng.testa"),
         "test": ("test.txt", "testb.txt", "eng.testb")}
RESULTS = {"dev": "eval_results.txt", "test": "test_results.txt"}
# The split each role reads: --do_eval scores dev, --do_predict tags and scores test.
SPLIT_OF_ROLE = {"train": "train", "eval": "dev", "predict": "test"}
# The result the best tagger is chosen by.
MAIN_METRIC = "eval_f1"
# The paper's fine-tuning rate, and the rate of the BiLSTM trained on frozen features.
LEARNING_RATE = 5e-5
FEATURE_BASED_LEARNING_RATE = 1e-3


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a run reads and writes besides its model (run_ner.py's flags).

    Attributes:
        data_dir: the folder of the CoNLL files (`FILES`); None where `files` names them all.
        files: a file for some roles ("train", "eval", "predict"), instead of `data_dir`'s.
        token_column, tag_column: the columns of each line's word and tag (negative: from the
            end; CoNLL-2003's four columns and two-column files alike by default).
        output_dir: where results, predictions and the model go.
        max_seq_length: tokens per sequence.
        do_lower_case: the tokenizer's casing.
        tag_scheme: the files' tags: iob1, iob2 or auto.
        document_context: pack each sentence amid its document's neighbours.
        doc_stride: tokens between the windows of a dev or test sentence longer than a sequence;
            None: half a window (`tagging_stride`).
        eval_batch_size, predict_batch_size: batch sizes for dev and test.
        batching: how batches are padded.
        init_checkpoint: without training, the fine-tuned tagger, beside which its labels are.
        frozen: the frozen features of `--feature_based` (BERT frozen, a BiLSTM trained on its
            features); None: the whole tagger is fine-tuned.
        lstm_units: units of each LSTM direction (`frozen` only).
        labels: the tag set in class-index order (a teacher's, `tasks.distillation`); None:
            the training file's, or without training those saved beside the model.
    """

    data_dir: str | None
    output_dir: str
    files: dict[str, str] = dataclasses.field(default_factory=dict)
    token_column: int = 0
    tag_column: int = -1
    max_seq_length: int = 128
    do_lower_case: bool = False
    tag_scheme: str = "auto"
    document_context: bool = False
    doc_stride: int | None = None
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    batching: Batching = Batching()
    init_checkpoint: str | None = None
    frozen: feature_based.FrozenFeatures | None = None
    lstm_units: int = 768
    evaluation: EvaluationPlan = EvaluationPlan(metric=MAIN_METRIC)
    labels: tuple[str, ...] | None = None

    def check(self) -> None:
        """Raises ValueError for a stride or LSTM size below 1, or windows with frozen features
        (each word is read from one sequence there; long sentences are cut)."""
        if self.lstm_units < 1:
            raise ValueError(f"--lstm_units={self.lstm_units} must be positive")
        if self.doc_stride is not None and self.doc_stride < 1:
            raise ValueError(f"--doc_stride={self.doc_stride} must be at least 1")
        self.evaluation.check()
        if self.frozen is None:
            return
        if self.doc_stride is not None:
            raise ValueError("--doc_stride: --feature_based reads each word from one sequence "
                             "per sentence (long sentences are cut); windows are for the "
                             "fine-tuned tagger")
        self.frozen.check()

    @property
    def sequences(self) -> dict:
        """How sentences become sequences (the frozen features' cache is keyed on it)."""
        return {"tag_scheme": self.tag_scheme, "max_seq_length": self.max_seq_length,
                "document_context": self.document_context,
                **({"columns": [self.token_column, self.tag_column]}
                   if (self.token_column, self.tag_column) != (0, -1) else {})}

    def path(self, role: str) -> str:
        """The file of a role: the one named for it, else the split's file in `data_dir`."""
        if role in self.files:
            return self.files[role]
        if self.data_dir is None:
            raise ValueError(f"--do_{role} needs --{SPLIT_OF_ROLE[role]}_file or --data_dir")
        return split_path(self.data_dir, SPLIT_OF_ROLE[role])


def learning_rate(settings: Settings, given: float | None) -> float:
    """`given`, else the default of the mode (`LEARNING_RATE`, `FEATURE_BASED_LEARNING_RATE`)."""
    if given:
        return given
    return FEATURE_BASED_LEARNING_RATE if settings.frozen else LEARNING_RATE


def tagging_stride(max_seq_length: int, doc_stride: int | None) -> int:
    """The stride of a tagged sentence's windows: `doc_stride`, else half a window.

    Raises:
        ValueError: `doc_stride` < 1.
    """
    if doc_stride is not None and doc_stride < 1:
        raise ValueError(f"doc_stride={doc_stride} must be at least 1")
    return doc_stride or windows.default_stride(max_seq_length - 2)


class Split(NamedTuple):
    """A CoNLL file read for the run: its path, sentences and sequences."""

    path: str
    data: conll.ConllData
    features: ner_features.NerFeatures


class Splits(NamedTuple):
    """The run's tag set (`labels`, in class-index order) and its splits by role."""

    labels: list[str]
    by_role: dict[str, Split]


def split_path(data_dir: str, split: str) -> str:
    for name in FILES[split]:
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"no {split} file in --data_dir={data_dir} (looked for "
                            f"{', '.join(FILES[split])})")


def read_splits(settings: Settings, roles: Sequence[str],
                tokenizer: tokenization.FullTokenizer) -> Splits:
    """Reads every role's file and makes its sequences, so that bad input (a tag outside the
    labels among them) fails before anything is written.

    The labels are the training file's, or without training those the training run wrote beside
    the model (`label_list.txt`). The train split's long sentences are cut; dev's and test's are
    windows, except with frozen features (each word is read from one sequence).
    """
    settings.check()
    read = {}
    for role in roles:
        split = SPLIT_OF_ROLE[role]
        path = settings.path(role)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"--do_{role}: {path} does not exist")
        read[role] = (path, conll.read_conll_file(path, settings.tag_scheme,
                                                  settings.token_column, settings.tag_column))
        if not read[role][1].sentences:
            raise ValueError(f"{path}: no sentences in the {split} file (empty, or only "
                             "-DOCSTART- lines)")
    if settings.labels:
        labels = list(settings.labels)
    elif "train" in read:
        labels = conll.label_list(conll.entity_types(read["train"][1]))
    else:
        labels = _labels_beside_model(settings)
    stride = tagging_stride(settings.max_seq_length, settings.doc_stride)
    by_role = {}
    for role, (path, data) in read.items():
        windowed = role != "train" and settings.frozen is None
        try:
            found = ner_features.convert_documents_to_features(
                data.documents, tokenizer, labels, settings.max_seq_length,
                settings.document_context, stride if windowed else None)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None
        by_role[role] = Split(path, data, found)
    return Splits(labels, by_role)


def _labels_beside_model(settings: Settings) -> list[str]:
    """The labels a training run saved: beside the fine-tuned tagger (--init_checkpoint), or in
    --output_dir for the frozen features' tagger and when no checkpoint is named."""
    path = settings.output_dir if settings.frozen or not settings.init_checkpoint \
        else settings.init_checkpoint
    labels = saved_labels(path)
    if labels is None:
        raise FileNotFoundError(f"no {LABEL_FILE} beside {path}: without --do_train the "
                                "labels come from the file the training run wrote beside the "
                                "model")
    return labels


def loss_fn(outputs, batch, normaliser):
    """Cross-entropy over the labelled pieces (label id -1 elsewhere)."""
    count = normaliser.global_sum(tf.reduce_sum(tf.cast(batch["label_ids"] >= 0, tf.float32)))
    return {"loss": losses.token_cross_entropy(outputs["logits"], batch["label_ids"], count)}


def fine_tuning_task(config: BertConfig, settings: Settings,
                     splits: Splits) -> fine_tuning.FineTuningTask:
    """The token classifier (`cls/token_classifier/...`), saved with its labels; with
    `document_context` (each sentence amid unlabelled context), trained on the labelled pieces
    only (`BertTokenClassifier`'s `labelled_pieces_only`). With frozen features, the BiLSTM
    tagger (`tasks.ner_feature_based`)."""
    labels = splits.labels
    if settings.frozen:
        return feature_based.fine_tuning_task(config, len(labels), settings.frozen,
                                              settings.lstm_units, loss_fn)
    return fine_tuning.FineTuningTask(
        lambda: BertTokenClassifier(config, len(labels),
                                    labelled_pieces_only=settings.document_context),
        loss_fn,
        head=f"a tagger of {len(labels)} labels: cls/token_classifier/output_weights",
        save=functools.partial(fine_tuning.save_fine_tuned, labels=list(labels),
                               do_lower_case=settings.do_lower_case))


def _words(settings: Settings, split: Split):
    return feature_based.word_features(split.path, split.features, settings.frozen,
                                       settings.sequences)


def train(run: fine_tuning.FineTuningRun, config: BertConfig, settings: Settings,
          splits: Splits) -> fine_tuning.Trained:
    """Fine-tunes the tagger (or trains the BiLSTM on frozen features) on the train file;
    writes the labels beside the model (`label_list.txt`)."""
    write_labels(settings.output_dir, splits.labels)
    train_split = splits.by_role["train"]
    if settings.frozen:
        data = feature_based.word_examples(_words(settings, train_split),
                                           feature_based.word_labels(train_split.features))
    else:
        data = ArrayExamples(train_split.features.to_arrays(), batching=settings.batching)
    return fine_tuning.train(
        run, fine_tuning_task(config, settings, splits), data,
        run.train_steps(data.num_examples), settings.evaluation,
        lambda model, step, suffix: evaluate(model, settings, splits, step, suffix))


def tag(model: keras.Model, found: ner_features.NerFeatures, labels: Sequence[str],
        batch_size: int, batching: Batching = FIXED) -> tuple[list[list[str]], float]:
    """Predicted tags per sentence and word, and the mean loss over the labelled words."""
    logits = fine_tuning.predict(model, found.to_arrays(), batch_size,
                                 batching)["logits"]                         # [N, T, K]
    loss = float(losses.token_cross_entropy(logits, found.label_ids))
    return ner_features.predicted_word_tags(found, np.argmax(logits, -1), labels), loss


def _score(model: keras.Model, settings: Settings, splits: Splits, role: str, batch_size: int,
           global_step: int, suffix: str = "") -> dict:
    """Tags a split and writes its evaluation (`write_evaluation`); returns the results."""
    split = splits.by_role[role]
    if settings.frozen:
        tags, loss = feature_based.tag(model, _words(settings, split),
                                       split.features, splits.labels, batch_size)
    else:
        tags, loss = tag(model, split.features, splits.labels, batch_size, settings.batching)
    return write_evaluation(SPLIT_OF_ROLE[role], split.path, split.data, tags, loss, global_step,
                            settings.output_dir, suffix)


def evaluate(model: keras.Model, settings: Settings, splits: Splits, global_step: int,
             suffix: str = "") -> dict:
    """Tags and scores the dev file: eval_results.txt, conlleval_dev.txt, predictions_dev.txt;
    with `suffix` (a scoring during training), eval_results{suffix}.txt alone."""
    return _score(model, settings, splits, "eval", settings.eval_batch_size, global_step, suffix)


def predict(model: keras.Model, settings: Settings, splits: Splits, global_step: int) -> None:
    """Tags and scores the test file: test_results.txt, conlleval_test.txt,
    predictions_test.txt."""
    _score(model, settings, splits, "predict", settings.predict_batch_size, global_step)


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
                     loss: float, global_step: int, output_dir: str, suffix: str = "") -> dict:
    """predictions_{split}.txt, conlleval_{split}.txt and eval/test_results.txt; the conlleval
    report is printed too. With `suffix`, eval_results{suffix}.txt alone. Returns the results."""
    sentences = data.sentences
    evaluation = metrics.evaluate_ner([s.tags for s in sentences], tags)
    results = _results(evaluation, loss, global_step)
    if suffix:
        write_eval_results(os.path.join(output_dir, f"eval_results{suffix}.txt"), results)
        logging.info("%s at step %d: entity F1 %.4f", split, global_step, results["eval_f1"])
        return results
    with written_together():
        ner_features.write_conll_predictions(
            os.path.join(output_dir, f"predictions_{split}.txt"), sentences, tags)
        metrics.write_report(os.path.join(output_dir, f"conlleval_{split}.txt"), evaluation)
        write_eval_results(os.path.join(output_dir, RESULTS[split]), results)
    print(f"***** {split} ({path}) *****\n{metrics.format_report(evaluation)}", flush=True)
    return results


def sentence_documents(texts: Sequence[str]) -> list[conll.ConllDocument]:
    """Each text as a document of one sentence, its words split at whitespace, tagged `O`."""
    return [conll.ConllDocument((conll.ConllSentence(tuple(
        conll.ConllToken(word, conll.OUTSIDE_TAG) for word in text.split()), number + 1),))
        for number, text in enumerate(texts)]


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
                             f"{os.path.join(model_folder(path), LABEL_FILE)})")
        return cls(loaded.model, tokenizer, labels, **kwargs)

    def __call__(self, texts: Sequence[str]) -> list[list[TaggedWord]]:
        """For each text, its words (split at whitespace) with their tags."""
        if not texts:
            return []
        found = ner_features.convert_documents_to_features(
            sentence_documents(texts), self.tokenizer, self.labels, self.max_seq_length,
            doc_stride=self.doc_stride)
        windowed = sum(len(set(rows[rows >= 0].tolist())) > 1 for rows in found.word_rows)
        if windowed:
            logging.info("%d of %d texts were longer than max_seq_length=%d: tagged in %d "
                         "windows, %d tokens apart", windowed, len(texts), self.max_seq_length,
                         len(found.input_ids) - len(texts) + windowed, self.doc_stride)
        tags, _ = tag(self.model, found, self.labels, self.batch_size, self.batching)
        return [[TaggedWord(word, word_tag) for word, word_tag in zip(text.split(), sentence_tags)]
                for text, sentence_tags in zip(texts, tags)]
