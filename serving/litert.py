"""LiteRT (TFLite) models that take raw text: the text model's signatures, for phones.

`LiteTextModel` is `serving.servers.TextModelServer` on `serving.lite_tokenizer.LiteTokenizer`,
whose ops all have LiteRT kernels (the built-in ones and tensorflow-text's), plus signatures that
take token ids. `export_litert` converts it into one `.tflite` file per use (`FILES`), each file
holding that use's signatures and only the weights they read:

- `text_model.tflite`: `serving_default(text)`, `serving_pair(text_a, text_b)` (SQuAD models:
  `serving_default(question, context)`) and `serving_ids(input_ids, input_mask, segment_ids)`
  -> the head's outputs, as the SavedModel's `text_model`;
- `embedding.tflite`: `serving_embedding`, `serving_embedding_pair`, `serving_embedding_ids`
  -> `embedding` [B, H];
- `fill_mask.tflite` (models with the masked-LM head): `serving_fill_mask(text)`,
  `serving_fill_mask_ids` -> the top tokens of each `[MASK]`.

Loading one needs tensorflow-text's kernels: `load_interpreter` below.
"""
from __future__ import annotations

import os
import tempfile
from typing import Sequence

import keras
import tensorflow as tf

from serving.lite_tokenizer import LiteTokenizer
from serving.servers import MASK, TextModelServer, concrete
from utils.encoder_inputs import ENCODER_INPUTS

QUANTIZATIONS = ("none", "dynamic_int8", "float16")
FILES = {
    "text_model": ("serving_default", "serving_pair", "serving_ids"),
    "embedding": ("serving_embedding", "serving_embedding_pair", "serving_embedding_ids"),
    "fill_mask": ("serving_fill_mask", "serving_fill_mask_ids"),
}
# The custom ops a converted model may hold: those tensorflow-text ships LiteRT kernels for
# (`tensorflow_text.core.pybinds.tflite_registrar.SELECT_TFTEXT_OPS`) that the tokenizer uses.
CUSTOM_OPS = ("FastBertNormalize", "FastWordpieceTokenizeWithOffsets",
              "TFText>ByteSplitWithOffsets")
_IDS = [tf.TensorSpec([None, None], tf.int32, name) for name in ENCODER_INPUTS]


class LiteTextModel(TextModelServer):
    """The text model's signatures in ops LiteRT runs, plus token-ids variants.

    Tokenization is tensorflow-text's `FastBertTokenizer` (`LiteTokenizer`); packing, offsets,
    the model, pooling and the fill-mask head are `TextModelServer`'s own code.
    """

    def __init__(self, model: keras.Model, vocab_file: str, do_lower_case: bool,
                 max_seq_length: int, pooling: str = "cls", normalize: bool = False,
                 top_k: int = 5, name: str | None = None, labels: Sequence[str] | None = None,
                 problem_type: str | None = None):
        super().__init__(model, LiteTokenizer(vocab_file, do_lower_case), max_seq_length,
                         vocab_file, pooling, normalize, top_k, name=name, labels=labels,
                         problem_type=problem_type)

    def _masked_ids(self, texts: tf.Tensor) -> tf.RaggedTensor:
        return self.tokenizer.tokenize_keeping(texts, MASK, self.mask_id)

    def signatures(self) -> dict[str, tf.types.experimental.ConcreteFunction]:
        signatures = super().signatures()
        def features(ids):
            return dict(zip(ENCODER_INPUTS, ids))
        ids_functions = {
            "serving_ids": lambda *ids: self._head_outputs(features(ids)),
            "serving_embedding_ids": lambda *ids: self._embedder(features(ids)),
        }
        if self._fill_mask is not None:
            ids_functions["serving_fill_mask_ids"] = lambda *ids: self._fill_masks_of(
                features(ids))
        for key, function in ids_functions.items():
            signatures[key] = concrete(function, *_IDS)
        return signatures


def export_litert(module: LiteTextModel, folder: str, quantize: str = "none") -> list[str]:
    """Writes `<file>.tflite` into `folder` for each of `FILES` the module has signatures for.

    Args:
        module: the model to convert.
        folder: an existing folder.
        quantize: "none" (float32), "dynamic_int8" (int8 weights, float activations quantized
            on the fly by the kernels that take them) or "float16" (float16 weights).

    Returns:
        The names of the files written.
    """
    if quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize must be one of {', '.join(QUANTIZATIONS)}, got {quantize!r}")
    signatures = module.signatures()
    written = []
    # The converter reads a SavedModel: one, written beside the outputs and removed after.
    with tempfile.TemporaryDirectory(dir=folder, prefix=".saved_model-") as saved_model:
        try:
            tf.saved_model.save(module, saved_model, signatures=signatures)
        except tf.errors.OpError as error:  # the system's refusal (a full disk)
            raise OSError(f"writing {saved_model} failed: {error.message}") from None
        for name, keys in FILES.items():
            present = [key for key in keys if key in signatures]
            if not present:
                continue
            flatbuffer = convert(saved_model, present, quantize)
            with open(os.path.join(folder, f"{name}.tflite"), "wb") as f:
                f.write(flatbuffer)
            written.append(f"{name}.tflite")
    return written


def convert(saved_model: str, signature_keys: list[str], quantize: str) -> bytes:
    """The LiteRT flatbuffer of a SavedModel's signatures, checked for ops LiteRT lacks."""
    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model, signature_keys)
    converter.allow_custom_ops = True  # tensorflow-text's, checked below
    if quantize != "none":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantize == "float16":
        converter.target_spec.supported_types = [tf.float16]
    flatbuffer = converter.convert()
    unknown = sorted(set(custom_ops(flatbuffer)) - set(CUSTOM_OPS))
    if unknown:
        raise ValueError(f"the LiteRT model of {', '.join(signature_keys)} needs ops without "
                         f"LiteRT kernels: {', '.join(unknown)}")
    return flatbuffer


def custom_ops(flatbuffer: bytes) -> list[str]:
    """The names of the custom (not built-in) ops of a LiteRT model."""
    from tensorflow.lite.tools import flatbuffer_utils  # pylint: disable=import-outside-toplevel
    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(flatbuffer))
    return [code.customCode.decode() for code in model.operatorCodes if code.customCode]


def load_interpreter(path: str, num_threads: int | None = None):
    """LiteRT's interpreter (the `ai-edge-litert` package) for a `.tflite` file, with
    tensorflow-text's kernels registered. Call `get_signature_runner(key)` on it."""
    # pylint: disable=import-outside-toplevel
    from ai_edge_litert.interpreter import InterpreterWithCustomOps
    from tensorflow_text.core.pybinds import tflite_registrar
    return InterpreterWithCustomOps(
        model_path=path, custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS,
        num_threads=num_threads)
