"""Named-entity recognition on CoNLL-2003 (paper section 5.3): fine-tuning or frozen features.

    python run_ner.py --data_dir=$CONLL_DIR --vocab_file=$BERT_DIR/vocab.txt \
      --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
      --do_train --do_eval --do_predict --document_context --max_seq_length=128 \
      --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3.0 --output_dir=/tmp/ner

--data_dir holds train.txt, valid.txt and test.txt (or eng.train, eng.testa, eng.testb), IOB1 or
IOB2. Each word's first WordPiece carries its tag; other pieces are ignored by the loss and the
predictions. --document_context fills each sequence with the sentence's neighbours in its document.
Training cuts a sentence longer than --max_seq_length; dev and test tag it in overlapping windows
--doc_stride tokens apart, each word from the window where its first piece has the most context
(SQuAD's rule); a sentence that fits is one sequence either way.
With --feature_based, BERT stays frozen: the concatenated activations of --feature_layers at each
word, computed once and cached under --feature_cache_dir, feed a two-layer BiLSTM
(--lstm_units per direction) and a classifier, which alone are trained.

Outputs in --output_dir, for dev (--do_eval) and test (--do_predict): `eval_results.txt` /
`test_results.txt` (entity precision, recall, F1 overall and per type, token accuracy, loss),
`conlleval_dev.txt` / `conlleval_test.txt` (the conlleval report, also printed), and
`predictions_dev.txt` / `predictions_test.txt` (`word gold predicted`, conlleval's input). Training
writes `label_list.txt`, read back by runs without --do_train, the training checkpoints (`ckpt-N`,
this project's format) and `model.ckpt` in the original format (the whole tagger when fine-tuning,
the encoder with --feature_based) with `bert_config.json`.
"""
from __future__ import annotations

from utils import tensorflow_startup  # noqa: F401  (first: TensorFlow starts quietly)
from utils import entry_point

import os

from absl import flags, logging
import tensorflow as tf

import common_flags
from data.feature_extraction import parse_layer_indexes
from data.ner import conll
from modeling.config import BertConfig
from tasks import ner, ner_feature_based
from training import fine_tuning
from training.batching import ArrayExamples
from utils.output_files import write_text_atomically

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "Folder of the CoNLL files: train.txt, valid.txt, test.txt.")
common_flags.define_model_flags(
    "Pretrained checkpoint: the encoder to fine-tune or, with --feature_based, to extract "
    "features from. Without --do_train and --feature_based, a fine-tuned tagger (default: the "
    "newest in --output_dir).",
    max_seq_length_help="Tokens per sequence; longer sentences are cut in training and tagged in "
    "windows (--doc_stride) in evaluation and prediction.", do_lower_case=False,
    do_lower_case_help="Lower-case the input (uncased models; NER usually uses cased ones).")
common_flags.define_fine_tuning_flags(
    {"train": "Train on the train file.", "eval": "Score the dev file (valid.txt).",
     "predict": "Tag and score the test file (test.txt)."},
    learning_rate=None, learning_rate_help="Peak learning rate (default 5e-5 fine-tuning, 1e-3 "
    "with --feature_based).")
flags.DEFINE_enum("tag_scheme", "auto", conll.TAG_SCHEMES, "Tags of the files: iob1, iob2, auto.")
flags.DEFINE_bool("document_context", False, "Pack the maximal document context around each "
                  "sentence, as the paper does.")
flags.DEFINE_integer("doc_stride", None, "Dev and test: tokens between the starts of the "
                     "overlapping windows of a sentence (with --document_context, of the sentence "
                     "and half a window of its document on each side) longer than "
                     "--max_seq_length; each word is tagged from the window where its first "
                     "piece has the most context. Sentences that fit are unchanged. Default: "
                     "half a window, (max_seq_length - 2) // 2. Not with --feature_based, which "
                     "cuts long sentences.")
flags.DEFINE_bool("feature_based", False, "Keep BERT frozen; train a BiLSTM on its features.")
flags.DEFINE_string("feature_layers", "-1,-2,-3,-4", "--feature_based: encoder layers to "
                    "concatenate (-1 is the last).")
flags.DEFINE_integer("lstm_units", 768, "--feature_based: units of each LSTM direction.")
flags.DEFINE_string("feature_cache_dir", None, "--feature_based: where features are cached "
                    "(default: <output_dir>/feature_cache).")
flags.mark_flags_as_required(["data_dir", "output_dir"])


