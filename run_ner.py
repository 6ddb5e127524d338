"""Named-entity recognition on CoNLL-2003 (paper section 5.3): fine-tuning or frozen features.

    python run_ner.py --data_dir=$CONLL_DIR --vocab_file=$BERT_DIR/vocab.txt \
      --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
      --do_train --do_eval --do_predict --document_context --max_seq_length=128 \
      --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=3.0 --output_dir=/tmp/ner

--data_dir holds train.txt, valid.txt and test.txt (or eng.train, eng.testa, eng.testb), IOB1 or
IOB2. Each word's first WordPiece carries its tag; other pieces are ignored by the loss and the
predictions. --document_context fills each sequence with the sentence's neighbours in its document.
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

from utils import entry_point  # first, so that TensorFlow starts quietly

import os

from absl import flags, logging
import numpy as np
import tensorflow as tf

import common_flags
from data.feature_extraction import parse_layer_indexes
from data.ner import conll, feature_cache, features as ner_features, metrics
from modeling import losses
from modeling.bilstm_tagger import BiLstmTagger
from modeling import checkpoints
from modeling.config import BertConfig
from modeling.encoder import BertEncoder
from modeling.task_models import ENCODER_INPUTS, BertTokenClassifier
from training import fine_tuning, prediction
from training.batching import ArrayExamples, HostExamples
from utils.output_files import write_eval_results, write_text_atomically, written_together

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "Folder of the CoNLL files: train.txt, valid.txt, test.txt.")
common_flags.define_model_flags(
    "Pretrained checkpoint: the encoder to fine-tune or, with --feature_based, to extract "
    "features from. Without --do_train and --feature_based, a fine-tuned tagger (default: the "
    "newest in --output_dir).",
    max_seq_length_help="Tokens per sequence; longer sentences are cut.", do_lower_case=False,
    do_lower_case_help="Lower-case the input (uncased models; NER usually uses cased ones).")
common_flags.define_fine_tuning_flags(
    {"train": "Train on the train file.", "eval": "Score the dev file (valid.txt).",
     "predict": "Tag and score the test file (test.txt)."},
    learning_rate=None, learning_rate_help="Peak learning rate (default 5e-5 fine-tuning, 1e-3 "
    "with --feature_based).")
flags.DEFINE_enum("tag_scheme", "auto", conll.TAG_SCHEMES, "Tags of the files: iob1, iob2, auto.")
flags.DEFINE_bool("document_context", False, "Pack the maximal document context around each "
                  "sentence, as the paper does.")
flags.DEFINE_bool("feature_based", False, "Keep BERT frozen; train a BiLSTM on its features.")
flags.DEFINE_string("feature_layers", "-1,-2,-3,-4", "--feature_based: encoder layers to "
                    "concatenate (-1 is the last).")
flags.DEFINE_integer("lstm_units", 768, "--feature_based: units of each LSTM direction.")
flags.DEFINE_string("feature_cache_dir", None, "--feature_based: where features are cached "
                    "(default: <output_dir>/feature_cache).")
flags.mark_flags_as_required(["data_dir", "output_dir"])

_FILES = {"train": ("train.txt", "eng.train"),
          "dev": ("valid.txt", "dev.txt", "testa.txt", "eng.testa"),
          "test": ("test.txt", "testb.txt", "eng.testb")}
_RESULTS = {"dev": "eval_results.txt", "test": "test_results.txt"}


def _check_flags(config: BertConfig) -> list[int]:
    """Checks the flags; returns the feature layers (for --feature_based)."""
    common_flags.check_fine_tuning_flags(config)
    if FLAGS.lstm_units < 1:
        raise ValueError(f"--lstm_units={FLAGS.lstm_units} must be positive")
    if not FLAGS.feature_based:
        return []
    if not FLAGS.init_checkpoint:
        raise ValueError("--feature_based needs --init_checkpoint (the encoder to extract from)")
    try:
        return parse_layer_indexes(FLAGS.feature_layers, config.num_hidden_layers)
    except ValueError as error:
        raise ValueError(f"--feature_layers={FLAGS.feature_layers}: {error}") from None


def _split_path(split: str) -> str:
    for name in _FILES[split]:
        path = os.path.join(FLAGS.data_dir, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"no {split} file in --data_dir={FLAGS.data_dir} (looked for "
                            f"{', '.join(_FILES[split])})")


def _read_splits() -> dict[str, tuple[str, conll.ConllData]]:
    """Reads every file the run needs, so that bad input fails before anything is written."""
    wanted = {"train": FLAGS.do_train, "dev": FLAGS.do_eval, "test": FLAGS.do_predict}
    splits = {}
    for split in (split for split, needed in wanted.items() if needed):
        path = _split_path(split)
        splits[split] = (path, conll.read_conll_file(path, FLAGS.tag_scheme))
        if not splits[split][1].sentences:
            raise ValueError(f"{path}: no sentences in the {split} file (empty, or only "
                             "-DOCSTART- lines)")
    return splits


def _model_folder() -> str:
    """Where the trained tagger comes from without --do_train."""
    init = FLAGS.init_checkpoint
    if init and not FLAGS.feature_based:
        return init if os.path.isdir(init) else os.path.dirname(init)
    return FLAGS.output_dir


def _label_list(splits: dict[str, tuple[str, conll.ConllData]]) -> list[str]:
    """Labels from the training file, or as the training run saved them beside the model."""
    if FLAGS.do_train:
        return conll.label_list(conll.entity_types(splits["train"][1]))
    path = os.path.join(_model_folder(), conll.LABEL_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} does not exist: without --do_train the labels come from "
                                "the file the training run wrote beside the model")
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def _features(splits: dict[str, tuple[str, conll.ConllData]], tokenizer,
              labels: list[str]) -> dict[str, ner_features.NerFeatures]:
    """Every split's features, made before anything is written (a tag outside the labels fails)."""
    features = {}
    for split, (path, data) in splits.items():
        try:
            features[split] = ner_features.convert_documents_to_features(
                data.documents, tokenizer, labels, FLAGS.max_seq_length, FLAGS.document_context)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None
    return features


