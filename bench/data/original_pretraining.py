"""Single-process reference of the original `create_pretraining_data.py` algorithm.

It computes what Google's original script computes, draw for draw: one `random.Random(seed)`
drives the document shuffle, the packing of every document `dupe_factor` times, the masking and
the final shuffle of all instances, so with the same tokenizer and seed it reproduces the
original's instances exactly (the tests check this against the fixtures). It holds the whole
corpus and every instance in memory, as the original does. It lives here, beside the benchmark
that runs it as the baseline (`bench.data.create_pretraining_data`), and the tests import it from
here too: the statistics tests compare the streaming pipeline against it on corpora larger than
the fixtures, and the masking and instance tests check the pipeline's pieces rule by rule.
"""
from __future__ import annotations

import dataclasses
import random
from typing import Sequence

import tensorflow as tf

from data import tokenization


@dataclasses.dataclass
class ReferenceInstance:
    """One pretraining example as the original builds it (tokens as strings)."""

    tokens: list[str]
    segment_ids: list[int]
    is_random_next: bool
    masked_lm_positions: list[int]
    masked_lm_labels: list[str]


def read_documents(input_files: Sequence[str],
                   tokenizer: tokenization.FullTokenizer) -> list[list[list[str]]]:
    """Documents of tokenized sentences; blank lines separate documents, even across files."""
    documents: list[list[list[str]]] = [[]]
    for input_file in input_files:
        with open(input_file, "rb") as reader:
            for raw_line in reader:
                line = tokenization.convert_to_unicode(raw_line).strip()
                if not line:
                    documents.append([])
                tokens = tokenizer.tokenize(line)
                if tokens:
                    documents[-1].append(tokens)
    return [document for document in documents if document]


def create_training_instances(documents: list[list[list[str]]], vocab_words: list[str],
                              max_seq_length: int, dupe_factor: int, short_seq_prob: float,
                              masked_lm_prob: float, max_predictions_per_seq: int,
                              do_whole_word_mask: bool,
                              rng: random.Random) -> list[ReferenceInstance]:
    """Shuffles the documents, packs each one `dupe_factor` times, shuffles the instances."""
    rng.shuffle(documents)
    instances = []
    for _ in range(dupe_factor):
        for document_index in range(len(documents)):
            instances.extend(_instances_from_document(
                documents, document_index, max_seq_length, short_seq_prob, masked_lm_prob,
                max_predictions_per_seq, vocab_words, do_whole_word_mask, rng))
    rng.shuffle(instances)
    return instances


def _instances_from_document(documents, document_index, max_seq_length, short_seq_prob,
                             masked_lm_prob, max_predictions_per_seq, vocab_words,
                             do_whole_word_mask, rng) -> list[ReferenceInstance]:
    document = documents[document_index]
    max_num_tokens = max_seq_length - 3
    target_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_length = rng.randint(2, max_num_tokens)
    instances = []
    chunk: list[list[str]] = []
    chunk_length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        chunk_length += len(document[i])
        if i == len(document) - 1 or chunk_length >= target_length:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [token for segment in chunk[:a_end] for token in segment]
            tokens_b: list[str] = []
            is_random_next = len(chunk) == 1 or rng.random() < 0.5
            if is_random_next:
                target_b_length = target_length - len(tokens_a)
                for _ in range(10):
                    random_index = rng.randint(0, len(documents) - 1)
                    if random_index != document_index:
                        break
                random_document = documents[random_index]
                for segment in random_document[rng.randint(0, len(random_document) - 1):]:
                    tokens_b.extend(segment)
                    if len(tokens_b) >= target_b_length:
                        break
                # The segments of this chunk left out of A are read again by the next chunk.
                i -= len(chunk) - a_end
            else:
                tokens_b = [token for segment in chunk[a_end:] for token in segment]
            truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            tokens = ["[CLS]", *tokens_a, "[SEP]", *tokens_b, "[SEP]"]
            segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
            tokens, positions, labels = create_masked_lm_predictions(
                tokens, masked_lm_prob, max_predictions_per_seq, vocab_words,
                do_whole_word_mask, rng)
            instances.append(ReferenceInstance(tokens, segment_ids, is_random_next,
                                               positions, labels))
            chunk = []
            chunk_length = 0
        i += 1
    return instances


