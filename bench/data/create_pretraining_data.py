"""Benchmark: create_pretraining_data.py from the shell against the original algorithm.

Each side runs as a user runs it, one process started from the shell, timed from its start to
its exit (interpreter start-up and imports included), with the same vocabulary and flags (the
README's: --max_seq_length=128 --max_predictions_per_seq=20 --masked_lm_prob=0.15
--short_seq_prob=0.1, --dupe_factor as given):
  * `original`: the original script's algorithm (`bench/data/original_pretraining.py`),
    single process, `tf.train.Example` + `tf.io.TFRecordWriter`, whole corpus in memory;
  * `script`: this checkout's `create_pretraining_data.py` with its default workers;
  * `script@LABEL`: the same script in another checkout (--other_checkout=LABEL=DIR, e.g. a
    `git worktree` of an earlier commit), to measure a regression side by side.
The sides alternate for --rounds rounds on each corpus; each figure is the median. Memory is
sampled every 50 ms from /proc: the peak resident memory of the largest process (what
`/usr/bin/time` reports) and of the whole process tree (the script's workers included).

Corpora (--corpora):
  * `repeated`: the original's sample_text.txt repeated to --repeated_mb (its per-word memo
    answers nearly every word);
  * `unique`: real text, each paragraph once: WikiText-2 test and the SQuAD v1.1 dev contexts
    (2.9 MB);
  * `mixed:N`: N MB cycling WikiText-2, SQuAD and CoNLL-2003 documents, for memory at scale.

    python -m bench.data.create_pretraining_data --corpora=repeated,unique --rounds=3
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Iterator

from absl import flags

from bench.support import REPO_ROOT, SHARED, shared_data_dir, write_json
from utils import entry_point

FLAGS = flags.FLAGS


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    flags.DEFINE_string("data_dir", shared_data_dir(), "Real public data.")
    flags.DEFINE_string("vocab_file", str(SHARED / "fixtures" / "vocab" / "uncased_vocab.txt"),
                        "WordPiece vocabulary.")
    flags.DEFINE_string("sample_text", str(SHARED / "fixtures" / "pretraining_data" /
                                           "sample_text.txt"), "The original's sample text.")
    flags.DEFINE_list("corpora", ["repeated", "unique"], "Corpora: repeated, unique, mixed:N.")
    flags.DEFINE_float("repeated_mb", 5.3, "Size of the repeated sample text (MB).")
    flags.DEFINE_list("sides", ["original", "script"], "Sides to run: original, script.")
    flags.DEFINE_multi_string("other_checkout", [], "LABEL=DIR: also run DIR's "
                              "create_pretraining_data.py, as side script@LABEL.")
    flags.DEFINE_integer("rounds", 3, "Alternated rounds per corpus.")
    flags.DEFINE_integer("dupe_factor", 5, "--dupe_factor of every side.")
    flags.DEFINE_string("work_dir", None, "Where corpora and outputs go (default: a temporary "
                        "directory, removed at the end).")
    flags.DEFINE_string("output_json", None, "Also write the results here (the README's are in "
                        "bench/results/create_pretraining_data/).")
    flags.DEFINE_bool("child_original", False, "Internal: run the original algorithm.")
    flags.DEFINE_string("child_input", None, "Internal: corpus of the child run.")
    flags.DEFINE_string("child_output", None, "Internal: output of the child run.")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
_README_FLAGS = ["--max_seq_length=128", "--max_predictions_per_seq=20", "--masked_lm_prob=0.15",
                 "--short_seq_prob=0.1", "--random_seed=12345", "--do_lower_case=True"]


def _sentences(paragraph: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(paragraph) if s.strip()]


def _wikitext_test_documents(data_dir: pathlib.Path) -> Iterator[list[str]]:
    text = (data_dir / "wikitext-2-raw" / "wiki.test.sentences.txt").read_text("utf-8")
    for block in text.split("\n\n"):
        yield [line for line in block.split("\n") if line.strip()]


def _wikitext_valid_documents(data_dir: pathlib.Path) -> Iterator[list[str]]:
    document: list[str] = []
    for line in (data_dir / "wikitext-2-tokenized" / "wiki.valid.tokens").open(encoding="utf-8"):
        line = line.strip()
        if re.fullmatch(r"= [^=].* =", line):  # an article title starts a document
            if document:
                yield document
            document = []
        elif line and not line.startswith("="):
            document.extend(_sentences(line))
    if document:
        yield document


def _squad_documents(data_dir: pathlib.Path, names=("dev-v1.1.json",)) -> Iterator[list[str]]:
    for name in names:
        for article in json.loads((data_dir / "squad" / name).read_text("utf-8"))["data"]:
            yield [s for p in article["paragraphs"] for s in _sentences(p["context"])]


def _conll_documents(data_dir: pathlib.Path) -> Iterator[list[str]]:
    for name in ("train.txt", "valid.txt", "test.txt"):
        document: list[str] = []
        words: list[str] = []
        for line in (data_dir / "conll2003" / name).open(encoding="utf-8"):
            if line.startswith("-DOCSTART-"):
                if document:
                    yield document
                document = []
            elif line.strip():
                words.append(line.split()[0])
            elif words:
                document.append(" ".join(words))
                words = []
        if document:
            yield document


def _mixed_documents(data_dir: pathlib.Path) -> Iterator[list[str]]:
    while True:
        yield from _wikitext_test_documents(data_dir)
        yield from _wikitext_valid_documents(data_dir)
        yield from _squad_documents(data_dir, ("dev-v1.1.json", "subsets/cs224n_dev-v2.0.json"))
        yield from _conll_documents(data_dir)


def _write_documents(path: pathlib.Path, documents: Iterator[list[str]],
                     target_bytes: float = float("inf")) -> None:
    written = 0
    with path.open("w", encoding="utf-8") as writer:
        for document in documents:
            block = "\n".join(document) + "\n\n"
            writer.write(block)
            written += len(block.encode("utf-8"))
            if written >= target_bytes:
                return


def build_corpus(name: str, path: pathlib.Path) -> None:
    """Writes the corpus `name` (see the module's docstring) to `path`."""
    data_dir = pathlib.Path(FLAGS.data_dir)
    if name == "repeated":
        sample = pathlib.Path(FLAGS.sample_text).read_text("utf-8").strip() + "\n\n"
        copies = max(1, round(FLAGS.repeated_mb * 1e6 / len(sample.encode("utf-8"))))
        path.write_text(sample * copies, encoding="utf-8")
    elif name == "unique":
        _write_documents(path, (document for source in (_wikitext_test_documents,
                                                        _squad_documents)
                                for document in source(data_dir)))
    elif name.startswith("mixed:"):
        _write_documents(path, _mixed_documents(data_dir), float(name[6:]) * 1e6)
    else:
        raise ValueError(f"unknown corpus {name!r}: repeated, unique or mixed:N")


def _child_original() -> None:
    # pylint: disable-next=import-outside-toplevel
    from bench.data import original_pretraining as reference
    reference.run_reference([FLAGS.child_input], [FLAGS.child_output], FLAGS.vocab_file,
                            do_lower_case=True, max_seq_length=128, dupe_factor=FLAGS.dupe_factor,
                            short_seq_prob=0.1, masked_lm_prob=0.15, max_predictions_per_seq=20,
                            random_seed=12345)


def _children(pid: int) -> list[int]:
    children = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as listing:
                children.extend(int(child) for child in listing.read().split())
    except OSError:
        pass
    return children


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def _tree_rss(root: int) -> tuple[int, int]:
    """(RSS of `root` and all its descendants, RSS of the largest of them) in bytes."""
    tree, frontier = [root], [root]
    while frontier:
        children = _children(frontier.pop())
        tree.extend(children)
        frontier.extend(children)
    sizes = [_rss(pid) for pid in tree]
    return sum(sizes), max(sizes)


def _command(side: str, corpus: pathlib.Path, output: pathlib.Path) -> tuple[list[str], str]:
    """The side's command line and the folder it runs in."""
    if side == "original":
        return [sys.executable, "-m", "bench.data.create_pretraining_data", "--child_original",
                f"--child_input={corpus}", f"--child_output={output}",
                f"--vocab_file={FLAGS.vocab_file}", f"--dupe_factor={FLAGS.dupe_factor}"
                ], str(REPO_ROOT)
    checkouts = {"script": str(REPO_ROOT), **{
        f"script@{label}": folder for label, folder in
        (entry.split("=", 1) for entry in FLAGS.other_checkout)}}
    return [sys.executable, "create_pretraining_data.py", f"--input_file={corpus}",
            f"--output_file={output}", f"--vocab_file={FLAGS.vocab_file}",
            f"--dupe_factor={FLAGS.dupe_factor}", *_README_FLAGS], checkouts[side]


def _measure(side: str, corpus: pathlib.Path, output: pathlib.Path) -> dict:
    """Runs one side from the shell, timing it from start to exit and sampling its memory."""
    command, cwd = _command(side, corpus, output)
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    samples = []  # (tree RSS, largest process's RSS)
    while process.poll() is None:
        samples.append(_tree_rss(process.pid))
        time.sleep(0.05)
    seconds = time.perf_counter() - start
    stderr = process.stderr.read()
    if process.returncode:
        raise RuntimeError(f"{side} failed with exit code {process.returncode}:\n{stderr}")
    instances = _count_records(output)
    output.unlink()
    return {"side": side, "corpus_mb": corpus.stat().st_size / 1e6, "seconds": seconds,
            "instances": instances, "instances_per_s": instances / seconds,
            "peak_process_mb": max(s[1] for s in samples) / 2**20,
            "peak_tree_mb": max(s[0] for s in samples) / 2**20}


def _count_records(path: pathlib.Path) -> int:
    """Records in a TFRecord file, read from its framing (8-byte length, 4-byte CRC, data, CRC)."""
    count, data = 0, path.read_bytes()
    position = 0
    while position < len(data):
        length = int.from_bytes(data[position:position + 8], "little")
        position += 16 + length
        count += 1
    return count


def _median(results: list[dict], key: str) -> float:
    return statistics.median(result[key] for result in results)


def _summarise(corpus: str, results: list[dict], sides: list[str]) -> list[dict]:
    rows = []
    for side in sides:
        runs = [result for result in results if result["side"] == side]
        rows.append({"corpus": corpus, "side": side, "rounds": len(runs),
                     "corpus_mb": runs[0]["corpus_mb"], "instances": runs[0]["instances"],
                     "seconds": _median(runs, "seconds"),
                     "seconds_each": [round(run["seconds"], 2) for run in runs],
                     "instances_per_s": _median(runs, "instances_per_s"),
                     "peak_process_mb": _median(runs, "peak_process_mb"),
                     "peak_tree_mb": _median(runs, "peak_tree_mb")})
    return rows


def _print_rows(rows: list[dict]) -> None:
    original = {row["corpus"]: row for row in rows if row["side"] == "original"}
    print("| corpus | side | seconds (median; each) | instances/s | vs original | "
          "peak RSS, largest process | peak RSS, process tree |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        base = original.get(row["corpus"])
        ratio = f"{base['seconds'] / row['seconds']:.1f}x" if base else ""
        each = ", ".join(f"{s:.2f}" for s in row["seconds_each"])
        print(f"| {row['corpus']} ({row['corpus_mb']:.1f} MB) | {row['side']} | "
              f"{row['seconds']:.2f} ({each}) | {row['instances_per_s']:,.0f} | {ratio} | "
              f"{row['peak_process_mb']:.0f} MB | {row['peak_tree_mb']:.0f} MB |", flush=True)


def _run_all(work_dir: pathlib.Path) -> list[dict]:
    sides = list(FLAGS.sides) + [f"script@{entry.split('=', 1)[0]}"
                                 for entry in FLAGS.other_checkout]
    rows = []
    for name in FLAGS.corpora:
        corpus = work_dir / f"corpus_{name.replace(':', '_')}.txt"
        build_corpus(name, corpus)
        results = []
        for round_index in range(FLAGS.rounds):
            for side in sides:
                result = _measure(side, corpus, work_dir / "output.tfrecord")
                results.append(result)
                print(f"{name} round {round_index + 1}: {side} {result['seconds']:.2f} s, "
                      f"{result['instances']:,} instances, largest process "
                      f"{result['peak_process_mb']:.0f} MB, tree "
                      f"{result['peak_tree_mb']:.0f} MB", flush=True)
        rows += _summarise(name, results, sides)
    return rows


def main(argv: list[str]) -> None:
    del argv
    if FLAGS.child_original:
        _child_original()
        return
    print(f"{len(os.sched_getaffinity(0))} cores; dupe_factor {FLAGS.dupe_factor}", flush=True)
    if FLAGS.work_dir:
        work_dir = pathlib.Path(FLAGS.work_dir)
        work_dir.mkdir(parents=True, exist_ok=True)
        rows = _run_all(work_dir)
    else:
        with tempfile.TemporaryDirectory(prefix="bench_cpd_") as temp_dir:
            rows = _run_all(pathlib.Path(temp_dir))
    _print_rows(rows)
    if FLAGS.output_json:
        write_json(FLAGS.output_json, rows)


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
