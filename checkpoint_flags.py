"""Flags of the scripts that read a model folder in any checkpoint format (`convert_checkpoint.py`,
`export_savedmodel.py`), and reading the model they name.

Script-layer code: the scripts and this module are the only readers of absl FLAGS.
"""
from __future__ import annotations

from absl import flags

from modeling import checkpoints

FLAGS = flags.FLAGS


def define_input_flags(do_lower_case_help: str, head_help: str) -> None:
    """Defines --input_format, --bert_config_file, --vocab_file, --do_lower_case and --head."""
    flags.DEFINE_enum("input_format", None, checkpoints.FORMATS,
                      "Input format; detected when not given.")
    flags.DEFINE_string("bert_config_file", None,
                        "bert_config.json of a tf1/keras input; default: the one beside it.")
    flags.DEFINE_string("vocab_file", None,
                        "vocab.txt of the input; default: the one beside it.")
    flags.DEFINE_bool("do_lower_case", None, do_lower_case_help)
    flags.DEFINE_enum("head", None, checkpoints.HEAD_NAMES, head_help)


def read_input_model() -> tuple[checkpoints.LoadedModel, bool]:
    """Reads the model of --input as the flags say, and says its format.

    Returns:
        The model read, and the tokenizer's casing: --do_lower_case, else what the input says
        (hf, keras), else True.
    """
    input_format = FLAGS.input_format or checkpoints.detect_format(FLAGS.input)
    how = "as given by --input_format" if FLAGS.input_format else "detected"
    print(f"input {FLAGS.input}: {checkpoints.DESCRIPTIONS[input_format]} ({how})")
    loaded = checkpoints.read_model(FLAGS.input, input_format, FLAGS.bert_config_file,
                                    FLAGS.vocab_file, FLAGS.head)
    do_lower_case = FLAGS.do_lower_case
    if do_lower_case is None:
        do_lower_case = True if loaded.do_lower_case is None else loaded.do_lower_case
    return loaded, do_lower_case
