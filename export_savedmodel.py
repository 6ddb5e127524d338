"""Exports a BERT checkpoint as SavedModels that take raw text and tokenize it in the graph.

    python export_savedmodel.py --input=classifier_output --output=export --max_seq_length=128

Writes three SavedModels under `--output`:
- `text_model/`: text -> the head's outputs (classifier probabilities, SQuAD start/end logits with
  token offsets, token-classifier probabilities, or the encoder's pooled and sequence outputs);
- `preprocessing/`: text -> `input_word_ids`, `input_mask`, `input_type_ids` (TF-Hub style);
- `encoder/`: those -> `pooled_output`, `sequence_output` (TF-Hub style).
The input may be in any checkpoint format (`convert_checkpoint.py`); `--output` must be absent or
empty and is written all or nothing.
"""
import os

from absl import app, flags
import tensorflow as tf

from checkpoint_flags import define_input_flags, read_input_model
from data import tokenization
from data.text_tokenizer import TextTokenizer
from serving.servers import EncoderServer, Preprocessor, TextModelServer
from utils.output_files import atomic_output_folder, check_output_folder

FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "Checkpoint prefix or folder, in any format.")
flags.DEFINE_string("output", None, "Output folder (absent or empty).")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the packed inputs.")
define_input_flags(
    do_lower_case_help="Lower-case the input text; default: as the input says (hf, keras), "
                       "else True.",
    head_help="Head of a keras checkpoint written without model_spec.json.")
flags.mark_flags_as_required(["input", "output"])

TEXT_MODEL, PREPROCESSING, ENCODER = "text_model", "preprocessing", "encoder"


def main(_):
    check_output_folder(FLAGS.output)
    loaded, do_lower_case = read_input_model()
    config = loaded.model.config
    if not 3 <= FLAGS.max_seq_length <= config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={FLAGS.max_seq_length} must be in [3, "
                         f"max_position_embeddings={config.max_position_embeddings}]")
    tokenization.validate_case_matches_checkpoint(do_lower_case, FLAGS.input)
    tokenizer = TextTokenizer(loaded.vocab_file, do_lower_case)
    encoder = getattr(loaded.model, "encoder", loaded.model)
    modules = {
        TEXT_MODEL: TextModelServer(loaded.model, tokenizer, FLAGS.max_seq_length,
                                    loaded.vocab_file),
        PREPROCESSING: Preprocessor(tokenizer, FLAGS.max_seq_length, loaded.vocab_file),
        ENCODER: EncoderServer(encoder, loaded.vocab_file, do_lower_case),
    }
    with atomic_output_folder(FLAGS.output) as folder:
        for name, module in modules.items():
            tf.saved_model.save(module, os.path.join(folder, name),
                                signatures=module.signatures())
    print(f"wrote {FLAGS.output}: {', '.join(modules)} ({loaded.spec.head} head, "
          f"max_seq_length={FLAGS.max_seq_length}, do_lower_case={do_lower_case})")


if __name__ == "__main__":
    app.run(main)
