r"""Whole CoNLL-2003 test documents tagged in overlapping windows, against the same model's
per-sentence tags and against transformers' token-classification pipeline with `stride`.

The model is all-MiniLM-L6-v2 fine-tuned on CoNLL-2003 by `run_ner.py` as the fine-tuning
benchmark runs it (`bench/fine_tuning/real_weights.py`: the full train set, max_seq_length 128,
batch 32, learning rate 5e-5, 3 epochs, seed 1; `--epochs` changes that). Then, by
`predict_text.py --task=ner` as a user runs it:
- every test sentence on its own line (each fits in one window of 128);
- every test document on one line, its sentences' words joined, so that most documents take
  several windows (`--doc_stride`, default half a window), each word tagged from the window where
  its first piece has the most context.
The report gives how many words get the same tag both ways (the acceptance: at least 99%); for
the words where they differ in the documents that fit in one sequence of 512, whether the document
tagged in that one sequence sides with the windows (the context changed the tag) or with the
sentence (the windows did); and how the documents' tags agree with transformers' pipeline
(`aggregation_strategy="first"`, `stride` the same overlap) on the model converted by
`convert_checkpoint.py --to=hf`, compared per word by entity type (the pipeline merges B- and I-
into entity groups).

    pip install -r bench/requirements.txt
    python -m bench.ner.long_documents               # resumable: the model is trained once
    python -m bench.ner.long_documents --epochs=1
    # the model bench/ner/document_context.py trained with --document_context:
    python -m bench.ner.long_documents --work_dir=/tmp/bert_ner_documents_context \
      --model=/tmp/bert_ner_context_bench/document_context_seed1/output \
      --model_description="all-MiniLM-L6-v2 fine-tuned by \`run_ner.py --document_context\` ..." \
      --report_name=ner_long_documents_context
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import sys

from absl import flags

from bench.fine_tuning import runs as finetune
from bench.support import (define_output_dir_flag, define_shared_data_flag, log,
                           machine_description, run_logged, write_report, write_text)
from data import tokenization
from data.ner import conll, metrics as ner_metrics
from tasks.ner import tagging_stride
from utils import entry_point

FLAGS = flags.FLAGS

MAX_SEQ_LENGTH = 128
LONGEST = 512  # the model's max_position_embeddings
MIN_AGREEMENT = 0.99


def train_model(work_dir: str, shared_data: str, epochs: int) -> str:
    """run_ner.py fine-tuned on CoNLL-2003, as the fine-tuning benchmark runs it; its folder."""
    run_dir = os.path.join(work_dir, f"conll2003_{epochs}ep")
    output = os.path.join(run_dir, "output")
    if os.path.exists(os.path.join(output, "eval_results.txt")):
        return output
    os.makedirs(run_dir, exist_ok=True)
    hf_dir = finetune.hf_model_dir()
    bert = finetune.bert_dir(work_dir, hf_dir)
    data = finetune.prepare_data(shared_data, work_dir)
    task = dataclasses.replace(finetune.TASKS["conll2003"], num_epochs=epochs)
    log(f"fine-tuning on CoNLL-2003 for {epochs} epochs (log {run_dir}/run.log)")
    result = finetune.run_this_project(task, 1, bert, data, run_dir)
    log(f"dev F1 {result['eval_f1']:.4f}")
    return output


def test_documents(test_file: str) -> list[list[conll.ConllSentence]]:
    """The test documents, each a list of sentences."""
    data = conll.read_conll_file(test_file)
    return [list(document.sentences) for document in data.documents if document.sentences]


def entity_f1(documents: list[list[conll.ConllSentence]], tags: list[list[str]]) -> float:
    """Entity F1 (conlleval's) of each sentence's predicted `tags` against its gold tags."""
    gold = [[token.tag for token in s.tokens] for document in documents for s in document]
    return ner_metrics.evaluate_ner(gold, tags).overall.f1 / 100


def predict(model: str, lines: list[str], work_dir: str, name: str,
            max_seq_length: int = MAX_SEQ_LENGTH) -> list[list[str]]:
    """predict_text.py --task=ner over the lines; each line's tags."""
    input_file = os.path.join(work_dir, f"{name}.txt")
    output_file = os.path.join(work_dir, f"{name}.jsonl")
    write_text(input_file, "".join(line + "\n" for line in lines))
    run_logged([sys.executable, "predict_text.py", "--task=ner", f"--model={model}",
                f"--input_file={input_file}", f"--output_file={output_file}",
                f"--max_seq_length={max_seq_length}"], os.path.join(work_dir, f"{name}.log"))
    with open(output_file, encoding="utf-8") as f:
        return [json.loads(line)["tags"] for line in f]


def by_document(documents: list[list[conll.ConllSentence]], sentence_tags: list[list[str]]
                ) -> list[list[str]]:
    """Per-sentence tag lists joined into one list per document."""
    tags, index = [], 0
    for document in documents:
        tags.append([tag for s in sentence_tags[index:index + len(document)] for tag in s])
        index += len(document)
    if index != len(sentence_tags):
        raise ValueError(f"{len(sentence_tags)} sentences' tags for {index} sentences")
    return tags


def run_ner_test_tags(model: str, documents: list[list[conll.ConllSentence]]
                      ) -> list[list[str]] | None:
    """Each document's tags in run_ner.py's predictions_test.txt (`word gold predicted` lines,
    a blank line after each sentence) of the model's folder; None if it has none."""
    path = os.path.join(model, "predictions_test.txt")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        sentences = [[line.split()[-1] for line in block.splitlines()]
                     for block in f.read().split("\n\n") if block.strip()]
    try:
        return by_document(documents, sentences)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


def entity_type(tag: str) -> str:
    return conll.parse_tag(tag)[1] or "O"


def transformers_word_types(model: str, work_dir: str, texts: list[str],
                            words: list[list[str]]) -> list[list[str]]:
    """Each word's entity type ("O" outside entities) by transformers' pipeline with `stride`."""
    from transformers import AutoTokenizer, pipeline  # pylint: disable=import-outside-toplevel
    hf_dir = os.path.join(work_dir, "conll2003_hf")
    if not os.path.isfile(os.path.join(hf_dir, "config.json")):
        run_logged([sys.executable, "convert_checkpoint.py", f"--input={model}",
                    f"--output={hf_dir}", "--to=hf"], os.path.join(work_dir, "convert_hf.log"))
    tokenizer = AutoTokenizer.from_pretrained(hf_dir, model_max_length=MAX_SEQ_LENGTH)
    stride = MAX_SEQ_LENGTH - 2 - tagging_stride(MAX_SEQ_LENGTH, None)  # the same overlap
    tagger = pipeline("token-classification", model=hf_dir, tokenizer=tokenizer,
                      aggregation_strategy="first", stride=stride, device="cpu")
    types = []
    for text, text_words in zip(texts, words):
        starts, position = [], 0
        for word in text_words:
            starts.append(text.index(word, position))
            position = starts[-1] + len(word)
        word_types = ["O"] * len(text_words)
        for entity in tagger(text):
            for i, start in enumerate(starts):
                if entity["start"] <= start < entity["end"]:
                    word_types[i] = entity["entity_group"]
        types.append(word_types)
    return types


def same_count(first: list[list[str]], second: list[list[str]], only_entities: bool = False
               ) -> int:
    """How many words get the same tag in both (only those `first` tags as entities)."""
    return sum(a == b for doc_a, doc_b in zip(first, second) for a, b in zip(doc_a, doc_b)
               if not only_entities or a != "O")


def whole_document_sides(sentence_tags: list[list[str]], window_tags: list[list[str]],
                         whole_tags: list[list[str]]) -> tuple[int, int, int]:
    """Over the words whose tag in windows differs from their sentence's (documents given in the
    three ways, word by word): how many there are, and how many of them the whole document in one
    sequence tags as the windows do and as the sentence does. The first share is the context's
    doing (the whole document has it too), the second the windows'."""
    differing = [(sentence, window, whole) for doc in zip(sentence_tags, window_tags, whole_tags)
                 for sentence, window, whole in zip(*doc) if sentence != window]
    return (len(differing), sum(whole == window for _, window, whole in differing),
            sum(whole == sentence for sentence, _, whole in differing))


def measure(model: str, documents: list[list[conll.ConllSentence]], work_dir: str) -> dict:
    """The documents tagged whole against the other ways of tagging them; the report's figures."""
    sentences = [[token.word for token in s.tokens] for document in documents for s in document]
    doc_words = [[token.word for s in document for token in s.tokens] for document in documents]
    words = sum(map(len, doc_words))
    log(f"{len(documents)} test documents, {len(sentences)} sentences, {words} words")
    sentence_tags = predict(model, [" ".join(s) for s in sentences], work_dir, "sentences")
    document_tags = predict(model, [" ".join(w) for w in doc_words], work_dir, "documents")
    # Windows alone, without the change of context: the documents that fit in one sequence of
    # the model's longest (512), tagged in it and in windows of 128.
    tokenizer = tokenization.FullTokenizer(os.path.join(model, "vocab.txt"), do_lower_case=True)
    fitting = [i for i, w in enumerate(doc_words)
               if len(tokenizer.tokenize(" ".join(w))) <= LONGEST - 2]
    whole = predict(model, [" ".join(doc_words[i]) for i in fitting], work_dir,
                    "documents_whole", LONGEST)
    same_whole = same_count(whole, [document_tags[i] for i in fitting])
    fitting_words = sum(len(doc_words[i]) for i in fitting)
    log(f"{len(fitting)} documents in one sequence of {LONGEST} against windows: "
        f"{same_whole}/{fitting_words} words the same tag")
    # The documents' tags cut back into their sentences, for the F1 against the gold tags.
    sentence_lengths = iter(map(len, sentences))
    document_sentence_tags = []
    for tags in document_tags:
        while tags:
            length = next(sentence_lengths)
            document_sentence_tags.append(tags[:length])
            tags = tags[length:]
    sentence_by_document = by_document(documents, sentence_tags)
    differing, whole_as_windows, whole_as_sentences = whole_document_sides(
        [sentence_by_document[i] for i in fitting], [document_tags[i] for i in fitting], whole)
    same = same_count(sentence_by_document, document_tags)
    log(f"documents against sentences: {same}/{words} words the same tag")
    ours = [[entity_type(tag) for tag in tags] for tags in document_tags]
    hf_types = transformers_word_types(model, work_dir, [" ".join(w) for w in doc_words],
                                       doc_words)
    with open(os.path.join(work_dir, "documents.log"), encoding="utf-8") as f:
        windowed = re.search(r"(\d+) of \d+ texts were longer than max_seq_length=\d+: tagged "
                             r"in (\d+) windows", f.read())
    result = {"documents": len(documents), "sentences": len(sentences), "words": words,
              "max_seq_length": MAX_SEQ_LENGTH,
              "doc_stride": tagging_stride(MAX_SEQ_LENGTH, None),
              "same_tag_as_sentences": same / words,
              "documents_in_one_sequence": len(fitting), "words_in_them": fitting_words,
              "same_tag_as_one_sequence": same_whole / fitting_words,
              "differing_words_in_one_sequence": differing,
              "differing_whole_as_windows": whole_as_windows / max(differing, 1),
              "differing_whole_as_sentences": whole_as_sentences / max(differing, 1),
              "test_f1_sentences": entity_f1(documents, sentence_tags),
              "test_f1_documents": entity_f1(documents, document_sentence_tags),
              "same_type_as_transformers": same_count(ours, hf_types) / words,
              "same_type_as_transformers_on_our_entity_words":
                  same_count(ours, hf_types, only_entities=True)
                  / sum(t != "O" for doc in ours for t in doc),
              "documents_in_windows": int(windowed[1]), "windows": int(windowed[2])}
    script_tags = run_ner_test_tags(model, documents)
    if script_tags is not None:
        result["same_tag_as_run_ner_test"] = same_count(document_tags, script_tags) / words
        log(f"documents against run_ner.py's test predictions: "
            f"{100 * result['same_tag_as_run_ner_test']:.2f}% of words the same tag")
    return result


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    flags.DEFINE_string("work_dir", "/tmp/bert_ner_documents_bench",
                        "Model, data, the texts tagged and the logs.")
    define_output_dir_flag("ner_long_documents", "the report's .json and .md")
    flags.DEFINE_integer("epochs", finetune.TASKS["conll2003"].num_epochs,
                         "Training epochs of the model trained here (without --model).")
    flags.DEFINE_string("model", None, "A run_ner.py output folder to use instead of training "
                        "one (e.g. bench/ner/document_context.py's, trained with "
                        "--document_context); its predictions_test.txt, if any, is compared too.")
    flags.DEFINE_string("model_description", None, "What --model is, for the report (default: "
                        "its path).")
    flags.DEFINE_string("report_name", "ner_long_documents",
                        "The report's file names in --output_dir (.json, .md).")
    define_shared_data_flag()


def main(argv: list[str]) -> None:
    del argv
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    model = FLAGS.model or train_model(FLAGS.work_dir, FLAGS.shared_data, FLAGS.epochs)
    documents = test_documents(os.path.join(FLAGS.shared_data, "conll2003", "test.txt"))
    result = {**measure(model, documents, FLAGS.work_dir),
              "model": FLAGS.model and (FLAGS.model_description or f"The model in `{FLAGS.model}`"),
              "epochs": None if FLAGS.model else FLAGS.epochs, "machine": machine_description()}
    with open(os.path.join(model, "eval_results.txt"), encoding="utf-8") as f:
        result["dev"] = {k: float(v) for k, v in (l.strip().split(" = ") for l in f if " = " in l)}
    report = os.path.join(FLAGS.output_dir, FLAGS.report_name)
    write_report(report, result, report_markdown(result), sort_keys=True)
    log(f"report: {report}.md")


def report_markdown(result: dict) -> str:
    agreement = result["same_tag_as_sentences"]
    model = (result["model"] if result.get("model") else
             f"all-MiniLM-L6-v2 fine-tuned by `run_ner.py` ({result['epochs']} epochs)")
    rows = [
        f"| each document on one line against each sentence on its own line (the same tag) | "
        f"{100 * agreement:.2f}% ({'at least' if agreement >= MIN_AGREEMENT else 'below'} "
        f"{100 * MIN_AGREEMENT:.0f}%) |"]
    if "same_tag_as_run_ner_test" in result:
        rows.append("| each document on one line against run_ner.py's test predictions "
                    "(`predictions_test.txt`; with `--document_context`, each sentence amid its "
                    f"document) | {100 * result['same_tag_as_run_ner_test']:.2f}% |")
    rows += [
        f"| the {result['documents_in_one_sequence']} documents that fit in one sequence of "
        f"{LONGEST} ({result['words_in_them']} words): in windows of {result['max_seq_length']} "
        f"against that one sequence (the same tag) | "
        f"{100 * result['same_tag_as_one_sequence']:.2f}% |"]
    if "differing_words_in_one_sequence" in result:
        rows.append(
            f"| in those documents, the {result['differing_words_in_one_sequence']} words whose "
            f"tag in windows differs from their sentence's: the document in one sequence tags "
            f"them as the windows do / as the sentence does | "
            f"{100 * result['differing_whole_as_windows']:.1f}% / "
            f"{100 * result['differing_whole_as_sentences']:.1f}% |")
    rows += [
        f"| test entity F1: each sentence alone / each document whole | "
        f"{100 * result['test_f1_sentences']:.2f} / {100 * result['test_f1_documents']:.2f} |",
        f"| documents: this project against transformers' pipeline with `stride` (entity type) | "
        f"{100 * result['same_type_as_transformers']:.2f}% |",
        f"| the same, on the words this project tags as entities | "
        f"{100 * result['same_type_as_transformers_on_our_entity_words']:.2f}% |"]
    return "\n".join([
        "# CoNLL-2003 test documents tagged whole, in windows", "",
        f"{model}, dev F1 {100 * result['dev']['eval_f1']:.1f}, max_seq_length "
        f"{result['max_seq_length']}, `--doc_stride` {result['doc_stride']} (the default). "
        f"{result['documents']} test documents ({result['documents_in_windows']} of them longer "
        f"than one sequence, read in {result['windows']} windows), {result['sentences']} "
        f"sentences, {result['words']} words.", "",
        "| compared | words in agreement |", "|---|---|", *rows, "",
        f"Machine: {result['machine']['cpu']}, {', '.join(result['machine']['isa'])}.", ""])

if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