def _loss_fn(outputs, batch, normaliser):
    count = normaliser.global_sum(tf.reduce_sum(tf.cast(batch["label_ids"] >= 0, tf.float32)))
    return {"loss": losses.token_cross_entropy(outputs["logits"], batch["label_ids"], count)}


def _learning_rate() -> float:
    return FLAGS.learning_rate or (1e-3 if FLAGS.feature_based else 5e-5)


def _fine_tuned_task(config: BertConfig, labels: list[str]) -> fine_tuning.FineTuningTask:
    return fine_tuning.FineTuningTask(
        lambda: BertTokenClassifier(config, len(labels)), _loss_fn,
        head=f"a tagger of {len(labels)} labels: cls/token_classifier/output_weights",
        save=common_flags.fine_tuned_saver(labels))


def _encoder(config: BertConfig) -> BertEncoder:
    encoder = BertEncoder(config)
    found = checkpoints.load_checkpoint(encoder, FLAGS.init_checkpoint)
    logging.info("frozen encoder loaded from %s (%s)", FLAGS.init_checkpoint, found)
    return encoder


def _feature_based_task(config: BertConfig, num_labels: int,
                        layers: list[int]) -> fine_tuning.FineTuningTask:
    """The BiLSTM tagger over frozen features: it starts from random values (nothing pretrained
    to load) and is kept in the training checkpoints; `model.ckpt` is the frozen encoder."""
    def save(trained: fine_tuning.Trained, output_dir: str) -> None:
        checkpoints.save_tf1_checkpoint(_encoder(config), os.path.join(output_dir, "model.ckpt"),
                                        global_step=trained.global_step,
                                        update_state_file=False)
        config.to_json_file(os.path.join(output_dir, "bert_config.json"))
    return fine_tuning.FineTuningTask(
        lambda: BiLstmTagger(len(layers) * config.hidden_size, num_labels,
                             lstm_units=FLAGS.lstm_units),
        _loss_fn, head="the BiLSTM tagger trained there", initialise=None, save=save)


