"""Puts a model to work on new text, one text a line: fill-mask, a vector per sentence, or the
answer of a model fine-tuned by run_classifier.py, run_squad.py, run_swag.py or run_ner.py.

    python predict_text.py --task=fill_mask --model=$BERT_DIR/bert_model.ckpt \
      --input_file=sentences.txt --output_file=filled.jsonl --top_k=5
    python predict_text.py --task=embed --model=all-MiniLM-L6-v2 --input_file=- \
      --output_file=vectors.npy     # vectors.npy, float32 [lines, H], and vectors.txt, the lines
    python predict_text.py --task=classify --model=/tmp/mrpc_output --input_file=pairs.txt \
      --output_file=answers.jsonl

--model is any checkpoint the project reads (a TF1 prefix, this project's output folder, a
Hugging Face or sentence-transformers folder, ...); its bert_config.json and vocab.txt are found
beside it unless --bert_config_file and --vocab_file are given. Input: UTF-8, one text a line,
`text_a ||| text_b` for a pair, from a file or from stdin (`-`). Every line gets one output,
empty lines included, in the input's order.

- fill_mask: one JSON object a line, {"line": n, "text": ..., "masks": [[{"token", "token_id",
  "probability"}, ... top_k] for each [MASK] in order]}.
- embed: `.npy` (with the lines beside it, `.txt`), or for any other name one JSON object a line,
  {"line": n, "text": ..., "embedding": [...]}. Pooled as --pooling says; a sentence-transformers
  folder brings its own pooling, normalisation and max_seq_length.
- classify: a model run_classifier.py fine-tuned (its --output_dir, or any classifier
  checkpoint): {"line": n, "text": ..., "label": ..., "probabilities": {label: p, ...}}, the
  label names the model was saved with; a multi-label model: {"line", "text", "labels": [those
  whose sigmoid reaches 0.5], "probabilities"}; a regression model (STS-B): {"line", "text",
  "prediction"}. A line longer than --max_seq_length is read in overlapping windows (a pair:
  windows of its longer side, the shorter kept in each) and the windows' probabilities (or
  predictions) are averaged.
- squad: `question ||| context` a line, a model run_squad.py fine-tuned: {"line", "text",
  "answer", "probability", "start_logit", "end_logit"} (run_squad.py's window and answer flags).
- swag: `context ||| ending ||| ending ||| ending ||| ending`, a model run_swag.py fine-tuned:
  {"line", "text", "prediction": the ending's index, "probabilities": [4]}.
- ner: a sentence a line, its words split at whitespace, a model run_ner.py fine-tuned:
  {"line", "text", "words": [...], "tags": [...]}. A sentence longer than --max_seq_length is
  tagged in overlapping windows, each word from the window where its first piece has the most
  context.
An empty line's answer is null (squad, swag); a line without its parts is named before the model
is read.
"""
from utils import tensorflow_startup  # noqa: F401  (first: TensorFlow starts quietly)
from utils import entry_point

import dataclasses
import io
import json
import os

from absl import flags, logging
import numpy as np

import common_flags
from tasks import squad
from tasks.classifier import TextClassifier
from tasks.embedding import POOLINGS, SentenceEmbedder
from tasks.fill_mask import FillMask
from tasks.ner import EntityTagger
from tasks.swag import MultipleChoice
from utils.output_files import AtomicFile
from utils.progress import Progress

FLAGS = flags.FLAGS
flags.DEFINE_enum("task", None, ["fill_mask", "embed", "classify", "squad", "swag", "ner"],
                  "What to compute for each line.")
flags.DEFINE_string("model", None, "The model: a checkpoint prefix or folder of any format.")
flags.DEFINE_string("input_file", None, "Text file, one text a line; `-` reads stdin.")
flags.DEFINE_string("output_file", None, "JSON lines; for embed, a `.npy` file instead.")
flags.DEFINE_string("bert_config_file", None, "The model's bert_config.json, if not beside it.")
flags.DEFINE_string("vocab_file", None, "The model's vocab.txt, if not beside it.")
flags.DEFINE_bool("do_lower_case", None, "Lower-case the input. Default: what the model's "
                  "folder records, else true.")
flags.DEFINE_integer("max_seq_length", None, "Longest sequence after WordPiece tokenization. "
                     "fill_mask, embed and swag truncate longer texts (and count them); squad, "
                     "classify and ner read them in overlapping windows (--doc_stride). Default: "
                     "a sentence-transformers folder's, squad 384, else 128.")
flags.DEFINE_integer("batch_size", 32, "Texts per batch.")
flags.DEFINE_integer("top_k", 5, "fill_mask: tokens given for each [MASK].")
flags.DEFINE_enum("pooling", None, list(POOLINGS), "embed: the last layer at [CLS], the pooler "
                  "output, or the mean or max over the tokens. Default: a sentence-transformers "
                  "folder's, else cls.")