def truncate_seq_pair(tokens_a: list[str], tokens_b: list[str], max_num_tokens: int,
                      rng: random.Random) -> None:
    """Removes tokens one at a time from the longer side (B on ties), front or back."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def create_masked_lm_predictions(tokens: list[str], masked_lm_prob: float,
                                 max_predictions_per_seq: int, vocab_words: list[str],
                                 do_whole_word_mask: bool, rng: random.Random):
    """Returns (masked tokens, sorted masked positions, original tokens at those positions)."""
    groups: list[list[int]] = []
    for index, token in enumerate(tokens):
        if token in ("[CLS]", "[SEP]"):
            continue
        if do_whole_word_mask and groups and token.startswith("##"):
            groups[-1].append(index)
        else:
            groups.append([index])
    rng.shuffle(groups)
    output = list(tokens)
    num_to_predict = min(max_predictions_per_seq,
                         max(1, int(round(len(tokens) * masked_lm_prob))))
    masked: list[tuple[int, str]] = []
    for group in groups:
        if len(masked) >= num_to_predict:
            break
        if len(masked) + len(group) > num_to_predict:
            continue
        for index in group:
            if rng.random() < 0.8:
                output[index] = "[MASK]"
            elif rng.random() < 0.5:
                output[index] = tokens[index]
            else:
                output[index] = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            masked.append((index, tokens[index]))
    masked.sort()
    return output, [index for index, _ in masked], [label for _, label in masked]


def write_instances(instances: Sequence[ReferenceInstance],
                    tokenizer: tokenization.FullTokenizer, max_seq_length: int,
                    max_predictions_per_seq: int, output_files: Sequence[str]) -> int:
    """Writes tf.train.Examples round-robin over `output_files`; returns the count."""
    writers = [tf.io.TFRecordWriter(path) for path in output_files]
    for index, instance in enumerate(instances):
        input_ids = tokenizer.convert_tokens_to_ids(instance.tokens)
        padding = [0] * (max_seq_length - len(input_ids))
        masked_ids = tokenizer.convert_tokens_to_ids(instance.masked_lm_labels)
        masked_padding = [0] * (max_predictions_per_seq - len(masked_ids))
        features = {
            "input_ids": _int_feature(input_ids + padding),
            "input_mask": _int_feature([1] * len(input_ids) + padding),
            "segment_ids": _int_feature(instance.segment_ids + padding),
            "masked_lm_positions": _int_feature(instance.masked_lm_positions + masked_padding),
            "masked_lm_ids": _int_feature(masked_ids + masked_padding),
            "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(
                value=[1.0] * len(masked_ids) + [0.0] * len(masked_padding))),
            "next_sentence_labels": _int_feature([1 if instance.is_random_next else 0]),
        }
        example = tf.train.Example(features=tf.train.Features(feature=features))
        writers[index % len(writers)].write(example.SerializeToString())
    for writer in writers:
        writer.close()
    return len(instances)


def _int_feature(values: list[int]) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def run_reference(input_files: Sequence[str], output_files: Sequence[str], vocab_file: str,
                  do_lower_case: bool = True, do_whole_word_mask: bool = False,
                  max_seq_length: int = 128, max_predictions_per_seq: int = 20,
                  random_seed: int = 12345, dupe_factor: int = 10,
                  masked_lm_prob: float = 0.15, short_seq_prob: float = 0.1,
                  tokenizer: tokenization.FullTokenizer | None = None
                  ) -> list[ReferenceInstance]:
    """The original script's `main`: read, create instances, write; returns the instances."""
    tokenizer = tokenizer or tokenization.FullTokenizer(vocab_file, do_lower_case)
    documents = read_documents(input_files, tokenizer)
    instances = create_training_instances(
        documents, list(tokenizer.vocab.keys()), max_seq_length, dupe_factor, short_seq_prob,
        masked_lm_prob, max_predictions_per_seq, do_whole_word_mask,
        random.Random(random_seed))
    if output_files:
        write_instances(instances, tokenizer, max_seq_length, max_predictions_per_seq,
                        output_files)
    return instances
