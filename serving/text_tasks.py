"""A model on new text, from Python: fill-mask, sentence vectors and the answers of fine-tuned
models (classifier, SQuAD, SWAG, NER), for any model the project reads (Google's TF1
checkpoints, this project's outputs, Hugging Face and sentence-transformers folders, Model
Garden and TF-Hub exports).

    from serving.text_tasks import FillMask, SentenceEmbedder, TextClassifier

    fill_mask = FillMask.from_checkpoint("uncased_L-12_H-768_A-12/bert_model.ckpt")
    fill_mask(["The capital of France is [MASK]."])     # per line, per [MASK]: top-5 tokens
    embedder = SentenceEmbedder.from_checkpoint("all-MiniLM-L6-v2")  # its own pooling
    vectors = embedder(["A man plays a guitar.", "first ||| second"])  # float32 [2, 384]
    classifier = TextClassifier.from_checkpoint("mrpc_output")          # run_classifier.py's
    classifier(["He said so. ||| So he said."])  # [Classified(label="1", probabilities={...})]
    QuestionAnswerer.from_checkpoint("squad_output")(["Who? ||| Ann wrote it."])  # [Answer]
    MultipleChoice.from_checkpoint("swag_output")(["ctx ||| e0 ||| e1 ||| e2 ||| e3"])
    EntityTagger.from_checkpoint("ner_output")(["EU rejects German call"])  # [[TaggedWord]]

A text is one example; `text_a ||| text_b` is a pair, as `extract_features.py` reads its lines.
Texts longer than `max_seq_length` are truncated as the original's `convert_single_example`
does (pairs: the longer side first), and counted in the log. The model is loaded once; each call
runs its texts in batches of similar lengths (`training.prediction`) and returns them in order.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Sequence

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from data import tokenization
from data.feature_extraction import ExtractionFeatures, convert_example, features_to_arrays, \
    text_example
from data.ner import conll as ner_conll, features as ner_features
from data.squad import features as squad_features
from data.squad.examples import SquadExample, split_context
from data.squad.predictions import RawResult, compute_predictions
from data.swag import examples as swag
from modeling import checkpoints
from modeling.encoder import encoder_of
from modeling.text_heads import POOLINGS, MaskedTokenPredictor, SentenceEncoder
from training import fine_tuning, prediction
from training.batching import ArrayExamples, Batching
from utils.json_files import read_json_object

MASK = "[MASK]"


@dataclasses.dataclass(frozen=True)
class TokenScore:
    """One candidate for a masked position."""

    token: str
    token_id: int
    probability: float


class _MaskKeepingTokenizer:
    """A FullTokenizer that keeps every literal `[MASK]` whole (its basic tokenizer would split
    it into `[`, `mask`, `]`), as transformers' tokenizers keep their special tokens."""

    def __init__(self, tokenizer: tokenization.FullTokenizer):
        self.tokenizer = tokenizer

    def tokenize(self, text: str) -> list[str]:
        first, *rest = text.split(MASK)
        tokens = self.tokenizer.tokenize(first)
        for piece in rest:
            tokens += [MASK, *self.tokenizer.tokenize(piece)]
        return tokens

    def convert_tokens_to_ids(self, tokens) -> list[int]:
        return self.tokenizer.convert_tokens_to_ids(tokens)