def _word_features(config, path: str, features: ner_features.NerFeatures,
                   layers: list[int]) -> feature_cache.WordFeatures:
    parts = {"checkpoint": feature_cache.file_digest(
                 checkpoints.resolve_checkpoint_prefix(FLAGS.init_checkpoint) + ".index"),
             "bert_config": config.to_dict(), "vocab": feature_cache.file_digest(FLAGS.vocab_file),
             "data": feature_cache.file_digest(path), "do_lower_case": FLAGS.do_lower_case,
             "tag_scheme": FLAGS.tag_scheme, "layers": layers,
             "max_seq_length": FLAGS.max_seq_length, "document_context": FLAGS.document_context,
             "dtype": FLAGS.dtype}

    def encode():
        def chosen_layers(outputs, batch):
            return {"features": tf.cast(tf.concat(
                [outputs["encoder_outputs"][i] for i in layers], axis=-1), tf.float32)}
        for outputs in prediction.predict_batches(
                _encoder(config), ArrayExamples(features.to_arrays(), ENCODER_INPUTS,
                                              common_flags.batching_from_flags()),
                FLAGS.predict_batch_size, chosen_layers):
            yield outputs["features"]

    cache_dir = FLAGS.feature_cache_dir or os.path.join(FLAGS.output_dir, "feature_cache")
    return feature_cache.cached_word_features(
        cache_dir, feature_cache.cache_key(parts), {**parts, "data_file": path}, encode,
        features.word_positions, len(layers) * config.hidden_size)


def _word_labels(features: ner_features.NerFeatures) -> np.ndarray:
    """int32 [num_words] each word's label id, -1 for a word without a piece in its sequence."""
    rows = [np.where(positions >= 0, labels[np.maximum(positions, 0)], -1)
            for labels, positions in zip(features.label_ids, features.word_positions)]
    return np.concatenate(rows).astype(np.int32) if rows else np.zeros(0, np.int32)


def _word_examples(words: feature_cache.WordFeatures,
                   labels: np.ndarray | None = None) -> HostExamples:
    """Sentences of word features, each batch padded to its longest sentence."""
    return HostExamples(words.num_sentences, lambda rows: words.batch(rows, labels),
                        words.batch_signature(labels is not None))


def _train(run: fine_tuning.FineTuningRun, config: BertConfig, splits, features,
           labels: list[str], layers: list[int]) -> fine_tuning.Trained:
    logging.info("training with learning rate %g", _learning_rate())
    path, _ = splits["train"]
    if FLAGS.feature_based:
        words = _word_features(config, path, features["train"], layers)
        return fine_tuning.train(run, _feature_based_task(config, len(labels), layers),
                                 _word_examples(words, _word_labels(features["train"])),
                                 run.train_steps(words.num_sentences))
    train = ArrayExamples(features["train"].to_arrays(),
                          batching=common_flags.batching_from_flags())
    return fine_tuning.train(run, _fine_tuned_task(config, labels), train,
                             run.train_steps(train.num_examples))


def _restore(run: fine_tuning.FineTuningRun, config: BertConfig, labels: list[str],
             layers: list[int]) -> fine_tuning.Trained:
    """The trained tagger, when not training: strictly, head included."""
    if FLAGS.feature_based:
        return fine_tuning.restore(run, _feature_based_task(config, len(labels), layers))
    return fine_tuning.restore(run, _fine_tuned_task(config, labels))


def _tag_fine_tuned(model: BertTokenClassifier, features: ner_features.NerFeatures,
                    labels: list[str], batch_size: int) -> tuple[list[list[str]], float]:
    """Predicted tags per sentence and word, and the mean loss over the labelled words."""
    logits = fine_tuning.predict(model, features.to_arrays(), batch_size,
                                 common_flags.batching_from_flags())["logits"]  # [N, T, K]
    loss = float(losses.token_cross_entropy(logits, features.label_ids))
    return ner_features.predicted_word_tags(features, np.argmax(logits, -1), labels), loss


