"""Exports a BERT checkpoint as SavedModels, or LiteRT models, that take raw text and tokenize it
in the graph.

    python export_savedmodel.py --input=classifier_output --output=export --max_seq_length=128
    python export_savedmodel.py --input=classifier_output --output=lite --format=litert \\
        --quantize=dynamic_int8

`--format=saved_model` (the default) writes three SavedModels under `--output`:
- `text_model/`: text -> the head's outputs (classifier probabilities and the label's name, a
  sigmoid per label and the names predicted for a multi-label classifier, SQuAD start/end logits
  with token offsets, token-classifier probabilities and tags, or the encoder's pooled and
  sequence outputs; the names are those the model was trained with: its model_spec.json's, else
  its label_list.txt's),
  each call padded to its longest text; `serving_embedding` -> a sentence vector (--pooling,
  --normalize; a sentence-transformers folder's own by default); with the masked-LM head,
  `serving_fill_mask` -> the --top_k tokens of each [MASK];
- `preprocessing/`: text -> `input_word_ids`, `input_mask`, `input_type_ids` (TF-Hub style);
- `encoder/`: those -> `pooled_output`, `sequence_output` (TF-Hub style).
`--format=litert` writes LiteRT (TFLite) models with the same signatures as `text_model/`
(`serving/litert.py`): `text_model.tflite` (the head's outputs), `embedding.tflite` (sentence
vectors) and, with the masked-LM head, `fill_mask.tflite`; each also takes token ids. Their
tokenizer is tensorflow-text's FastBertTokenizer, whose ops LiteRT runs; `--quantize` stores
their weights as float16 or int8.
The input may be in any checkpoint format (`convert_checkpoint.py`); `--output` must be absent or
empty and is written all or nothing.
"""
from utils import tensorflow_startup  # noqa: F401  (first: TensorFlow starts quietly)
from utils import entry_point

import os

from absl import flags
import tensorflow as tf

from checkpoint_flags import define_input_flags, read_input_model
from data import tokenization
from data.text_tokenizer import TextTokenizer
from modeling.models.encoder import encoder_of
from modeling.models.text_models import POOLINGS
from serving.litert import QUANTIZATIONS, LiteTextModel, export_litert
from serving.servers import EncoderServer, Preprocessor, TextModelServer
from tasks.embedding import read_sentence_transformers_folder
from tasks.text_model import saved_labels
from utils.output_files import atomic_output_folder, check_output_folder

FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "Checkpoint prefix or folder, in any format.")
flags.DEFINE_string("output", None, "Output folder (absent or empty).")
flags.DEFINE_integer("max_seq_length", 128, "Longest packed sequence; longer texts are "
                     "truncated. The text model pads each call to its longest text.")
flags.DEFINE_enum("pooling", None, list(POOLINGS), "serving_embedding's pooling: the last layer "
                  "at [CLS], the pooler output, or the mean or max over the tokens. Default: a "
                  "sentence-transformers folder's, else cls.")
flags.DEFINE_bool("normalize", None, "L2-normalise serving_embedding's vectors. Default: a "
                  "sentence-transformers folder's, else false.")
flags.DEFINE_integer("top_k", 5, "Tokens serving_fill_mask gives for each [MASK].")
flags.DEFINE_enum("format", "saved_model", ["saved_model", "litert"], "saved_model: three "
                  "SavedModels (text_model, preprocessing, encoder); litert: .tflite models of "
                  "text_model's signatures, for LiteRT (TFLite).")
flags.DEFINE_enum("quantize", "none", list(QUANTIZATIONS), "--format=litert: store the weights "
                  "as float32 (none), int8 with activations quantized on the fly "
                  "(dynamic_int8), or float16.")
define_input_flags(
    do_lower_case_help="Lower-case the input text; default: as the input says (hf, keras), "
                       "else True.",
    head_help="Head of a keras checkpoint written without model_spec.json.")
flags.mark_flags_as_required(["input", "output"])

TEXT_MODEL, PREPROCESSING, ENCODER = "text_model", "preprocessing", "encoder"


def main(_):
    if FLAGS.quantize != "none" and FLAGS.format != "litert":
        raise ValueError(f"--quantize={FLAGS.quantize} applies to --format=litert only")
    check_output_folder(FLAGS.output)
    loaded, do_lower_case = read_input_model()
    loaded.model.config.check_max_seq_length(FLAGS.max_seq_length, "--max_seq_length")
    tokenization.validate_case_matches_checkpoint(do_lower_case, FLAGS.input)
    sentence = read_sentence_transformers_folder(FLAGS.input) if os.path.isdir(FLAGS.input) \
        else None
    pooling = FLAGS.pooling or (sentence.pooling if sentence else "cls")
    normalize = (sentence.normalize if sentence else False) if FLAGS.normalize is None \
        else FLAGS.normalize
    # A classifier's or tagger's label names: model_spec.json's, else label_list.txt's.
    labels = loaded.labels or saved_labels(FLAGS.input)
    if FLAGS.format == "litert":
        module = LiteTextModel(loaded.model, loaded.vocab_file, do_lower_case,
                               FLAGS.max_seq_length, pooling, normalize, FLAGS.top_k,
                               labels=labels, problem_type=loaded.problem_type)
        with atomic_output_folder(FLAGS.output) as folder:
            written = export_litert(module, folder, FLAGS.quantize)
    else:
        written = _write_saved_models(loaded, do_lower_case, pooling, normalize, labels)
    print(f"wrote {FLAGS.output}: {', '.join(written)} ({loaded.spec.head} head, "
          f"max_seq_length={FLAGS.max_seq_length}, do_lower_case={do_lower_case})")


def _write_saved_models(loaded, do_lower_case: bool, pooling: str, normalize: bool,
                        labels) -> list[str]:
    """Writes the three SavedModels into --output; returns their names."""
    tokenizer = TextTokenizer(loaded.vocab_file, do_lower_case)
    modules = {
        TEXT_MODEL: TextModelServer(loaded.model, tokenizer, FLAGS.max_seq_length,
                                    loaded.vocab_file, pooling, normalize, FLAGS.top_k,
                                    labels=labels, problem_type=loaded.problem_type),
        PREPROCESSING: Preprocessor(tokenizer, FLAGS.max_seq_length, loaded.vocab_file),
        ENCODER: EncoderServer(encoder_of(loaded.model), loaded.vocab_file, do_lower_case),
    }
    with atomic_output_folder(FLAGS.output) as folder:
        for name, module in modules.items():
            try:
                tf.saved_model.save(module, os.path.join(folder, name),
                                    signatures=module.signatures())
            except tf.errors.OpError as error:  # the system's refusal (a full disk)
                raise OSError(f"writing {FLAGS.output}/{name} failed: {error.message}") from None
    return list(modules)


if __name__ == "__main__":
    entry_point.run(main)
