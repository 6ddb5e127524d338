"""Converts a BERT checkpoint between Google's TF1 format, this project's format, Hugging Face and
Model Garden (TF-Hub encoder SavedModels are read too).

    python convert_checkpoint.py --input=$BERT_DIR/bert_model.ckpt --output=bert_hf --to=hf

The input format (`tf1`, `keras`, `hf`, `model_garden` or `tf_hub`) is detected and said;
`--input_format` overrides it. The head (pretraining, classifier, SQuAD span, ...) travels with the encoder; weights come out
bit-identical. The output folder must be absent or empty and is written all or nothing.
"""
from absl import app, flags

from modeling.checkpoints.folders import read_model, write_model
from modeling.checkpoints.formats import DESCRIPTIONS, FORMATS, detect_format
from modeling.checkpoints.heads import HEAD_NAMES
from utils.output_files import check_output_folder

FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "Checkpoint prefix, or the folder holding the checkpoint.")
flags.DEFINE_string("output", None, "Output folder (absent or empty).")
flags.DEFINE_enum("to", None, [f for f in FORMATS if f != "tf_hub"],
                  "Output format: tf1 (Google's), keras (this project's), hf (Hugging Face), "
                  "model_garden (Model Garden's TF2 checkpoint).")
flags.DEFINE_enum("input_format", None, FORMATS, "Input format; detected when not given.")
flags.DEFINE_string("bert_config_file", None,
                    "bert_config.json of a tf1/keras input; default: the one beside it.")
flags.DEFINE_string("vocab_file", None, "vocab.txt of the input; default: the one beside it.")
flags.DEFINE_bool("do_lower_case", None, "Casing of the tokenizer, written to the output; "
                  "default: as the input says (hf, keras), else True.")
flags.DEFINE_enum("head", None, HEAD_NAMES, "Head of a keras checkpoint written without "
                  "model_spec.json (training output folders).")
flags.mark_flags_as_required(["input", "output", "to"])


def main(_):
    check_output_folder(FLAGS.output)
    input_format = FLAGS.input_format or detect_format(FLAGS.input)
    how = "as given by --input_format" if FLAGS.input_format else "detected"
    print(f"input {FLAGS.input}: {DESCRIPTIONS[input_format]} ({how})")
    loaded = read_model(FLAGS.input, input_format, FLAGS.bert_config_file, FLAGS.vocab_file,
                        FLAGS.head)
    do_lower_case = FLAGS.do_lower_case
    if do_lower_case is None:
        do_lower_case = True if loaded.do_lower_case is None else loaded.do_lower_case
    write_model(loaded, FLAGS.to, FLAGS.output, do_lower_case)
    print(f"wrote {FLAGS.output}: {DESCRIPTIONS[FLAGS.to]}, {loaded.spec.head} head"
          + (f" ({loaded.spec.num_labels} labels)" if loaded.spec.num_labels else "")
          + f", do_lower_case={do_lower_case}")

if __name__ == "__main__":
    app.run(main)
