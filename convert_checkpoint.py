"""Converts a BERT checkpoint between Google's TF1 format, this project's format, Hugging Face,
Model Garden and KerasHub (TF-Hub encoder SavedModels are read too).

    python convert_checkpoint.py --input=$BERT_DIR/bert_model.ckpt --output=bert_hf --to=hf

The input format (`tf1`, `keras`, `hf`, `model_garden`, `tf_hub` or `keras_hub`) is detected and
said; `--input_format` overrides it. The head (pretraining, classifier, SQuAD span, ...) travels
with the encoder; weights come out bit-identical. A KerasHub preset holds the encoder and a
classifier only: pretraining heads are dropped with a warning, other heads refused. The output
folder must be absent or empty and is written all or nothing.

--vocab_extension (the vocab_extension.json `build_vocab.py --extend_vocab` writes) starts the
rows of the words it put in the released vocabulary's [unusedN] slots, in the word embeddings and
the masked-LM output bias, as the means of their pieces' rows; pass the extended vocab.txt as
--vocab_file, which the output then holds:

    python convert_checkpoint.py --input=$BERT_DIR/bert_model.ckpt --output=bert_domain --to=tf1 \\
      --vocab_file=domain/vocab.txt --vocab_extension=domain/vocab_extension.json
"""
from utils import tensorflow_startup  # noqa: F401  (first: TensorFlow starts quietly)
from utils import entry_point

from absl import flags

from checkpoint_flags import define_input_flags, read_input_model
from data import vocab_extension
from modeling import checkpoints
from utils.output_files import check_output_folder

FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "Checkpoint prefix, or the folder holding the checkpoint.")
flags.DEFINE_string("output", None, "Output folder (absent or empty).")
flags.DEFINE_enum("to", None, [f for f in checkpoints.FORMATS if f != "tf_hub"],
                  "Output format: tf1 (Google's), keras (this project's), hf (Hugging Face), "
                  "model_garden (Model Garden's TF2 checkpoint), keras_hub (a KerasHub preset: "
                  "the encoder as BertBackbone, a classifier as BertTextClassifier; the "
                  "pretraining heads are dropped, with a warning: KerasHub has no next-sentence "
                  "head and its BertMaskedLM computes another masked-LM transform (erf GELU, "
                  "LayerNorm epsilon 1e-5); SQuAD, token-classifier and multiple-choice heads are "
                  "refused; only hidden_act=gelu, the tanh form BertBackbone computes).")
define_input_flags(
    do_lower_case_help="Casing of the tokenizer, written to the output; default: as the input "
                       "says (hf, keras), else True.",
    head_help="Head of a keras checkpoint written without model_spec.json (training output "
              "folders).")
flags.DEFINE_string("vocab_extension", None,
                    "vocab_extension.json of build_vocab.py --extend_vocab: the rows of the words "
                    "it put in [unusedN] slots (word embeddings, masked-LM output bias) start as "
                    "the means of their pieces' rows. --vocab_file: the extended vocab.txt.")
flags.mark_flags_as_required(["input", "output", "to"])


def _initialise_new_tokens(loaded: checkpoints.LoadedModel) -> None:
    piece_ids = vocab_extension.read_extension(FLAGS.vocab_extension, loaded.vocab_file)
    changed = checkpoints.initialise_new_token_rows(loaded.model, piece_ids)
    print(f"{FLAGS.vocab_extension}: {len(piece_ids)} new tokens, their rows of "
          f"{' and '.join(changed)} set to the means of their pieces' rows")


def main(_):
    check_output_folder(FLAGS.output)
    loaded, do_lower_case = read_input_model()
    if FLAGS.vocab_extension:
        _initialise_new_tokens(loaded)
    checkpoints.write_model(loaded, FLAGS.to, FLAGS.output, do_lower_case)
    print(f"wrote {FLAGS.output}: {checkpoints.DESCRIPTIONS[FLAGS.to]}, {loaded.spec.head} head"
          + (f" ({loaded.spec.num_labels} labels)" if loaded.spec.num_labels else "")
          + f", do_lower_case={do_lower_case}")


if __name__ == "__main__":
    entry_point.run(main)
