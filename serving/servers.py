"""SavedModel serving modules: raw text in, the task's outputs out, tokenization in the graph.

The tokenizer is `data.text_tokenizer.TextTokenizer` (WordPiece in the graph, with offsets).

- `TextModelServer`: one SavedModel from text to the head's outputs (classifier probabilities,
  SQuAD start/end logits, token-classifier probabilities, or the encoder's pooled and sequence
  outputs), with each token's character offsets in its text; a sentence vector for every model,
  and for a model with the masked-LM head the top tokens of each `[MASK]`.
- `Preprocessor` and `EncoderServer`: the TF-Hub-style pair; text -> `input_word_ids`,
  `input_mask`, `input_type_ids`, and those -> `pooled_output`, `sequence_output`.

Texts longer than `max_seq_length` are truncated as the original `convert_single_example` does
(pairs: the longer side first); SQuAD serving scores one window, without the document stride.
"""
from __future__ import annotations

from typing import Sequence

import keras
import tensorflow as tf

from data import tokenization
from data.text_tokenizer import TextTokenizer
from modeling.checkpoints import model_spec
from data.segment_layout import SegmentLayout
from modeling.models.encoder import encoder_of
from modeling.models.pretrainer import BertPretrainer
from modeling.models.text_models import MaskedTokenPredictor, SentenceEncoder

TEXT = tf.TensorSpec([None], tf.string)
MASK = tokenization.MASK
_HUB_NAMES = (("input_word_ids", "input_ids"), ("input_mask", "input_mask"),
              ("input_type_ids", "segment_ids"))