class _LengthRecorder:
    """A tokenizer that records how many tokens each text had, before any truncation."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.lengths: list[int] = []

    def tokenize(self, text: str) -> list[str]:
        tokens = self.tokenizer.tokenize(text)
        self.lengths.append(len(tokens))
        return tokens

    def convert_tokens_to_ids(self, tokens) -> list[int]:
        return self.tokenizer.convert_tokens_to_ids(tokens)


class _TextModel:
    """Texts -> features -> a model's per-example outputs, in order."""

    def __init__(self, model: keras.Model, tokenizer: tokenization.FullTokenizer,
                 max_seq_length: int, batch_size: int, batching: Batching):
        positions = model.config.max_position_embeddings
        if not 3 <= max_seq_length <= positions:
            raise ValueError(f"max_seq_length={max_seq_length} must be in [3, "
                             f"max_position_embeddings={positions}] of the model")
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be positive")
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.batching = batching

    def _features(self, texts: Sequence[str], tokenizer) -> list[ExtractionFeatures]:
        features, truncated = [], 0
        recorder = _LengthRecorder(tokenizer)
        for number, text in enumerate(texts):
            recorder.lengths.clear()
            feature = convert_example(text_example(number, text), self.max_seq_length, recorder)
            # [CLS] A [SEP], and B [SEP] where B has tokens.
            specials = 3 if len(recorder.lengths) > 1 and recorder.lengths[1] else 2
            truncated += sum(recorder.lengths) + specials > len(feature.tokens)
            features.append(feature)
        if truncated:
            logging.info("%d of %d texts were longer than max_seq_length=%d and were truncated",
                         truncated, len(texts), self.max_seq_length)
        return features

    def _predict(self, model: keras.Model, arrays: dict[str, np.ndarray]) -> dict:
        return prediction.predict(model, ArrayExamples(arrays, batching=self.batching),
                                  self.batch_size)


def _checked_lower_case(do_lower_case: bool | None, loaded: checkpoints.LoadedModel,
                        path: str) -> bool:
    """The casing given, else the one the model's folder records, else lower case; checked
    against the names of Google's releases."""
    if do_lower_case is None:
        do_lower_case = True if loaded.do_lower_case is None else loaded.do_lower_case
    tokenization.validate_case_matches_checkpoint(do_lower_case, path)
    return do_lower_case


def _read_fine_tuned(path: str, head: str, description: str, vocab_file: str | None,
                     bert_config_file: str | None, do_lower_case: bool | None
                     ) -> tuple[checkpoints.LoadedModel, tokenization.FullTokenizer]:
    """A fine-tuned model with `head` from `path` (a checkpoint, or a script's --output_dir
    holding `model.ckpt`) and its tokenizer.

    Raises:
        ValueError: the checkpoint holds another model.
    """
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, "model.ckpt.index")):
        path = os.path.join(path, "model.ckpt")
    loaded = checkpoints.read_model(path, bert_config_file=bert_config_file,
                                    vocab_file=vocab_file)
    if loaded.spec.head != head:
        raise ValueError(f"{path} holds a {loaded.spec.head} model, not a fine-tuned "
                         f"{description}")
    tokenizer = tokenization.FullTokenizer(loaded.vocab_file,
                                           _checked_lower_case(do_lower_case, loaded, path))
    return loaded, tokenizer


def _parts(text: str, layout: str) -> list[str]:
    """The `|||`-separated parts of `text`, as many as `layout` has.

    Raises:
        ValueError: another number of parts.
    """
    parts = [part.strip() for part in text.split("|||")]
    if len(parts) != layout.count("|||") + 1:
        raise ValueError(f"expected `{layout}`, found {len(parts)} part(s)")
    return parts


def _parsed(texts: Sequence[str], parse) -> dict[int, object]:
    """`parse(text)` of every non-empty text, by index; an error names the text."""
    parsed = {}
    for index, text in enumerate(texts):
        if text.strip():
            try:
                parsed[index] = parse(text)
            except ValueError as error:
                raise ValueError(f"texts[{index}]: {error}") from None
    return parsed