def _check_flags(config: BertConfig) -> list[int]:
    """Checks the flags; returns the feature layers (for --feature_based)."""
    common_flags.check_fine_tuning_flags(config)
    if FLAGS.lstm_units < 1:
        raise ValueError(f"--lstm_units={FLAGS.lstm_units} must be positive")
    if FLAGS.doc_stride is not None and FLAGS.doc_stride < 1:
        raise ValueError(f"--doc_stride={FLAGS.doc_stride} must be at least 1")
    if not FLAGS.feature_based:
        return []
    if FLAGS.doc_stride is not None:
        raise ValueError("--doc_stride: --feature_based reads each word from one sequence per "
                         "sentence (long sentences are cut); windows are for the fine-tuned "
                         "tagger")
    if not FLAGS.init_checkpoint:
        raise ValueError("--feature_based needs --init_checkpoint (the encoder to extract from)")
    try:
        return parse_layer_indexes(FLAGS.feature_layers, config.num_hidden_layers)
    except ValueError as error:
        raise ValueError(f"--feature_layers={FLAGS.feature_layers}: {error}") from None


def _label_list(splits: dict[str, tuple[str, conll.ConllData]]) -> list[str]:
    """Labels from the training file, or as the training run saved them beside the model."""
    if FLAGS.do_train:
        return conll.label_list(conll.entity_types(splits["train"][1]))
    # The fine-tuned tagger's folder; the feature-based tagger is in --output_dir.
    path = FLAGS.init_checkpoint if FLAGS.init_checkpoint and not FLAGS.feature_based \
        else FLAGS.output_dir
    labels = ner.saved_labels(path)
    if labels is None:
        raise FileNotFoundError(f"no {conll.LABEL_FILE} beside {path}: without --do_train the "
                                "labels come from the file the training run wrote beside the "
                                "model")
    return labels


def _frozen_features(layers: list[int]) -> ner_feature_based.FrozenFeatures:
    return ner_feature_based.FrozenFeatures(
        init_checkpoint=FLAGS.init_checkpoint, vocab_file=common_flags.vocab_file_from_flags(),
        layers=tuple(layers), do_lower_case=FLAGS.do_lower_case, dtype=FLAGS.dtype,
        cache_dir=FLAGS.feature_cache_dir or os.path.join(FLAGS.output_dir, "feature_cache"),
        batch_size=FLAGS.predict_batch_size, batching=common_flags.batching_from_flags())


def main(_):
    config = common_flags.config_from_flags()
    layers = _check_flags(config)
    tokenizer = common_flags.tokenizer_from_flags(config)
    settings = ner.Settings(FLAGS.max_seq_length, FLAGS.tag_scheme, FLAGS.document_context,
                            FLAGS.doc_stride)
    wanted = {"train": FLAGS.do_train, "dev": FLAGS.do_eval, "test": FLAGS.do_predict}
    splits = ner.read_splits(FLAGS.data_dir, [split for split, on in wanted.items() if on],
                             FLAGS.tag_scheme)
    labels = _label_list(splits)
    features = ner.features(splits, tokenizer, labels, settings,
                            windowed=not FLAGS.feature_based)
    tf.io.gfile.makedirs(FLAGS.output_dir)
    strategy = common_flags.setup_from_flags()
    learning_rate = FLAGS.learning_rate or (1e-3 if FLAGS.feature_based else 5e-5)
    # With --feature_based, --init_checkpoint is the frozen encoder, not the tagger's start.
    run = common_flags.fine_tuning_run(strategy, learning_rate,
                                       init_checkpoint="" if FLAGS.feature_based else None)
    frozen = _frozen_features(layers) if FLAGS.feature_based else None
    task = ner_feature_based.fine_tuning_task(config, len(labels), frozen, FLAGS.lstm_units) \
        if frozen else ner.fine_tuning_task(config, labels, FLAGS.do_lower_case,
                                            FLAGS.document_context)

    def words(split: str):
        return ner_feature_based.word_features(config, splits[split][0], features[split],
                                               frozen, settings)
    if FLAGS.do_train:
        write_text_atomically(os.path.join(FLAGS.output_dir, conll.LABEL_FILE),
                              "\n".join(labels) + "\n")
        logging.info("training with learning rate %g", learning_rate)
        data = ner_feature_based.word_examples(
            words("train"), ner_feature_based.word_labels(features["train"])) if frozen else \
            ArrayExamples(features["train"].to_arrays(),
                          batching=common_flags.batching_from_flags())
        trained = fine_tuning.train(run, task, data, run.train_steps(data.num_examples))
    else:
        trained = fine_tuning.restore(run, task)
    if not run.is_chief:
        return
    for split in ("dev", "test"):
        if split not in splits:
            continue
        batch_size = FLAGS.eval_batch_size if split == "dev" else FLAGS.predict_batch_size
        if frozen:
            tags, loss = ner_feature_based.tag(trained.model, words(split), features[split],
                                               labels, batch_size)
        else:
            tags, loss = ner.tag(trained.model, features[split], labels, batch_size,
                                 common_flags.batching_from_flags())
        ner.write_evaluation(split, *splits[split], tags, loss, trained.global_step,
                             FLAGS.output_dir)


if __name__ == "__main__":
    entry_point.run(main)
