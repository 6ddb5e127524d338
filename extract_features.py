"""Writes BERT's contextual embeddings of each token of each input line, as the original script.

    python extract_features.py --input_file=input.txt --output_file=output.jsonl \
      --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
      --init_checkpoint=$BERT_DIR/bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128
"""
import itertools

from absl import app, flags, logging
import tensorflow as tf

import common_flags
from data.feature_extraction import (convert_example, features_to_arrays, format_output_line,
                                     parse_layer_indexes, read_examples)
from modeling import checkpoints
from modeling.config import BertConfig
from modeling.encoder import BertEncoder
from utils.output_files import AtomicFile
from utils.progress import Progress

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Text file, one example a line; `a ||| b` for pairs.")
flags.DEFINE_string("output_file", None, "JSON-lines output file.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated indexes of the layers to output.")
flags.DEFINE_string("bert_config_file", None, "The bert_config.json of the model.")
flags.DEFINE_integer("max_seq_length", 128, "Longest sequence after WordPiece tokenization.")
flags.DEFINE_string("init_checkpoint", None, "Checkpoint of the model: original TF1, project (keras) or a Hugging Face folder.")
flags.DEFINE_string("vocab_file", None, "The vocab.txt of the model.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_integer("batch_size", 32, "Examples per batch.")
flags.mark_flags_as_required(["input_file", "output_file", "bert_config_file", "init_checkpoint",
                              "vocab_file"])


def _batches(iterable, size):
    iterator = iter(iterable)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def main(_):
    config = BertConfig.from_json_file(FLAGS.bert_config_file)
    common_flags.check_max_seq_length(config)
    layer_indexes = parse_layer_indexes(FLAGS.layers, config.num_hidden_layers)
    tokenizer = common_flags.tokenizer_from_flags(config)
    encoder = BertEncoder(config)
    checkpoints.load_checkpoint(encoder, FLAGS.init_checkpoint)
    run = tf.function(lambda inputs: encoder(inputs, training=False)["encoder_outputs"])

    with open(FLAGS.input_file, "rb") as f:
        total = sum(1 for _ in f)
    progress = Progress("examples", total)
    with AtomicFile(FLAGS.output_file) as out:
        examples = read_examples(FLAGS.input_file)
        features = (convert_example(e, FLAGS.max_seq_length, tokenizer) for e in examples)
        for batch in _batches(features, FLAGS.batch_size):
            all_layers = run(features_to_arrays(batch))
            selected = [all_layers[index].numpy() for index in layer_indexes]
            for row, feature in enumerate(batch):
                out.write(format_output_line(feature, layer_indexes,
                                             [layer[row] for layer in selected]))
            progress.update(len(batch))
    logging.info("%s; wrote %s", progress.done(), FLAGS.output_file)


if __name__ == "__main__":
    app.run(main)
