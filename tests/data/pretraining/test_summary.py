"""Tests of data/pretraining/summary.py: progress lines and the final report."""
from data.pretraining.chunks import ChunkResult
from data.pretraining.corpus import ReadCounts
from data.pretraining.summary import WriteSummary


def test_progress_line_reports_rates_and_time_left():
    summary = WriteSummary(["a", "b"], [0, 0], total_input_bytes=1000)
    summary.add_chunk(ChunkResult(0, b"", [0], 250, 4, 1, 2, 500))
    summary.instances_written = 300
    line = summary.progress_line(ReadCounts(bytes_read=400, documents=9), elapsed=10.0)
    assert "read 9 documents" in line and "processed 25.0%" in line
    assert "wrote 300 instances (30/s, 50 tokens/s)" in line
    assert "elapsed 0:00:10, ETA 0:00:30" in line  # 75% left at 25% per 10 s
    assert "ETA unknown" in WriteSummary([], []).progress_line(ReadCounts(), 1.0)


def test_final_report_lists_skips_and_files():
    summary = WriteSummary(["out/a", "out/b"], [0, 0], total_input_bytes=100)
    summary.add_chunk(ChunkResult(0, b"", [0], 100, 5, 2, 3, 1234))
    summary.finish(ReadCounts(lines=20, blank_lines=4, invalid_utf8_lines=1), [7, 6], 2.0)
    report = summary.format()
    assert summary.instances == 13
    assert "Wrote 13 instances from 5 documents (1,234 tokens" in report
    assert "2 documents without any token, 3 lines without any token" in report
    assert "1 lines had invalid UTF-8" in report and "4 blank lines" in report
    assert "out/a: 7 instances" in report and "out/b: 6 instances" in report