flags.DEFINE_bool("normalize", None, "embed: L2-normalise each vector. Default: a "
                  "sentence-transformers folder's, else false.")
flags.DEFINE_integer("doc_stride", None,
                     "Tokens between the starts of the overlapping windows of a text longer than "
                     "--max_seq_length. squad: windows of the context, each answer start scored "
                     f"in its window of most context (default {squad.Windows.doc_stride}). ner: "
                     "windows of the sentence, each word tagged from the window where its first "
                     "piece has the most context. classify: windows of the text (of a pair, of "
                     "its longer side; the shorter, cut to half a window at most, is in every "
                     "window), the windows' probabilities averaged. Default for ner and classify: "
                     "half a window. Texts that fit are one sequence, as without windows.")
flags.DEFINE_integer("max_query_length", squad.Windows.max_query_length,
                     "squad: longest question, in pieces.")
flags.DEFINE_integer("n_best_size", squad.AnswerRules.n_best_size,
                     "squad: candidate spans considered.")
flags.DEFINE_integer("max_answer_length", squad.AnswerRules.max_answer_length,
                     "squad: longest answer, in pieces.")
flags.DEFINE_bool("version_2_with_negative", False, "squad: SQuAD v2.0's rule: no answer when "
                  "the null score beats the best span's by null_score_diff_threshold.")
flags.DEFINE_float("null_score_diff_threshold", 0.0, "squad: see version_2_with_negative.")
common_flags.define_batching_flags(group_by_length=False)
flags.mark_flags_as_required(["task", "model", "input_file", "output_file"])

# Lines given to the model per call: outputs are written (and progress shown) after each.
_CHUNK = 1024


def read_lines(path: str) -> list[str]:
    """The input's lines, decoded strictly: a line that is not UTF-8 is named before any work."""
    with (open(0, "rb", closefd=False) if path == "-" else open(path, "rb")) as f:
        data = f.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    texts = []
    for number, line in enumerate(lines, start=1):
        try:
            texts.append(line.rstrip(b"\r").decode("utf-8"))
        except UnicodeDecodeError as error:
            name = "stdin" if path == "-" else path
            raise ValueError(f"{name}, line {number}: not valid UTF-8 ({error.reason} at byte "
                             f"{error.start})") from None
    return texts


def _chunks(texts: list[str], progress: Progress):
    for start in range(0, len(texts), _CHUNK):
        yield start, texts[start:start + _CHUNK]
        progress.update(len(texts[start:start + _CHUNK]))


def _fill_mask(texts: list[str], progress: Progress) -> None:
    fill_mask = FillMask.from_checkpoint(
        FLAGS.model, vocab_file=FLAGS.vocab_file, bert_config_file=FLAGS.bert_config_file,
        do_lower_case=FLAGS.do_lower_case, max_seq_length=FLAGS.max_seq_length or 128,
        **_batch_settings())
    without = 0
    with AtomicFile(FLAGS.output_file) as out:
        for start, chunk in _chunks(texts, progress):
            for number, (text, masks) in enumerate(zip(chunk, fill_mask(chunk, FLAGS.top_k)),
                                                   start=start):
                without += not masks
                out.write(json.dumps({"line": number, "text": text, "masks": [
                    [{"token": s.token, "token_id": s.token_id, "probability": s.probability}
                     for s in scores] for scores in masks]}) + "\n")
    if without:
        logging.info("%d of %d lines have no [MASK] (after truncation)", without, len(texts))


def _embed(texts: list[str], progress: Progress) -> None:
    embedder = SentenceEmbedder.from_checkpoint(
        FLAGS.model, pooling=FLAGS.pooling, normalize=FLAGS.normalize,
        max_seq_length=FLAGS.max_seq_length, vocab_file=FLAGS.vocab_file,
        bert_config_file=FLAGS.bert_config_file, do_lower_case=FLAGS.do_lower_case,
        **_batch_settings())
    if FLAGS.output_file.endswith(".npy"):
        vectors = [embedder(chunk) for _, chunk in _chunks(texts, progress)]
        lines_file = FLAGS.output_file[:-len(".npy")] + ".txt"
        # Both files are complete before either takes its final name.
        with AtomicFile(FLAGS.output_file, binary=True) as out, AtomicFile(lines_file) as lines:
            array = io.BytesIO()
            np.save(array, np.concatenate(vectors) if vectors else
                    np.zeros((0, embedder.model.config.hidden_size), np.float32))
            out.write(array.getvalue())
            lines.write("".join(text + "\n" for text in texts))
        return
    with AtomicFile(FLAGS.output_file) as out:
        for start, chunk in _chunks(texts, progress):
            for number, (text, vector) in enumerate(zip(chunk, embedder(chunk)), start=start):
                out.write(json.dumps({"line": number, "text": text,
                                      "embedding": [float(x) for x in vector]}) + "\n")