class FillMask(_TextModel):
    """Each `[MASK]` of each text, its most probable tokens under the masked-LM head.

    A word masked by several `[MASK]`s gets a prediction per piece, each on its own (as
    transformers' fill-mask pipeline); a text without `[MASK]` gets none.
    """

    def __init__(self, pretrainer: keras.Model, tokenizer: tokenization.FullTokenizer,
                 max_seq_length: int = 128, batch_size: int = 32,
                 batching: Batching = Batching()):
        super().__init__(pretrainer, tokenizer, max_seq_length, batch_size, batching)
        if MASK not in tokenizer.vocab:
            raise ValueError(f"the vocabulary has no {MASK} token")
        self.pretrainer = pretrainer
        self._predictors: dict[int, MaskedTokenPredictor] = {}

    @classmethod
    def from_checkpoint(cls, path: str, vocab_file: str | None = None,
                        bert_config_file: str | None = None, do_lower_case: bool | None = None,
                        **kwargs) -> "FillMask":
        """Reads a model with the masked-LM head from `path` (any format `read_model` reads).

        Raises:
            ValueError: the checkpoint has no masked-LM head.
        """
        loaded = checkpoints.read_model(path, bert_config_file=bert_config_file,
                                        vocab_file=vocab_file)
        if loaded.spec.head not in ("pretraining", "masked_lm"):
            raise ValueError(
                f"{path} holds a model without the masked-LM head ({loaded.spec.head} model, "
                f"no cls/predictions/*): fill-mask needs a checkpoint with the pretraining "
                f"heads, such as Google's bert_model.ckpt or run_pretraining.py's output")
        tokenizer = tokenization.FullTokenizer(loaded.vocab_file,
                                               _checked_lower_case(do_lower_case, loaded, path))
        return cls(loaded.model, tokenizer, **kwargs)

    def __call__(self, texts: Sequence[str], top_k: int = 5) -> list[list[list[TokenScore]]]:
        """For each text, for each of its `[MASK]`s in order, the `top_k` tokens, most probable
        first. A `[MASK]` cut off by max_seq_length has no entry."""
        features = self._features(texts, _MaskKeepingTokenizer(self.tokenizer))
        positions = [[i for i, token in enumerate(f.tokens) if token == MASK] for f in features]
        slots = max((len(p) for p in positions), default=0) or 1
        arrays = features_to_arrays(features)
        arrays["masked_lm_positions"] = np.array(
            [p + [0] * (slots - len(p)) for p in positions], np.int32).reshape(-1, slots)
        if top_k not in self._predictors:
            self._predictors[top_k] = MaskedTokenPredictor(self.pretrainer, top_k)
        outputs = self._predict(self._predictors[top_k], arrays) if features else {}
        results = []
        for row, row_positions in enumerate(positions):
            results.append([
                [TokenScore(self.tokenizer.inv_vocab[int(token_id)], int(token_id),
                            float(probability))
                 for token_id, probability in zip(outputs["token_ids"][row, slot],
                                                  outputs["probabilities"][row, slot])]
                for slot in range(len(row_positions))])
        return results


@dataclasses.dataclass(frozen=True)
class SentenceTransformersConfig:
    """What a sentence-transformers folder says about its model: where the transformer's files
    are, its pooling and normalisation, and its max_seq_length."""

    model_folder: str
    pooling: str
    normalize: bool
    max_seq_length: int | None


