"""Writes BERT's contextual embeddings of each token of each input line, as the original script.

    python extract_features.py --input_file=input.txt --output_file=output.jsonl \
      --vocab_file=$BERT_DIR/vocab.txt --bert_config_file=$BERT_DIR/bert_config.json \
      --init_checkpoint=$BERT_DIR/bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128
"""
from utils import tensorflow_startup  # noqa: F401  (first: TensorFlow starts quietly)
from utils import entry_point

from absl import flags, logging

import common_flags
from data import features as model_inputs
from data.feature_extraction import format_output_line, parse_layer_indexes, read_lines
from modeling import checkpoints
from modeling.models.encoder import BertEncoder
from running.batching import ArrayExamples
from running import prediction
from utils.output_files import AtomicFile
from utils.progress import Progress

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Text file, one example a line; `a ||| b` for pairs.")
flags.DEFINE_string("output_file", None, "JSON-lines output file.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated indexes of the layers to output.")
flags.DEFINE_integer("max_seq_length", 128, "Longest sequence after WordPiece tokenization.")
flags.DEFINE_string("init_checkpoint", None, "Checkpoint of the model, in any format.")
common_flags.define_model_file_flags()
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_integer("batch_size", 32, "Examples per batch.")
common_flags.define_batching_flags(group_by_length=False)
flags.mark_flags_as_required(["input_file", "output_file", "init_checkpoint"])


def main(_):
    config = common_flags.config_from_flags()
    common_flags.check_max_seq_length(config)
    layer_indexes = parse_layer_indexes(FLAGS.layers, config.num_hidden_layers)
    tokenizer = common_flags.tokenizer_from_flags(config)
    batching = common_flags.batching_from_flags()
    encoder = BertEncoder(config)
    checkpoints.load_checkpoint(encoder, FLAGS.init_checkpoint)
    features = [model_inputs.text_sequence(line, tokenizer, FLAGS.max_seq_length)[0]
                for line in read_lines(FLAGS.input_file)]

    def chosen_layers(outputs, batch):
        return {str(index): outputs["encoder_outputs"][index] for index in layer_indexes}

    progress = Progress("examples", len(features))
    with AtomicFile(FLAGS.output_file) as out:
        start = 0
        for outputs in prediction.predict_batches(
                encoder, ArrayExamples(model_inputs.stack(features), batching=batching),
                FLAGS.batch_size, chosen_layers):
            rows = len(outputs[str(layer_indexes[0])])
            for row, feature in enumerate(features[start:start + rows]):
                out.write(format_output_line(start + row, feature.tokens, layer_indexes,
                                             [outputs[str(i)][row] for i in layer_indexes]))
            start += rows
            progress.update(rows)
    logging.info("%s; wrote %s", progress.done(), FLAGS.output_file)


if __name__ == "__main__":
    entry_point.run(main)
