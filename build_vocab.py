"""Learns a WordPiece vocab.txt for BERT from plain text (a new language or domain).

    python build_vocab.py --input_file=corpus/*.txt --output_file=vocab.txt \\
      --vocab_size=30522 --do_lower_case=True

The words are split exactly as `FullTokenizer` (and so create_pretraining_data.py, run_*.py)
will split them with the same --do_lower_case; the file starts with [PAD], [UNK], [CLS], [SEP]
and [MASK]. Learning is in memory: on a very large corpus, learn from a sample (--max_lines).

Or add a domain's words to a released vocabulary without breaking its checkpoint:

    python build_vocab.py --extend_vocab=$BERT_DIR/vocab.txt --input_file=corpus/*.txt \\
      --output_file=domain/vocab.txt --do_lower_case=True

writes a vocabulary of the same size whose [unusedN] lines hold the corpus's words that save the
most tokens (those the released vocabulary splits into the most pieces, weighted by their counts),
every other line unchanged, and beside it vocab_extension.json, which
`convert_checkpoint.py --vocab_extension` reads to start the new words' embeddings as the means of
their pieces' (`data/vocab_extension.py` says how the words are chosen).
"""
from __future__ import annotations

from utils import entry_point

import collections
import os

from absl import flags, logging

from data import tokenization, vocab_extension, wordpiece_vocab
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
flags.DEFINE_string("extend_vocab", None,
                    "A released vocab.txt to extend instead of learning one: its [unusedN] lines "
                    "take the corpus's words that it splits into the most pieces, weighted by "
                    "their counts; every other line stays, so its checkpoint still loads. Also "
                    "writes <output_file without .txt>_extension.json for convert_checkpoint.py "
                    "--vocab_extension.")
flags.DEFINE_integer("max_new_tokens", None,
                     "With --extend_vocab: the most words to add (default: every [unusedN] slot).")

flags.mark_flags_as_required(["input_file", "output_file"])

# Flags of the learner, which --extend_vocab does not run.
_LEARNER_FLAGS = ("vocab_size", "num_unused_tokens", "max_unique_chars", "max_token_length",
                  "lower_thresh", "num_iterations", "slack_ratio")


def _check_output() -> None:
    if FLAGS.max_lines < 0:
        raise ValueError(f"--max_lines={FLAGS.max_lines} must be >= 0")
    directory = os.path.dirname(os.path.abspath(FLAGS.output_file))
    if not os.path.isdir(directory):
        raise ValueError(f"output directory {directory} does not exist")


def _options() -> wordpiece_vocab.LearnerOptions:
    if FLAGS.max_new_tokens is not None:
        raise ValueError("--max_new_tokens applies only with --extend_vocab")
    options = wordpiece_vocab.LearnerOptions(
        vocab_size=FLAGS.vocab_size, num_unused_tokens=FLAGS.num_unused_tokens,
        max_unique_chars=FLAGS.max_unique_chars, max_token_length=FLAGS.max_token_length,
        lower_thresh=FLAGS.lower_thresh, num_iterations=FLAGS.num_iterations,
        slack_ratio=FLAGS.slack_ratio)
    options.validate()
    return options


def _count_words(input_files: list[str]) -> collections.Counter:
    lines = wordpiece_vocab.read_lines(input_files, FLAGS.max_lines)
    counts = wordpiece_vocab.count_words(lines, FLAGS.do_lower_case)
    logging.info("Counted %d distinct words (%d in all) in %d files", len(counts),
                 sum(counts.values()), len(input_files))
    return counts


def _learn(input_files: list[str]) -> None:
    options = _options()
    vocabulary = wordpiece_vocab.learn_vocabulary(_count_words(input_files), options)
    wordpiece_vocab.write_vocabulary(vocabulary, FLAGS.output_file)
    tokenizer = tokenization.FullTokenizer(FLAGS.output_file, FLAGS.do_lower_case)
    logging.info("Wrote %d tokens to %s (%d [unused] slots)", len(tokenizer.vocab),
                 FLAGS.output_file, options.num_unused_tokens)


def _released_vocab_lines() -> list[str]:
    """The lines of --extend_vocab, after checking the flags that go with it."""
    given = [f"--{name}" for name in _LEARNER_FLAGS if FLAGS[name].present]
    if given:
        raise ValueError("--extend_vocab keeps the released vocabulary's size and learns no "
                         f"pieces: drop {', '.join(given)}")
    released = FLAGS.extend_vocab
    lines = vocab_extension.read_vocab_lines(released)
    outputs = (FLAGS.output_file, vocab_extension.extension_path(FLAGS.output_file))
    if any(os.path.exists(path) and os.path.samefile(path, released) for path in outputs):
        raise ValueError(f"--output_file={FLAGS.output_file} would overwrite --extend_vocab="
                         f"{released}: write the extended vocabulary elsewhere")
    vocab_extension.free_slots(lines, FLAGS.max_new_tokens, released)
    vocab_extension.check_casing(lines, FLAGS.do_lower_case, released)
    return lines


def _extend(input_files: list[str]) -> None:
    lines = _released_vocab_lines()
    counts = _count_words(input_files)
    extension = vocab_extension.extend_vocabulary(lines, counts, FLAGS.max_new_tokens,
                                                  FLAGS.extend_vocab)
    path = vocab_extension.write_extension(extension, FLAGS.output_file, FLAGS.extend_vocab,
                                           FLAGS.do_lower_case)
    slots = len(vocab_extension.unused_slots(lines))
    logging.info("Wrote %s and %s: %d new words in the %d [unused] slots of %s (%s); tokens "
                 "per word of the corpus: %.4f before, %.4f after", FLAGS.output_file, path,
                 len(extension.new_tokens), slots, FLAGS.extend_vocab,
                 ", ".join(token.token for token in extension.new_tokens[:10]) +
                 (", ..." if len(extension.new_tokens) > 10 else ""),
                 extension.tokens_before / extension.words,
                 extension.tokens_after / extension.words)


def main(argv: list[str]) -> None:
    del argv
    logging.set_verbosity(logging.INFO)
    input_files = pretraining_corpus.expand_input_patterns(FLAGS.input_file)
    _check_output()
    if FLAGS.extend_vocab:
        _extend(input_files)
    else:
        _learn(input_files)


if __name__ == "__main__":
    entry_point.run(main)