def read_sentence_transformers_folder(folder: str) -> SentenceTransformersConfig | None:
    """The configuration of a sentence-transformers folder (`modules.json`), None for others.

    Raises:
        ValueError: a module or pooling mode this project does not reproduce.
    """
    modules_file = os.path.join(folder, "modules.json")
    if not os.path.isfile(modules_file):
        return None
    with open(modules_file, encoding="utf-8") as f:
        try:
            modules = json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{modules_file}: not JSON ({error})") from None
    kinds = {module.get("type", "").rsplit(".", 1)[-1]: module.get("path", "")
             for module in modules}
    unknown = sorted(set(kinds) - {"Transformer", "Pooling", "Normalize"})
    if unknown or "Transformer" not in kinds:
        raise ValueError(f"{modules_file}: modules {unknown or 'without a Transformer'} are not "
                         f"supported (Transformer, Pooling and Normalize are)")
    pooling = "cls"
    if "Pooling" in kinds:
        config_file = os.path.join(folder, kinds["Pooling"], "config.json")
        modes = read_json_object(config_file, "sentence-transformers pooling config")
        chosen = [mode for mode in ("cls_token", "mean_tokens", "max_tokens",
                                    "mean_sqrt_len_tokens", "weightedmean_tokens",
                                    "lasttoken")
                  if modes.get(f"pooling_mode_{mode}")]
        if len(chosen) != 1 or chosen[0] not in ("cls_token", "mean_tokens", "max_tokens"):
            raise ValueError(f"{config_file}: pooling {chosen} is not supported (one of "
                             f"cls_token, mean_tokens, max_tokens is)")
        pooling = {"cls_token": "cls", "mean_tokens": "mean", "max_tokens": "max"}[chosen[0]]
    model_folder = os.path.join(folder, kinds["Transformer"])
    bert_config = os.path.join(model_folder, "sentence_bert_config.json")
    max_seq_length = read_json_object(bert_config).get("max_seq_length") \
        if os.path.isfile(bert_config) else None
    return SentenceTransformersConfig(model_folder, pooling, "Normalize" in kinds,
                                      max_seq_length)


class SentenceEmbedder(_TextModel):
    """One vector per text (or pair): float32 [N, H], pooled as `pooling` (see
    `modeling.text_heads.POOLINGS`), L2-normalised if `normalize`."""

    def __init__(self, encoder: keras.Model, tokenizer: tokenization.FullTokenizer,
                 pooling: str = "cls", normalize: bool = False, max_seq_length: int = 128,
                 batch_size: int = 32, batching: Batching = Batching()):
        super().__init__(encoder, tokenizer, max_seq_length, batch_size, batching)
        self.model = SentenceEncoder(encoder, pooling, normalize)

    @classmethod
    def from_checkpoint(cls, path: str, pooling: str | None = None,
                        normalize: bool | None = None, max_seq_length: int | None = None,
                        vocab_file: str | None = None, bert_config_file: str | None = None,
                        do_lower_case: bool | None = None, **kwargs) -> "SentenceEmbedder":
        """Reads the encoder of any model at `path`. A sentence-transformers folder brings its
        own pooling, normalisation and max_seq_length; arguments given override them (the
        defaults elsewhere: [CLS], not normalised, 128)."""
        found = read_sentence_transformers_folder(path) if os.path.isdir(path) else None
        if found is not None:
            logging.info("sentence-transformers folder %s: %s pooling%s, max_seq_length %s",
                         path, found.pooling, ", normalised" if found.normalize else "",
                         found.max_seq_length)
        loaded = checkpoints.read_model(found.model_folder if found else path,
                                        bert_config_file=bert_config_file, vocab_file=vocab_file)
        encoder = encoder_of(loaded.model)
        tokenizer = tokenization.FullTokenizer(loaded.vocab_file,
                                               _checked_lower_case(do_lower_case, loaded, path))
        if max_seq_length is None:
            max_seq_length = (found and found.max_seq_length) or 128
        max_seq_length = min(max_seq_length, encoder.config.max_position_embeddings)
        return cls(encoder, tokenizer,
                   pooling=pooling or (found.pooling if found else "cls"),
                   normalize=(found.normalize if found else False) if normalize is None
                   else normalize,
                   max_seq_length=max_seq_length, **kwargs)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        features = self._features(texts, self.tokenizer)
        if not features:
            return np.zeros((0, self.model.encoder.config.hidden_size), np.float32)
        return self._predict(self.model, features_to_arrays(features))["embedding"]


@dataclasses.dataclass(frozen=True)
class Classified:
    """A classifier's answer for one text: the most probable label and every label's
    probability; for a regression model (STS-B), `prediction` alone."""

    label: str | None
    probabilities: dict[str, float] | None
    prediction: float | None = None