class _UntrackedModel:
    """Calls a Keras model without the module tracking it; the module holds its tf.Variables.

    Keras 3 variables wrap tf.Variables. A SavedModel that tracks the Keras model stores every
    weight once per wrapper and is not restorable by TF1-style loaders (TF Serving,
    `saved_model_cli run`, the C++ and Java APIs); one that tracks the tf.Variables is, once.
    """

    def __init__(self, model: keras.Model):
        self._model = model
        self.variables = [variable.value for variable in model.weights]

    def __call__(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return self._model(features, training=False)


def packed_offsets(features: dict[str, tf.Tensor], first: tf.RaggedTensor,
                   second: tf.RaggedTensor | None) -> tf.Tensor:
    """Lays per-token values of the segments out as the packed `[CLS] A [SEP] B [SEP]`.

    How many tokens of each segment were kept is read off the packed features, so the layout is
    the packer's whatever its truncation rule. Dense ops only, so that LiteRT runs it too.

    Args:
        features: packed `input_mask`, `segment_ids`, int32 [B, T].
        first, second: RaggedTensors [B, (tokens)] of segments A and B (B may be None), of one
            dtype (int64 offsets).

    Returns:
        [B, T] of the values' dtype: the values at their token's position; -1 at [CLS], [SEP]
        and padding.
    """
    real = features["input_mask"] > 0
    def count(segment):
        return tf.reduce_sum(tf.cast(real & (features["segment_ids"] == segment), tf.int32), 1)
    first_kept, second_length = count(0) - 2, count(1)
    second_starts = tf.zeros_like(first_kept) if second is None else second.row_starts()
    layout = SegmentLayout.build(first_kept, tf.maximum(second_length - 1, 0), first.row_starts(),
                                 second_starts, tf.shape(features["input_mask"])[1])
    return layout.place(first.flat_values, None if second is None else second.flat_values,
                        -1, -1, -1)


def mask_positions(input_ids: tf.Tensor, mask_id: int) -> tf.Tensor:
    """int32 [B, P]: the positions of `mask_id` in each row of int32 [B, T] `input_ids`, in order,
    -1 past a row's masks; P is the most masks of a row, at least 1."""
    is_mask = input_ids == mask_id                                          # [B, T]
    rank = tf.cumsum(tf.cast(is_mask, tf.int32), axis=1, exclusive=True)    # [B, T]
    slots = tf.maximum(tf.reduce_max(tf.reduce_sum(tf.cast(is_mask, tf.int32), 1)), 1)
    slot = tf.range(slots)[tf.newaxis, :, tf.newaxis]                       # [1, P, 1]
    # expand_dims rather than [:, tf.newaxis]: LiteRT runs it (modeling/layers/attention.py).
    hit = tf.expand_dims(is_mask, 1) & (tf.expand_dims(rank, 1) == slot)    # [B, P, T]
    positions = tf.range(tf.shape(input_ids)[1])[tf.newaxis, tf.newaxis]    # [1, 1, T]
    return tf.reduce_max(tf.where(hit, positions, -1), axis=2)


def concrete(function, *specs: tf.TensorSpec) -> tf.types.experimental.ConcreteFunction:
    """`function` traced for one signature, whose inputs are named after its arguments. Without
    autograph: the serving code and the model use TensorFlow's control flow ops themselves, and
    converting them would only slow the export."""
    return tf.function(function, input_signature=list(specs),
                       autograph=False).get_concrete_function()


class _TextModule(tf.Module):
    """Tokenizes and packs one or two texts, keeping each token's offsets."""

    def __init__(self, tokenizer: TextTokenizer, max_seq_length: int, vocab_file: str,
                 pad_to_longest: bool, name: str | None = None):
        super().__init__(name=name)
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.pad_to_longest = pad_to_longest
        # As TF-Hub BERT modules: the vocabulary travels as an asset, the casing as a variable.
        self.vocab_file = tf.saved_model.Asset(vocab_file)
        self.do_lower_case = tf.Variable(tokenizer.do_lower_case, trainable=False)

    def _features(self, first: tf.Tensor, second: tf.Tensor | None = None):
        """Packed features and [B, T] token offsets of text(s) tf.string [B]."""
        ids, begin, end = self.tokenizer.tokenize_with_offsets(first)
        second_ids = second_begin = second_end = None
        if second is not None:
            second_ids, second_begin, second_end = self.tokenizer.tokenize_with_offsets(second)
        features = self.tokenizer.pack(ids, second_ids, self.max_seq_length, self.pad_to_longest)
        offsets = {"token_begin": packed_offsets(features, begin, second_begin),
                   "token_end": packed_offsets(features, end, second_end)}
        return features, offsets


class Preprocessor(_TextModule):
    """Text -> `input_word_ids`, `input_mask`, `input_type_ids` int32 [B, max_seq_length], the
    fixed shapes of TF-Hub's BERT preprocessors."""

    def __init__(self, tokenizer: TextTokenizer, max_seq_length: int, vocab_file: str,
                 name: str | None = None):
        super().__init__(tokenizer, max_seq_length, vocab_file, pad_to_longest=False, name=name)

    def _hub_features(self, first, second=None):
        features, _ = self._features(first, second)
        return {hub: features[key] for hub, key in _HUB_NAMES}

    def signatures(self) -> dict[str, tf.types.experimental.ConcreteFunction]:
        return {"serving_default": concrete(lambda text: self._hub_features(text), TEXT),
                "serving_pair": concrete(lambda text_a, text_b: self._hub_features(text_a, text_b),
                                         TEXT, TEXT)}


class EncoderServer(tf.Module):
    """`input_word_ids`, `input_mask`, `input_type_ids` -> `pooled_output`, `sequence_output`."""

    def __init__(self, encoder: keras.Model, vocab_file: str, do_lower_case: bool,
                 name: str | None = None):
        super().__init__(name=name)
        untracked = _UntrackedModel(encoder)
        self._encoder = untracked
        self.encoder_variables = untracked.variables
        self.vocab_file = tf.saved_model.Asset(vocab_file)
        self.do_lower_case = tf.Variable(do_lower_case, trainable=False)

    def _encode(self, input_word_ids, input_mask, input_type_ids):
        outputs = self._encoder({"input_ids": input_word_ids, "input_mask": input_mask,
                                 "segment_ids": input_type_ids})
        return {"pooled_output": outputs["pooled_output"], "default": outputs["pooled_output"],
                "sequence_output": outputs["sequence_output"]}

    def signatures(self) -> dict[str, tf.types.experimental.ConcreteFunction]:
        spec = [tf.TensorSpec([None, None], tf.int32, name) for name, _ in _HUB_NAMES]
        return {"serving_default": concrete(self._encode, *spec)}


class TextModelServer(_TextModule):
    """Text -> the outputs of a model's head, plus `input_mask`, `segment_ids` and the code-point
    offsets `token_begin`/`token_end` [B, T] of each token in its text (-1 for special tokens).

    T is the longest packed text of the call (at most `max_seq_length`): each call is padded to
    its own longest text, not to `max_seq_length`.

    Signatures: SQuAD `serving_default(question, context)`; other heads `serving_default(text)`
    and `serving_pair(text_a, text_b)`. Every model also has `serving_embedding(text)` and
    `serving_embedding_pair(text_a, text_b)` -> `embedding` [B, H] (pooled as `pooling`, see
    `modeling.models.text_models`), and a model with the masked-LM head `serving_fill_mask(text)`
    -> for each `[MASK]` of the text, `mask_positions` [B, P] (-1 past the text's masks),
    `token_ids`, `tokens` and `probabilities` [B, P, top_k]. A multiple-choice model has no text
    signature.

    With `labels` (the names the model was trained with, by id), a classifier also gives `label`
    [B], the most probable label's name, and a tagger `tags` [B, T]; a multi-label classifier
    (`problem_type`) gives a sigmoid per label as `probabilities` and `labels` [B, K], each label's
    name where its probability reaches 0.5, "" elsewhere.
    """

    def __init__(self, model: keras.Model, tokenizer: TextTokenizer, max_seq_length: int,
                 vocab_file: str, pooling: str = "cls", normalize: bool = False,
                 top_k: int = 5, name: str | None = None, labels: Sequence[str] | None = None,
                 problem_type: str | None = None):
        super().__init__(tokenizer, max_seq_length, vocab_file, pad_to_longest=True, name=name)
        self.spec = model_spec(model)
        self.multi_label = problem_type == "multi_label"
        # Index 0 is "", for a multi-label model's labels not predicted.
        self.label_names = None if not labels else tf.constant(["", *labels])
        if self.spec.head == "multiple_choice":
            raise ValueError("a multiple-choice model has no text serving signature")
        # The pretraining heads need masked positions: a pretrainer serves its encoder.
        untracked = _UntrackedModel(model.encoder if isinstance(model, BertPretrainer) else model)
        self._model = untracked
        self.model_variables = untracked.variables
        self._embedder = _UntrackedModel(SentenceEncoder(encoder_of(model), pooling, normalize))
        self._fill_mask = None
        if isinstance(model, BertPretrainer):
            self._fill_mask = _UntrackedModel(MaskedTokenPredictor(model, top_k))
            self.head_variables = self._fill_mask.variables
            vocab = tokenization.load_vocab(vocab_file)
            if MASK not in vocab:
                raise ValueError(f"vocab file {vocab_file} has no {MASK} token")
            by_id = {index: token for token, index in vocab.items()}
            self.vocabulary = tf.constant([by_id.get(i, "") for i in range(max(by_id) + 1)])
            self.mask_id = vocab[MASK]

    def _head_outputs(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        outputs = self._model(features)
        head, num_labels = self.spec.head, self.spec.num_labels
        if head in ("encoder", "pretraining", "masked_lm"):
            return {k: outputs[k] for k in ("pooled_output", "sequence_output")}
        if head == "squad":
            return {k: outputs[k] for k in ("start_logits", "end_logits")}
        logits = outputs["logits"]
        if num_labels == 1 and not self.multi_label:
            return {"logits": logits, "predictions": logits[..., 0]}
        if self.multi_label:
            probabilities = tf.sigmoid(logits)
            found = {"logits": logits, "probabilities": probabilities}
            if self.label_names is not None:
                ids = tf.range(1, num_labels + 1)
                found["labels"] = tf.gather(self.label_names,
                                            tf.where(probabilities >= 0.5, ids, 0))
            return found
        found = {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}
        if self.label_names is not None:
            found["tags" if head == "token_classifier" else "label"] = tf.gather(
                self.label_names, tf.argmax(logits, axis=-1, output_type=tf.int32) + 1)
        return found

    def _serve(self, first, second=None):
        features, offsets = self._features(first, second)
        return {**self._head_outputs(features), **offsets, "input_mask": features["input_mask"],
                "segment_ids": features["segment_ids"]}

    def _embed(self, first, second=None):
        features, _ = self._features(first, second)
        return self._embedder(features)

    def _masked_ids(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Wordpiece ids of texts whose literal `[MASK]`s stay whole, int32 [B, (tokens)]."""
        pieces = tf.strings.split(texts, MASK)                             # [B, (masks + 1)]
        ids = self.tokenizer.tokenize(pieces.flat_values).with_row_splits_dtype(tf.int64)
        index = tf.range(tf.size(pieces.flat_values, out_type=tf.int64)) - tf.gather(
            pieces.row_starts(), pieces.value_rowids())
        followed = index < tf.gather(pieces.row_lengths(), pieces.value_rowids()) - 1
        masks = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(followed, tf.int32))], self.mask_id),
            tf.cast(followed, tf.int64))
        with_masks = tf.concat([ids, masks], axis=1)
        return tf.RaggedTensor.from_row_splits(with_masks, pieces.row_splits).merge_dims(1, 2)

    def _fill_masks(self, texts):
        features = self.tokenizer.pack(self._masked_ids(texts), None, self.max_seq_length,
                                       pad_to_longest=True)
        return self._fill_masks_of(features)

    def _fill_masks_of(self, features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The top tokens of each `[MASK]` of packed features (int32 [B, T] each)."""
        positions = mask_positions(features["input_ids"], self.mask_id)     # [B, P]
        outputs = self._fill_mask({**features,
                                   "masked_lm_positions": tf.maximum(positions, 0)})
        return {"mask_positions": positions,
                "token_ids": outputs["token_ids"], "probabilities": outputs["probabilities"],
                "tokens": tf.gather(self.vocabulary, outputs["token_ids"])}

    def signatures(self) -> dict[str, tf.types.experimental.ConcreteFunction]:
        signatures = {
            "serving_embedding": concrete(lambda text: self._embed(text), TEXT),
            "serving_embedding_pair": concrete(lambda text_a, text_b: self._embed(text_a, text_b),
                                               TEXT, TEXT)}
        if self._fill_mask is not None:
            signatures["serving_fill_mask"] = concrete(lambda text: self._fill_masks(text), TEXT)
        if self.spec.head == "squad":
            return {"serving_default": concrete(
                lambda question, context: self._serve(question, context), TEXT, TEXT),
                **signatures}
        return {"serving_default": concrete(lambda text: self._serve(text), TEXT),
                "serving_pair": concrete(lambda text_a, text_b: self._serve(text_a, text_b),
                                         TEXT, TEXT), **signatures}