def _tag_feature_based(tagger: BiLstmTagger, config: BertConfig, path: str,
                       features: ner_features.NerFeatures, labels: list[str], layers: list[int],
                       batch_size: int) -> tuple[list[list[str]], float]:
    """As `_tag_fine_tuned`, from the (cached) features of the split in `path`."""
    words = _word_features(config, path, features, layers)
    logits = prediction.predict(                                              # [words, K]
        tagger, _word_examples(words), batch_size,
        lambda outputs, batch: {"logits": tf.boolean_mask(outputs["logits"],
                                                          batch["word_mask"] > 0)})["logits"]
    loss = float(losses.token_cross_entropy(logits[None], _word_labels(features)[None]))
    # Each word's prediction goes to its first piece, where predicted_word_tags reads it.
    predicted = np.zeros_like(features.input_ids)
    for row, positions in enumerate(features.word_positions):
        kept = positions >= 0
        word_ids = np.argmax(logits[words.offsets[row]:words.offsets[row + 1]], -1)
        predicted[row, positions[kept]] = word_ids[kept]
    return ner_features.predicted_word_tags(features, predicted, labels), loss


def _results(evaluation: metrics.NerEvaluation, loss: float, global_step: int) -> dict:
    results = {"eval_precision": evaluation.overall.precision / 100,
               "eval_recall": evaluation.overall.recall / 100,
               "eval_f1": evaluation.overall.f1 / 100,
               "eval_accuracy": evaluation.accuracy / 100, "eval_loss": loss,
               "global_step": global_step}
    for chunk_type, scores in evaluation.per_type.items():
        results.update({f"eval_precision_{chunk_type}": scores.precision / 100,
                        f"eval_recall_{chunk_type}": scores.recall / 100,
                        f"eval_f1_{chunk_type}": scores.f1 / 100})
    return results


def _evaluate(model, config, split: str, path: str, data: conll.ConllData,
              features: ner_features.NerFeatures, labels: list[str], layers: list[int],
              global_step: int) -> None:
    batch_size = FLAGS.eval_batch_size if split == "dev" else FLAGS.predict_batch_size
    if FLAGS.feature_based:
        tags, loss = _tag_feature_based(model, config, path, features, labels, layers, batch_size)
    else:
        tags, loss = _tag_fine_tuned(model, features, labels, batch_size)
    sentences = data.sentences
    evaluation = metrics.evaluate_ner([s.tags for s in sentences], tags)
    with written_together():
        ner_features.write_conll_predictions(
            os.path.join(FLAGS.output_dir, f"predictions_{split}.txt"), sentences, tags)
        metrics.write_report(os.path.join(FLAGS.output_dir, f"conlleval_{split}.txt"),
                             evaluation)
        write_eval_results(os.path.join(FLAGS.output_dir, _RESULTS[split]),
                           _results(evaluation, loss, global_step))
    print(f"***** {split} ({path}) *****\n{metrics.format_report(evaluation)}", flush=True)


def main(_):
    config = common_flags.config_from_flags()
    layers = _check_flags(config)
    tokenizer = common_flags.tokenizer_from_flags(config)
    splits = _read_splits()
    labels = _label_list(splits)
    features = _features(splits, tokenizer, labels)
    tf.io.gfile.makedirs(FLAGS.output_dir)
    strategy = common_flags.setup_from_flags()
    # With --feature_based, --init_checkpoint is the frozen encoder, not the tagger's start.
    run = common_flags.fine_tuning_run(strategy, _learning_rate(),
                                       init_checkpoint="" if FLAGS.feature_based else None)
    if FLAGS.do_train:
        write_text_atomically(os.path.join(FLAGS.output_dir, conll.LABEL_FILE),
                              "\n".join(labels) + "\n")
        trained = _train(run, config, splits, features, labels, layers)
    else:
        trained = _restore(run, config, labels, layers)
    if not run.is_chief:
        return
    for split in ("dev", "test"):
        if split in splits:
            _evaluate(trained.model, config, split, *splits[split], features[split], labels,
                      layers, trained.global_step)


if __name__ == "__main__":
    entry_point.run(main)