class TextClassifier(_TextModel):
    """A sentence (pair) classifier's answers, with the label names the model was saved with
    (`run_classifier.py` writes them into `model_spec.json`; without them, labels are their
    ids)."""

    def __init__(self, model: keras.Model, tokenizer: tokenization.FullTokenizer,
                 labels: Sequence[str] | None = None, max_seq_length: int = 128,
                 batch_size: int = 32, batching: Batching = Batching()):
        super().__init__(model, tokenizer, max_seq_length, batch_size, batching)
        self.model = model
        self.labels = tuple(labels) if labels else tuple(str(i) for i in range(model.num_labels))
        if len(self.labels) != model.num_labels:
            raise ValueError(f"{len(self.labels)} label names for a classifier of "
                             f"{model.num_labels} labels")

    @classmethod
    def from_checkpoint(cls, path: str, vocab_file: str | None = None,
                        bert_config_file: str | None = None, do_lower_case: bool | None = None,
                        **kwargs) -> "TextClassifier":
        """Reads a fine-tuned classifier (e.g. run_classifier.py's --output_dir).

        Raises:
            ValueError: the checkpoint holds no classifier head.
        """
        loaded, tokenizer = _read_fine_tuned(
            path, "classifier", "classifier (output_weights [labels, H] at the root scope)",
            vocab_file, bert_config_file, do_lower_case)
        if loaded.labels is None and loaded.spec.num_labels > 1:
            logging.warning("%s has no label names (model_spec.json): labels are their ids",
                            path)
        return cls(loaded.model, tokenizer, loaded.labels, **kwargs)

    def __call__(self, texts: Sequence[str]) -> list[Classified]:
        features = self._features(texts, self.tokenizer)
        if not features:
            return []
        logits = self._predict(self.model, features_to_arrays(features))["logits"]
        if self.model.num_labels == 1:
            return [Classified(None, None, float(value)) for value in logits[:, 0]]
        probabilities = tf.nn.softmax(logits, axis=-1).numpy()
        return [Classified(self.labels[int(np.argmax(row))],
                           dict(zip(self.labels, (float(p) for p in row))))
                for row in probabilities]


@dataclasses.dataclass(frozen=True)
class Answer:
    """A span model's answer to one question: its text ("" when SQuAD v2.0's rule finds none),
    and the n-best entry's probability and logits, as `nbest_predictions.json` has them."""

    text: str
    probability: float
    start_logit: float
    end_logit: float


