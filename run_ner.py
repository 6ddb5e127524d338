"""Named-entity recognition on CoNLL-2003 (paper section 5.3): fine-tuning or frozen features.

    python run_ner.py --data_dir=$CONLL_DIR --vocab_file=$BERT_DIR/vocab.txt \
      --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
      --do_train --do_eval --do_predict --document_context --max_seq_length=128 \
      --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3.0 --output_dir=/tmp/ner

--data_dir holds train.txt, valid.txt and test.txt (or eng.train, eng.testa, eng.testb);
--train_file, --dev_file and --test_file name files anywhere instead. A file has a token a line in
whitespace-separated columns, the word in --token_column and its tag in --tag_column (default:
the first and the last, so CoNLL-2003's four columns and two-column files such as WNUT-17's and
WikiANN's both read), tags in IOB1, IOB2 or IOBES (BILOU), read into IOB2; the tag set is the
training file's entity types, written to `label_list.txt`. Each word's first WordPiece carries its
tag; other pieces are ignored by the loss and the predictions. --document_context fills each sequence with the sentence's neighbours in its document.
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
the encoder with --feature_based) with `bert_config.json`. With --eval_every_steps or
--eval_every_epoch, dev is scored during training (eval_results_step_N.txt) and the tagger of the
best entity F1 kept in `best/`; --early_stopping_patience stops after that many scorings without
improvement.
"""
from __future__ import annotations

from utils import tensorflow_startup  # noqa: F401  (first: TensorFlow starts quietly)
from utils import entry_point

import os

from absl import flags

import common_flags
from data.ner import conll
from modeling.config import BertConfig
from tasks import ner, ner_feature_based, runner

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "Folder of the CoNLL files: train.txt, valid.txt, test.txt.")
for _role, _split in ner.SPLIT_OF_ROLE.items():
    flags.DEFINE_string(f"{_split}_file", None, f"The {_split} file for --do_{_role} (default: "
                        "the one in --data_dir).")
flags.DEFINE_integer("token_column", 0, "The word's column (from 0; negative: from the end).")
flags.DEFINE_integer("tag_column", -1, "The tag's column (default: the last).")
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
    learning_rate=None, learning_rate_help=f"Peak learning rate (default {ner.LEARNING_RATE:g} "
    f"fine-tuning, {ner.FEATURE_BASED_LEARNING_RATE:g} with --feature_based).")
flags.DEFINE_enum("tag_scheme", "auto", conll.TAG_SCHEMES, "Tags of the files: iob1, iob2, iobes "
                  "(BILOU's B-, I-, L-, U- too), or auto to tell them apart.")
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
flags.mark_flags_as_required(["output_dir"])


def _frozen(config: BertConfig) -> ner_feature_based.FrozenFeatures | None:
    """--feature_based's frozen features, or None."""
    if not FLAGS.feature_based:
        return None
    return ner_feature_based.FrozenFeatures(
        config=config, init_checkpoint=FLAGS.init_checkpoint, feature_layers=FLAGS.feature_layers,
        vocab_file=common_flags.vocab_file_from_flags(), do_lower_case=FLAGS.do_lower_case,
        dtype=FLAGS.dtype,
        cache_dir=FLAGS.feature_cache_dir or os.path.join(FLAGS.output_dir, "feature_cache"),
        batch_size=FLAGS.predict_batch_size, batching=common_flags.batching_from_flags())


def _settings(config: BertConfig) -> ner.Settings:
    return ner.Settings(
        data_dir=FLAGS.data_dir, output_dir=FLAGS.output_dir,
        files={role: FLAGS[f"{split}_file"].value for role, split in ner.SPLIT_OF_ROLE.items()
               if FLAGS[f"{split}_file"].value},
        token_column=FLAGS.token_column, tag_column=FLAGS.tag_column,
        max_seq_length=FLAGS.max_seq_length,
        do_lower_case=FLAGS.do_lower_case, tag_scheme=FLAGS.tag_scheme,
        document_context=FLAGS.document_context, doc_stride=FLAGS.doc_stride,
        eval_batch_size=FLAGS.eval_batch_size, predict_batch_size=FLAGS.predict_batch_size,
        batching=common_flags.batching_from_flags(), init_checkpoint=FLAGS.init_checkpoint,
        frozen=_frozen(config), lstm_units=FLAGS.lstm_units,
        evaluation=common_flags.evaluation_plan_from_flags(ner.MAIN_METRIC))


def main(_):
    config = common_flags.config_from_flags()
    common_flags.check_fine_tuning_flags(config)
    settings = _settings(config)
    # With --feature_based, --init_checkpoint is the frozen encoder, not the tagger's start.
    runner.fine_tune(ner, settings, config, common_flags.tokenizer_from_flags(config),
                     common_flags.roles_from_flags(),
                     lambda: common_flags.start_fine_tuning_run(
                         learning_rate=ner.learning_rate(settings, FLAGS.learning_rate),
                         init_checkpoint="" if settings.frozen else None),
                     FLAGS.output_dir)


if __name__ == "__main__":
    entry_point.run(main)
