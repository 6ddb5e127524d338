"""One chunk of corpus in, shuffled framed TFRecords of its pretraining instances out.

This is the work of one worker process: tokenize the chunk's documents, pack each of them
`dupe_factor` times (random next sentences come from the chunk's other documents), shuffle the
chunk's instances, mask them, encode them as `tf.train.Example`s and frame them as TFRecords. All
randomness comes from generators seeded with (random_seed, chunk index), so a chunk's records do
not depend on which process made them nor on how many processes there are.
"""
from __future__ import annotations

import array
import dataclasses
import random
import signal

import numpy as np

from data import tokenization
from data.pretraining import (instances as pretraining_instances, masked_lm,
                              records as pretraining_records, tfrecord_io)
from data.pretraining.cached_tokenizer import WordCachedTokenizer
from data.pretraining.corpus import CorpusChunk

# Instances assembled, masked and encoded together (their temporary arrays stay in cache).
_BATCH_INSTANCES = 2048


@dataclasses.dataclass(frozen=True)
class ChunkSettings:
    """Everything a worker needs besides the chunk."""

    vocab_file: str
    do_lower_case: bool
    config: pretraining_instances.PretrainingConfig
    random_seed: int


@dataclasses.dataclass
class ChunkResult:
    """The records of one chunk and what was skipped on the way.

    Attributes:
      index: the chunk's index.
      framed: the chunk's framed TFRecords back to back, in shuffled order.
      ends: the N + 1 offsets of the records in `framed`.
      num_bytes: input bytes the chunk came from.
      documents: documents with at least one token.
      empty_documents: documents none of whose lines gave a token (skipped).
      lines_without_tokens: non-blank lines that gave no token (skipped).
      tokens: WordPiece tokens of the chunk.
    """

    index: int
    framed: bytes
    ends: list[int]
    num_bytes: int
    documents: int
    empty_documents: int
    lines_without_tokens: int
    tokens: int

    @property
    def records(self) -> list[bytes]:
        """The framed records, one bytes object each."""
        return tfrecord_io.split_framed(self.framed, self.ends)


def chunk_generators(random_seed: int, chunk_index: int
                     ) -> tuple[random.Random, np.random.Generator]:
    """Independent Python and NumPy generators for one chunk."""
    packing_seed, masking_seed = np.random.SeedSequence(
        [random_seed % (1 << 64), chunk_index]).spawn(2)
    packing_rng = random.Random(int.from_bytes(packing_seed.generate_state(4).tobytes(), "little"))
    return packing_rng, np.random.Generator(np.random.PCG64(masking_seed))


class ChunkProcessor:
    """Turns chunks into records; holds the tokenizer, its word memo and the encoders."""

    def __init__(self, settings: ChunkSettings):
        self.settings = settings
        tokenizer = tokenization.FullTokenizer(settings.vocab_file, settings.do_lower_case)
        self._tokenizer = WordCachedTokenizer(tokenizer)
        self._vocab = masked_lm.MaskingVocab.from_vocab(tokenizer.vocab,
                                                                 settings.vocab_file)
        self._encoder = pretraining_records.PretrainingRecordEncoder(
            settings.config.max_seq_length, settings.config.max_predictions_per_seq,
            int(self._vocab.vocab_ids.max()) + 1)

    def tokenize(self, chunk: CorpusChunk) -> tuple[pretraining_instances.DocumentWindow,
                                                     ChunkResult]:
        """The chunk's documents as token ids, and a result holding the counts so far."""
        result = ChunkResult(chunk.index, b"", [0], chunk.num_bytes, 0, 0, 0, 0)
        token_ids = array.array("i")  # 4 bytes a token (a list would take 36)
        sentence_bounds = []
        extend_ids = self._tokenizer.extend_ids
        for lines in chunk.documents:
            bounds = [len(token_ids)]
            for line in lines:
                extend_ids(line, token_ids)
                if len(token_ids) > bounds[-1]:
                    bounds.append(len(token_ids))
                else:
                    result.lines_without_tokens += 1
            if len(bounds) > 1:
                sentence_bounds.append(bounds)
            else:
                result.empty_documents += 1
        result.documents = len(sentence_bounds)
        result.tokens = len(token_ids)
        window = pretraining_instances.DocumentWindow(
            np.frombuffer(token_ids, np.int32).copy(), sentence_bounds)
        return window, result

    def process(self, chunk: CorpusChunk) -> ChunkResult:
        """Tokenizes, packs, shuffles, masks, encodes and frames one chunk."""
        config = self.settings.config
        window, result = self.tokenize(chunk)
        if not window.sentence_bounds:
            return result
        packing_rng, masking_rng = chunk_generators(self.settings.random_seed, chunk.index)
        pairs = pretraining_instances.pack_documents(window, config, packing_rng, masking_rng)
        order = masking_rng.permutation(len(pairs))
        examples = []
        for start in range(0, len(pairs), _BATCH_INSTANCES):
            batch = pairs.take(order[start:start + _BATCH_INSTANCES])
            tokens, lengths = pretraining_instances.assemble_tokens(
                window.token_ids, batch, config.max_seq_length, self._vocab.cls_id,
                self._vocab.sep_id)
            masked = masked_lm.mask_tokens(
                tokens, lengths, batch.a_length, config.masked_lm_prob,
                config.max_predictions_per_seq,
                config.do_whole_word_mask, self._vocab, masking_rng)
            examples.extend(self._encoder.encode(
                masked.input_ids, lengths, batch.a_length, masked.masked_lm_positions,
                masked.masked_lm_ids, masked.num_masked, batch.is_random_next))
        result.framed, result.ends = tfrecord_io.frame_records(examples)
        return result


_WORKER_PROCESSOR: ChunkProcessor | None = None


def init_worker(settings: ChunkSettings) -> None:
    """Pool initializer: builds this process's `ChunkProcessor`.

    The stop signals are the parent's to handle: a worker ignores SIGINT (Ctrl-C reaches the
    whole process group) and dies at once on SIGTERM (how the pool ends its workers), whatever
    handlers it inherited by fork; a worker that raised instead could die holding the pool's
    queue lock and hang the others.
    """
    global _WORKER_PROCESSOR
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _WORKER_PROCESSOR = ChunkProcessor(settings)


def process_chunk_in_worker(chunk: CorpusChunk) -> ChunkResult:
    """Pool task: processes `chunk` with the process's `ChunkProcessor`."""
    if _WORKER_PROCESSOR is None:
        raise RuntimeError("init_worker was not called in this process")
    return _WORKER_PROCESSOR.process(chunk)