class QuestionAnswerer(_TextModel):
    """`question ||| context` -> the answer span, by `run_squad.py --do_predict`'s rules: the
    context in windows of `doc_stride`, the best of `n_best_size` spans of at most
    `max_answer_length` pieces, mapped back to the context's own words."""

    def __init__(self, model: keras.Model, tokenizer: tokenization.FullTokenizer,
                 do_lower_case: bool, max_seq_length: int = 384, doc_stride: int = 128,
                 max_query_length: int = 64, n_best_size: int = 20, max_answer_length: int = 30,
                 version_2_with_negative: bool = False, null_score_diff_threshold: float = 0.0,
                 batch_size: int = 32, batching: Batching = Batching()):
        super().__init__(model, tokenizer, max_seq_length, batch_size, batching)
        if max_seq_length <= max_query_length + 3:
            raise ValueError(f"max_seq_length={max_seq_length} leaves no room for the context "
                             f"after max_query_length={max_query_length}")
        self.model = model
        self.windows = dict(max_seq_length=max_seq_length, doc_stride=doc_stride,
                            max_query_length=max_query_length)
        self.answer_rules = dict(n_best_size=n_best_size, max_answer_length=max_answer_length,
                                 do_lower_case=do_lower_case,
                                 version_2_with_negative=version_2_with_negative,
                                 null_score_diff_threshold=null_score_diff_threshold)

    @classmethod
    def from_checkpoint(cls, path: str, vocab_file: str | None = None,
                        bert_config_file: str | None = None, do_lower_case: bool | None = None,
                        **kwargs) -> "QuestionAnswerer":
        """Reads a fine-tuned SQuAD model (e.g. run_squad.py's --output_dir)."""
        loaded, tokenizer = _read_fine_tuned(
            path, "squad", "SQuAD model (cls/squad/output_weights)", vocab_file,
            bert_config_file, do_lower_case)
        return cls(loaded.model, tokenizer, tokenizer.basic_tokenizer.do_lower_case, **kwargs)

    @staticmethod
    def parse(text: str) -> tuple[str, str]:
        """(question, context) of `question ||| context`; raises ValueError for other texts."""
        question, context = _parts(text, "question ||| context")
        return question, context

    def __call__(self, texts: Sequence[str]) -> list[Answer | None]:
        """One answer per text; None for an empty text.

        Raises:
            ValueError: a text is not `question ||| context`.
        """
        examples = [SquadExample(str(index), question, split_context(context)[0])
                    for index, (question, context) in _parsed(texts, self.parse).items()]
        if not examples:
            return [None] * len(texts)
        features = list(squad_features.convert_examples_to_features(
            examples, self.tokenizer, is_training=False, **self.windows))
        arrays = squad_features.features_to_arrays(features, is_training=False)
        logits = fine_tuning.predict_spans(self.model, arrays, self.batch_size, self.batching)
        results = [RawResult(int(unique_id), start, end) for unique_id, start, end in
                   zip(arrays["unique_ids"], logits["start_logits"], logits["end_logits"])]
        found = compute_predictions(examples, features, results, **self.answer_rules)
        answers: list[Answer | None] = [None] * len(texts)
        for example in examples:
            text = found.predictions[example.qas_id]
            entry = next(e for e in found.nbest[example.qas_id] if e["text"] == text)
            answers[int(example.qas_id)] = Answer(text, entry["probability"],
                                                  entry["start_logit"], entry["end_logit"])
        return answers


@dataclasses.dataclass(frozen=True)
class Choice:
    """A multiple-choice model's answer: the most probable ending's index and every ending's
    probability."""

    prediction: int
    probabilities: list[float]


class MultipleChoice(_TextModel):
    """`context ||| ending ||| ending ||| ending ||| ending` -> the most probable ending, as
    `run_swag.py` scores SWAG's four (each line's endings continue its context; SWAG's `sent2`
    is the start of every ending)."""

    def __init__(self, model: keras.Model, tokenizer: tokenization.FullTokenizer,
                 max_seq_length: int = 128, batch_size: int = 32,
                 batching: Batching = Batching()):
        super().__init__(model, tokenizer, max_seq_length, batch_size, batching)
        self.model = model

    @classmethod
    def from_checkpoint(cls, path: str, vocab_file: str | None = None,
                        bert_config_file: str | None = None, do_lower_case: bool | None = None,
                        **kwargs) -> "MultipleChoice":
        """Reads a fine-tuned multiple-choice model (e.g. run_swag.py's --output_dir)."""
        loaded, tokenizer = _read_fine_tuned(
            path, "multiple_choice", "multiple-choice model (cls/multiple_choice/output_weights)",
            vocab_file, bert_config_file, do_lower_case)
        return cls(loaded.model, tokenizer, **kwargs)

    @staticmethod
    def parse(text: str) -> tuple[str, tuple[str, ...]]:
        """(context, endings) of `context ||| ending ||| ...`; raises ValueError unless there
        are four endings."""
        context, *endings = _parts(text, "context" + " ||| ending" * swag.NUM_CHOICES)
        return context, tuple(endings)

    def __call__(self, texts: Sequence[str]) -> list[Choice | None]:
        """One answer per text; None for an empty text.

        Raises:
            ValueError: a text is not a context and four endings.
        """
        parsed = _parsed(texts, self.parse)
        examples = [swag.SwagExample(str(index), context, "", endings, None)
                    for index, (context, endings) in parsed.items()]
        answers: list[Choice | None] = [None] * len(texts)
        if not examples:
            return answers
        arrays = swag.convert_examples_to_arrays(examples, self.tokenizer, self.max_seq_length)
        logits = self._predict(self.model, arrays)["logits"]
        for index, row in zip(parsed, tf.nn.softmax(logits, axis=-1).numpy()):
            answers[index] = Choice(int(np.argmax(row)), [float(p) for p in row])
        return answers


