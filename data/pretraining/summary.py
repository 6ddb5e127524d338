"""Progress lines and the final report of a pretraining-data run."""
from __future__ import annotations

import dataclasses

from data.pretraining.chunks import ChunkResult
from data.pretraining.corpus import ReadCounts


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


@dataclasses.dataclass
class WriteSummary:
    """What a run read, skipped and wrote.

    Attributes:
      output_files: the output paths.
      instances_per_file: records in each output file (set when the run ends).
      total_input_bytes: size of all input files.
      chunks: chunks processed.
      bytes_processed: input bytes of the processed chunks.
      documents: documents with at least one token.
      empty_documents: documents without any token (skipped).
      lines_without_tokens: non-blank lines without any token (skipped).
      tokens: WordPiece tokens read.
      instances_written: records released to the output files so far.
      lines, blank_lines, invalid_utf8_lines: input lines; blank ones (document separators);
        ones with undecodable UTF-8 bytes (the bytes are dropped, the rest is kept).
      seconds: wall time of the run.
    """

    output_files: list[str]
    instances_per_file: list[int]
    total_input_bytes: int = 0
    chunks: int = 0
    bytes_processed: int = 0
    documents: int = 0
    empty_documents: int = 0
    lines_without_tokens: int = 0
    tokens: int = 0
    instances_written: int = 0
    lines: int = 0
    blank_lines: int = 0
    invalid_utf8_lines: int = 0
    seconds: float = 0.0

    @property
    def instances(self) -> int:
        """Records in all output files."""
        return sum(self.instances_per_file)

    def add_chunk(self, result: ChunkResult) -> None:
        """Counts a processed chunk."""
        self.chunks += 1
        self.bytes_processed += result.num_bytes
        self.documents += result.documents
        self.empty_documents += result.empty_documents
        self.lines_without_tokens += result.lines_without_tokens
        self.tokens += result.tokens

    def progress_line(self, counts: ReadCounts, elapsed: float) -> str:
        """One line: documents read, instances written, rates, share done and time left."""
        done = self.bytes_processed / max(self.total_input_bytes, 1)
        left = elapsed * (1.0 - done) / done if done > 0 else float("nan")
        return (f"read {counts.documents:,} documents ({counts.bytes_read / 1e6:,.1f} MB); "
                f"processed {done:.1%}; wrote {self.instances_written:,} instances "
                f"({self.instances_written / max(elapsed, 1e-9):,.0f}/s, "
                f"{self.tokens / max(elapsed, 1e-9):,.0f} tokens/s); "
                f"elapsed {_duration(elapsed)}, ETA "
                f"{_duration(left) if left == left else 'unknown'}")

    def finish(self, counts: ReadCounts, instances_per_file: list[int], seconds: float) -> None:
        """Records the reader's counts, the per-file record counts and the wall time."""
        self.lines = counts.lines
        self.blank_lines = counts.blank_lines
        self.invalid_utf8_lines = counts.invalid_utf8_lines
        self.instances_per_file = list(instances_per_file)
        self.instances_written = sum(instances_per_file)
        self.seconds = seconds

    def format(self) -> str:
        """The end-of-run report, several lines."""
        rate = self.instances / max(self.seconds, 1e-9)
        lines = [
            f"Wrote {self.instances:,} instances from {self.documents:,} documents "
            f"({self.tokens:,} tokens, {self.bytes_processed / 1e6:,.1f} MB in "
            f"{self.chunks:,} chunks) in {_duration(self.seconds)} ({rate:,.0f} instances/s).",
            f"Skipped: {self.empty_documents:,} documents without any token, "
            f"{self.lines_without_tokens:,} lines without any token; "
            f"{self.invalid_utf8_lines:,} lines had invalid UTF-8 (undecodable bytes dropped); "
            f"{self.blank_lines:,} blank lines separated documents.",
        ]
        lines += [f"  {path}: {count:,} instances"
                  for path, count in zip(self.output_files, self.instances_per_file)]
        return "\n".join(lines)
