"""Creates masked-LM / next-sentence pretraining TFRecords from plain text (the original's flags).

Input: one sentence per line, a blank line between documents. Output: `tf.train.Example`s with
input_ids, input_mask, segment_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights and
next_sentence_labels, as the original script writes them. The corpus is streamed in chunks
through worker processes, so memory does not grow with its size, and the output is the same
for any --num_workers. Each output is written under a hidden temporary name
(`.NAME.<host>-<pid>-<token>.incomplete`) and renamed into place when complete; a run killed
mid-way leaves those files, and the next run writing the same outputs removes them, logging each,
unless the process that wrote them is still running (or ran on another host).

    python create_pretraining_data.py --input_file=corpus/*.txt \\
      --output_file=out/train.tfrecord --vocab_file=vocab.txt --do_lower_case=True \\
      --max_seq_length=128 --max_predictions_per_seq=20 --masked_lm_prob=0.15 \\
      --random_seed=12345 --dupe_factor=10
"""
from __future__ import annotations

from utils import entry_point

import os

from absl import flags, logging

from data import tokenization
from data.pretraining import (chunks as pretraining_chunks, corpus as pretraining_corpus, masked_lm,
                              writer)
from data.pretraining.instances import PretrainingConfig

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Input raw text file (or comma-separated list of "
                    "files; globs allowed).")
flags.DEFINE_string("output_file", None, "Output TF example file (or comma-separated list "
                    "of files).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was "
                    "trained on.")
flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text. Should be "
                  "True for uncased models and False for cased models.")
flags.DEFINE_bool("do_whole_word_mask", False, "Whether to use whole word masking rather than "
                  "per-WordPiece masking.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum number of masked LM predictions "
                     "per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10, "Number of times to duplicate the input data (with "
                     "different masks).")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of creating sequences which are "
                   "shorter than the maximum length.")
flags.DEFINE_integer("num_workers", None, "Worker processes (default: every core available). "
                     "The output does not depend on it.")
flags.DEFINE_integer("output_shards", 0, "If > 0, write this many files named "
                     "OUTPUT_FILE-00000-of-0000N instead of the --output_file list.")
flags.DEFINE_integer("chunk_bytes", 1 << 17, "Input bytes per chunk: the unit of parallel work "
                     "and the window random next sentences are drawn from.")
flags.DEFINE_integer("min_chunk_documents", 16, "Documents per chunk at least (unless the chunk "
                     "reaches 16 x chunk_bytes).")
flags.DEFINE_integer("shuffle_buffer_size", 50_000, "Instances held back to mix the output "
                     "across chunks (memory: about 1 KB each at max_seq_length 128).")
flags.DEFINE_float("progress_interval", 30.0, "Seconds between progress lines.")

flags.mark_flags_as_required(["input_file", "output_file", "vocab_file"])


def _output_files() -> list[str]:
    """The output paths named by --output_file and --output_shards."""
    paths = [path.strip() for path in FLAGS.output_file.split(",") if path.strip()]
    if FLAGS.output_shards < 0:
        raise ValueError(f"--output_shards={FLAGS.output_shards} must be >= 0")
    if FLAGS.output_shards:
        if len(paths) != 1:
            raise ValueError("--output_shards needs a single --output_file prefix")
        count = FLAGS.output_shards
        paths = [f"{paths[0]}-{index:05d}-of-{count:05d}" for index in range(count)]
    if not paths:
        raise ValueError("--output_file names no file")
    if len(set(map(os.path.abspath, paths))) != len(paths):
        raise ValueError(f"--output_file names a file twice: {paths}")
    return paths


def _check_paths(input_files: list[str], output_files: list[str]) -> None:
    """Refuses outputs that would overwrite an input or sit under a file."""
    inputs = {os.path.realpath(path) for path in input_files}
    for path in output_files:
        if os.path.realpath(path) in inputs:
            raise ValueError(f"output file {path} is also an input file")
        if os.path.isdir(path):
            raise ValueError(f"output file {path} is a directory")
        parent = os.path.dirname(os.path.abspath(path))
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
            raise ValueError(f"cannot create output file {path}: {parent} is not a writable "
                             "directory")


def _settings() -> pretraining_chunks.ChunkSettings:
    """Sampling settings from the flags, checked, with a vocabulary that has what BERT needs."""
    config = PretrainingConfig(
        max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        masked_lm_prob=FLAGS.masked_lm_prob, short_seq_prob=FLAGS.short_seq_prob,
        dupe_factor=FLAGS.dupe_factor, do_whole_word_mask=FLAGS.do_whole_word_mask)
    config.validate()
    vocab = tokenization.load_vocab(FLAGS.vocab_file)
    masked_lm.MaskingVocab.from_vocab(vocab, FLAGS.vocab_file)
    return pretraining_chunks.ChunkSettings(FLAGS.vocab_file, FLAGS.do_lower_case, config,
                                            FLAGS.random_seed)


def _options() -> writer.WriterOptions:
    num_workers = FLAGS.num_workers
    if num_workers is None:
        num_workers = len(os.sched_getaffinity(0))
    options = writer.WriterOptions(
        num_workers=num_workers, chunk_bytes=FLAGS.chunk_bytes,
        min_chunk_documents=FLAGS.min_chunk_documents,
        shuffle_buffer_size=FLAGS.shuffle_buffer_size,
        progress_interval_s=FLAGS.progress_interval)
    options.validate()
    return options


def main(argv: list[str]) -> None:
    del argv
    logging.set_verbosity(logging.INFO)
    input_files = pretraining_corpus.expand_input_patterns(FLAGS.input_file)
    output_files = _output_files()
    _check_paths(input_files, output_files)
    settings = _settings()
    options = _options()
    for path in {os.path.dirname(os.path.abspath(path)) for path in output_files}:
        os.makedirs(path, exist_ok=True)
    logging.info("*** Reading from %d input files (%s) with %d workers ***",
                 len(input_files), ", ".join(input_files[:5]) + (
                     ", ..." if len(input_files) > 5 else ""), options.num_workers)
    summary = writer.write_pretraining_records(
        input_files, output_files, settings, options, log=logging.info)
    for line in summary.format().splitlines():
        logging.info(line)


if __name__ == "__main__":
    entry_point.run(main)