def _classify(answer) -> dict:
    if answer.label is None:
        return {"prediction": answer.prediction}
    if answer.labels is not None:
        return {"labels": list(answer.labels), "probabilities": answer.probabilities}
    return {"label": answer.label, "probabilities": answer.probabilities}


def _answer(answer) -> dict:
    if answer is None:
        return {"answer": None}
    return {"answer": answer.text, "probability": answer.probability,
            "start_logit": answer.start_logit, "end_logit": answer.end_logit}


def _choose(choice) -> dict:
    return {"prediction": None} if choice is None else dataclasses.asdict(choice)


def _tag(words) -> dict:
    return {"words": [w.word for w in words], "tags": [w.tag for w in words]}


def _squad_settings() -> dict:
    doc_stride = squad.Windows.doc_stride if FLAGS.doc_stride is None else FLAGS.doc_stride
    windows = squad.Windows(FLAGS.max_seq_length or squad.Windows.max_seq_length, doc_stride,
                            FLAGS.max_query_length)
    rules = squad.AnswerRules(FLAGS.n_best_size, FLAGS.max_answer_length,
                              version_2_with_negative=FLAGS.version_2_with_negative,
                              null_score_diff_threshold=FLAGS.null_score_diff_threshold)
    return {"windows": windows, "rules": rules}


def _length_settings() -> dict:
    return {"max_seq_length": FLAGS.max_seq_length or 128}


def _window_settings() -> dict:
    return {**_length_settings(), "doc_stride": FLAGS.doc_stride}


# --task -> (the model's class, its settings from the flags, its record of one answer).
_FINE_TUNED = {"classify": (TextClassifier, _window_settings, _classify),
               "squad": (squad.QuestionAnswerer, _squad_settings, _answer),
               "swag": (MultipleChoice, _length_settings, _choose),
               "ner": (EntityTagger, _window_settings, _tag)}


def _fine_tuned(texts: list[str], progress: Progress) -> None:
    """A fine-tuned model's answers, one JSON object a line: {"line", "text", ...the answer}."""
    model_class, settings, record = _FINE_TUNED[FLAGS.task]
    model = model_class.from_checkpoint(
        FLAGS.model, vocab_file=FLAGS.vocab_file, bert_config_file=FLAGS.bert_config_file,
        do_lower_case=FLAGS.do_lower_case, **settings(), **_batch_settings())
    with AtomicFile(FLAGS.output_file) as out:
        for start, chunk in _chunks(texts, progress):
            for number, (text, answer) in enumerate(zip(chunk, model(chunk)), start=start):
                out.write(json.dumps({"line": number, "text": text, **record(answer)}) + "\n")


def _check_layout(texts: list[str]) -> None:
    """Every line of --task=squad or swag has its parts, checked before the model is read."""
    parse = getattr(_FINE_TUNED.get(FLAGS.task, (None,))[0], "parse", None)
    if parse is None:
        return
    for number, text in enumerate(texts, start=1):
        if text.strip():
            try:
                parse(text)
            except ValueError as error:
                name = "stdin" if FLAGS.input_file == "-" else FLAGS.input_file
                raise ValueError(f"{name}, line {number}: {error}") from None


def _batch_settings() -> dict:
    return {"batch_size": FLAGS.batch_size, "batching": common_flags.batching_from_flags()}


def main(_):
    if FLAGS.top_k < 1:
        raise ValueError(f"--top_k={FLAGS.top_k} must be positive")
    if FLAGS.batch_size < 1:
        raise ValueError(f"--batch_size={FLAGS.batch_size} must be positive")
    if FLAGS.doc_stride is not None and FLAGS.doc_stride < 1:
        raise ValueError(f"--doc_stride={FLAGS.doc_stride} must be at least 1")
    folder = os.path.dirname(os.path.abspath(FLAGS.output_file))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"--output_file={FLAGS.output_file}: folder {folder} not found")
    texts = read_lines(FLAGS.input_file)
    _check_layout(texts)
    empty = sum(not text.strip() for text in texts)
    if empty:
        logging.info("%d of %d lines are empty", empty, len(texts))
    progress = Progress("lines", len(texts))
    {"fill_mask": _fill_mask, "embed": _embed}.get(FLAGS.task, _fine_tuned)(texts, progress)
    logging.info("%s; wrote %s", progress.done(), FLAGS.output_file)


if __name__ == "__main__":
    entry_point.run(main)