@dataclasses.dataclass(frozen=True)
class TaggedWord:
    """One word of a tagged sentence and its tag (IOB2, as `run_ner.py` writes them)."""

    word: str
    tag: str


class EntityTagger(_TextModel):
    """A sentence, its words split at whitespace -> each word's tag, as `run_ner.py` (fine-tuned,
    not `--feature_based`) tags a CoNLL-2003 sentence on its own: the tag predicted at the
    word's first piece, `O` for a word cut off by max_seq_length."""

    def __init__(self, model: keras.Model, tokenizer: tokenization.FullTokenizer,
                 labels: Sequence[str], max_seq_length: int = 128, batch_size: int = 32,
                 batching: Batching = Batching()):
        super().__init__(model, tokenizer, max_seq_length, batch_size, batching)
        if len(labels) != model.num_labels:
            raise ValueError(f"{len(labels)} labels for a tagger of {model.num_labels}")
        self.model = model
        self.labels = tuple(labels)

    @classmethod
    def from_checkpoint(cls, path: str, vocab_file: str | None = None,
                        bert_config_file: str | None = None, do_lower_case: bool | None = None,
                        **kwargs) -> "EntityTagger":
        """Reads a fine-tuned tagger (e.g. run_ner.py's --output_dir) and its labels: those of
        `model_spec.json`, else the `label_list.txt` run_ner.py writes beside the model.

        Raises:
            ValueError: the checkpoint holds no tagger, or its labels are nowhere.
        """
        loaded, tokenizer = _read_fine_tuned(
            path, "token_classifier", "tagger (cls/token_classifier/output_weights)",
            vocab_file, bert_config_file, do_lower_case)
        labels = loaded.labels
        label_file = os.path.join(path if os.path.isdir(path) else os.path.dirname(path),
                                  ner_conll.LABEL_FILE)
        if labels is None and os.path.isfile(label_file):
            with open(label_file, encoding="utf-8") as f:
                labels = [line.strip() for line in f if line.strip()]
        if labels is None:
            raise ValueError(f"{path}: no labels (model_spec.json, or {label_file})")
        return cls(loaded.model, tokenizer, labels, **kwargs)

    def __call__(self, texts: Sequence[str]) -> list[list[TaggedWord]]:
        """For each text, its words (split at whitespace) with their tags."""
        if not texts:
            return []
        documents = [ner_conll.ConllDocument((ner_conll.ConllSentence(tuple(
            ner_conll.ConllToken(word, "", "", ner_conll.OUTSIDE_TAG) for word in text.split()),
            number + 1),)) for number, text in enumerate(texts)]
        features = ner_features.convert_documents_to_features(
            documents, self.tokenizer, self.labels, self.max_seq_length)
        cut = sum(bool((positions < 0).any()) for positions in features.word_positions)
        if cut:
            logging.info("%d of %d texts were longer than max_seq_length=%d: the words past it "
                         "are tagged O", cut, len(texts), self.max_seq_length)
        logits = self._predict(self.model, features.to_arrays())["logits"]
        tags = ner_features.predicted_word_tags(features, np.argmax(logits, -1), self.labels)
        return [[TaggedWord(word, tag) for word, tag in zip(text.split(), sentence_tags)]
                for text, sentence_tags in zip(texts, tags)]


__all__ = ["Answer", "Choice", "Classified", "EntityTagger", "FillMask", "MASK", "POOLINGS",
           "MultipleChoice", "QuestionAnswerer", "SentenceEmbedder", "TaggedWord",
           "TextClassifier", "TokenScore", "read_sentence_transformers_folder"]
