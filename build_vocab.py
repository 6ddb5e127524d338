"""Learns a WordPiece vocab.txt for BERT from plain text (a new language or domain).

    python build_vocab.py --input_file=corpus/*.txt --output_file=vocab.txt \\
      --vocab_size=30522 --do_lower_case=True

The words are split exactly as `FullTokenizer` (and so create_pretraining_data.py, run_*.py)
will split them with the same --do_lower_case; the file starts with [PAD], [UNK], [CLS], [SEP]
and [MASK]. Learning is in memory: on a very large corpus, learn from a sample (--max_lines).
"""
from __future__ import annotations

from utils import entry_point

import os

from absl import flags, logging

from data import tokenization, wordpiece_vocab
from data.pretraining import corpus as pretraining_corpus

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Text files: comma-separated paths or globs.")
flags.DEFINE_string("output_file", None, "Where to write vocab.txt.")
flags.DEFINE_integer("vocab_size", 30522, "Most tokens in the vocabulary, special tokens "
                     "included (the learner may stop up to --slack_ratio short of it).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents (uncased model).")
flags.DEFINE_integer("num_unused_tokens", 0, "[unusedN] slots after the special tokens.")
flags.DEFINE_integer("max_lines", 0, "Learn from the first N lines only (0: all).")
flags.DEFINE_integer("max_unique_chars", 1000, "Alphabet size; rarer characters become [UNK].")
flags.DEFINE_integer("max_token_length", 50, "Longer words do not shape the pieces.")
flags.DEFINE_integer("lower_thresh", 10, "Lowest count threshold the size search may try "
                     "(lower it for small corpora).")
flags.DEFINE_integer("num_iterations", 4, "Refinement passes per threshold tried.")
flags.DEFINE_float("slack_ratio", 0.05, "Accepted shortfall from --vocab_size.")

flags.mark_flags_as_required(["input_file", "output_file"])


def _options() -> wordpiece_vocab.LearnerOptions:
    options = wordpiece_vocab.LearnerOptions(
        vocab_size=FLAGS.vocab_size, num_unused_tokens=FLAGS.num_unused_tokens,
        max_unique_chars=FLAGS.max_unique_chars, max_token_length=FLAGS.max_token_length,
        lower_thresh=FLAGS.lower_thresh, num_iterations=FLAGS.num_iterations,
        slack_ratio=FLAGS.slack_ratio)
    options.validate()
    if FLAGS.max_lines < 0:
        raise ValueError(f"--max_lines={FLAGS.max_lines} must be >= 0")
    directory = os.path.dirname(os.path.abspath(FLAGS.output_file))
    if not os.path.isdir(directory):
        raise ValueError(f"output directory {directory} does not exist")
    return options


def main(argv: list[str]) -> None:
    del argv
    logging.set_verbosity(logging.INFO)
    input_files = pretraining_corpus.expand_input_patterns(FLAGS.input_file)
    options = _options()
    lines = wordpiece_vocab.read_lines(input_files, FLAGS.max_lines)
    counts = wordpiece_vocab.count_words(lines, FLAGS.do_lower_case)
    logging.info("Counted %d distinct words (%d in all) in %d files", len(counts),
                 sum(counts.values()), len(input_files))
    vocabulary = wordpiece_vocab.learn_vocabulary(counts, options)
    wordpiece_vocab.write_vocabulary(vocabulary, FLAGS.output_file)
    tokenizer = tokenization.FullTokenizer(FLAGS.output_file, FLAGS.do_lower_case)
    logging.info("Wrote %d tokens to %s (%d [unused] slots)", len(tokenizer.vocab),
                 FLAGS.output_file, options.num_unused_tokens)


if __name__ == "__main__":
    entry_point.run(main)
