"""Benchmark: create_pretraining_data's pipeline against the original single-process algorithm.

Builds corpora of real text (WikiText-2 articles, SQuAD dev contexts, CoNLL-2003 Reuters news,
one sentence per line, a blank line between documents) of the requested sizes, then runs, each
in its own process with the same vocabulary and flags:
  * the reference: the original script's algorithm (`tests/original_pretraining_reference.py`),
    single process, `tf.train.Example` + `tf.io.TFRecordWriter`, whole corpus in memory;
  * this project's `write_pretraining_records` with --num_workers processes.
At the reference's size the two alternate for --rounds rounds and the ratio is their median;
the other sizes run this pipeline once. It reports instances/s, tokens/s and the peak resident
memory of each process tree (sampled every 50 ms from /proc). Timing starts after imports, so
interpreter start-up is left out of both; the pool start-up is counted against this pipeline.

    python bench/bench_create_pretraining_data.py --sizes_mb=5,50 --reference_mb=5
"""
from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Iterator

from absl import app
from absl import flags

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests"))

from data.pretraining import chunks  # noqa: E402
from data.pretraining import instances as pretraining_instances  # noqa: E402
from data.pretraining import writer as pretraining_writer  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", str(REPO_ROOT.parent / "shared" / "data"), "Real public data.")
flags.DEFINE_string("vocab_file", str(REPO_ROOT.parent / "shared" / "fixtures" / "vocab" /
                                      "uncased_vocab.txt"), "WordPiece vocabulary.")
flags.DEFINE_list("sizes_mb", ["5", "50"], "Corpus sizes (MB) to run this pipeline on.")
flags.DEFINE_float("reference_mb", 5.0, "Corpus size (MB) to run the reference on; 0: none.")
flags.DEFINE_integer("rounds", 3, "Alternated reference / pipeline rounds at reference_mb.")
flags.DEFINE_integer("num_workers", None, "Workers (default: every core available).")
flags.DEFINE_integer("dupe_factor", 10, "dupe_factor of both runs.")
flags.DEFINE_string("work_dir", None, "Where corpora and outputs go (default: a temporary "
                    "directory, removed at the end).")
flags.DEFINE_string("output_json", None, "Also write the results here.")
flags.DEFINE_enum("child", None, ["reference", "pipeline"], "Internal: run one side.")
flags.DEFINE_string("child_input", None, "Internal: corpus of the child run.")
flags.DEFINE_string("child_output", None, "Internal: output of the child run.")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


def _sentences(paragraph: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(paragraph) if s.strip()]


def _wikitext_documents(data_dir: pathlib.Path) -> Iterator[list[str]]:
    text = (data_dir / "wikitext-2-raw" / "wiki.test.sentences.txt").read_text("utf-8")
    for block in text.split("\n\n"):
        yield [line for line in block.split("\n") if line.strip()]
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


def _squad_documents(data_dir: pathlib.Path) -> Iterator[list[str]]:
    for name in ("dev-v1.1.json", "subsets/cs224n_dev-v2.0.json"):
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


def build_corpus(data_dir: pathlib.Path, path: pathlib.Path, target_bytes: int) -> None:
    """Writes documents of real text to `path`, cycling through the sources, up to the size."""
    written = 0
    with path.open("w", encoding="utf-8") as writer:
        while written < target_bytes:
            for source in (_wikitext_documents, _squad_documents, _conll_documents):
                for document in source(data_dir):
                    block = "\n".join(document) + "\n\n"
                    writer.write(block)
                    written += len(block.encode("utf-8"))
                    if written >= target_bytes:
                        return


def _spin(seconds: float) -> int:
    start, count = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        count += 1
    return count


def available_cores(processes: int, seconds: float = 1.0) -> float:
    """CPU cores this session actually gets: `processes` busy loops' CPU time over wall time
    (on a shared machine other sessions' load can leave less than the core count)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        pool.map(_spin, [seconds] * processes)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return cpu / (time.perf_counter() - start)


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished (reaped) worker processes."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _child_reference() -> dict:
    import random

    import original_pretraining_reference as reference  # TensorFlow: imported in this child only
    from data import tokenization

    start, cpu_start = time.perf_counter(), _cpu_seconds()
    tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, do_lower_case=True)
    documents = reference.read_documents([FLAGS.child_input], tokenizer)
    read_cpu = _cpu_seconds()
    tokens = sum(len(sentence) for document in documents for sentence in document)
    instances = reference.create_training_instances(
        documents, list(tokenizer.vocab.keys()), 128, FLAGS.dupe_factor, 0.1, 0.15, 20, False,
        random.Random(12345))
    create_cpu = _cpu_seconds()
    reference.write_instances(instances, tokenizer, 128, 20, [FLAGS.child_output])
    end_cpu = _cpu_seconds()
    return {"seconds": time.perf_counter() - start, "cpu_seconds": end_cpu - cpu_start,
            "instances": len(instances), "tokens": tokens,
            "cpu_seconds_by_phase": {"read and tokenize": read_cpu - cpu_start,
                                     "create instances": create_cpu - read_cpu,
                                     "write records": end_cpu - create_cpu}}


def _child_pipeline() -> dict:
    settings = chunks.ChunkSettings(
        FLAGS.vocab_file, True,
        pretraining_instances.PretrainingConfig(dupe_factor=FLAGS.dupe_factor), 12345)
    options = pretraining_writer.WriterOptions(
        num_workers=FLAGS.num_workers or len(os.sched_getaffinity(0)),
        progress_interval_s=1e9)
    start, cpu_start = time.perf_counter(), _cpu_seconds()
    summary = pretraining_writer.write_pretraining_records(
        [FLAGS.child_input], [FLAGS.child_output], settings, options)
    return {"seconds": time.perf_counter() - start, "cpu_seconds": _cpu_seconds() - cpu_start,
            "instances": summary.instances, "tokens": summary.tokens}


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
    """(RSS of `root` and all its descendants, RSS of `root`) in bytes."""
    tree, frontier = [root], [root]
    while frontier:
        children = _children(frontier.pop())
        tree.extend(children)
        frontier.extend(children)
    return sum(_rss(pid) for pid in tree), _rss(root)


def _measure(side: str, corpus: pathlib.Path, output: pathlib.Path) -> dict:
    """Runs one side in a child process, sampling its process tree's memory."""
    command = [sys.executable, __file__, f"--child={side}", f"--child_input={corpus}",
               f"--child_output={output}", f"--vocab_file={FLAGS.vocab_file}",
               f"--dupe_factor={FLAGS.dupe_factor}"]
    if FLAGS.num_workers:
        command.append(f"--num_workers={FLAGS.num_workers}")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                               stderr=subprocess.DEVNULL)
    samples = []  # (tree RSS, main RSS)
    while process.poll() is None:
        samples.append(_tree_rss(process.pid))
        time.sleep(0.05)
    if process.returncode:
        raise RuntimeError(f"{side} run failed with exit code {process.returncode}")
    result = json.loads(process.stdout.read().strip().splitlines()[-1])
    half = len(samples) // 2
    result.update(peak_rss_mb=max(s[0] for s in samples) / 2**20,
                  peak_rss_main_mb=max(s[1] for s in samples) / 2**20,
                  # Bounded memory: the second half of the run peaks no higher than the first.
                  peak_rss_first_half_mb=max(s[0] for s in samples[:half]) / 2**20,
                  peak_rss_second_half_mb=max(s[0] for s in samples[half:]) / 2**20,
                  corpus_mb=corpus.stat().st_size / 1e6, side=side)
    result["instances_per_s"] = result["instances"] / result["seconds"]
    result["tokens_per_s"] = result["tokens"] / result["seconds"]
    result["cpu_us_per_instance"] = 1e6 * result["cpu_seconds"] / result["instances"]
    return result


def main(argv: list[str]) -> None:
    del argv
    if FLAGS.child:
        result = _child_reference() if FLAGS.child == "reference" else _child_pipeline()
        print(json.dumps(result))
        return
    cores = len(os.sched_getaffinity(0))
    print(f"{cores} cores; this session gets {available_cores(cores):.2f} of them now "
          "(busy loops in as many processes)", flush=True)
    if FLAGS.work_dir:
        work_dir = pathlib.Path(FLAGS.work_dir)
        work_dir.mkdir(parents=True, exist_ok=True)
        _run_all(work_dir)
    else:
        with tempfile.TemporaryDirectory(prefix="bench_cpd_") as temp_dir:
            _run_all(pathlib.Path(temp_dir))


def _print_result(result: dict) -> None:
    print(f"{result['side']:9s} {result['corpus_mb']:6.1f} MB: {result['instances']:9,d} "
          f"instances in {result['seconds']:7.2f} s = {result['instances_per_s']:9,.0f} "
          f"instances/s, {result['tokens_per_s']:10,.0f} tokens/s, "
          f"{result['cpu_us_per_instance']:6.1f} CPU-us/instance, "
          f"peak RSS {result['peak_rss_mb']:7.1f} MB "
          f"(main process {result['peak_rss_main_mb']:.1f} MB; first / second half of the "
          f"run {result['peak_rss_first_half_mb']:.0f} / "
          f"{result['peak_rss_second_half_mb']:.0f} MB)", flush=True)
    if "cpu_seconds_by_phase" in result:
        print("           CPU seconds by phase: " + ", ".join(
            f"{phase} {seconds:.1f}" for phase, seconds in
            result["cpu_seconds_by_phase"].items()), flush=True)


def _run_all(work_dir: pathlib.Path) -> None:
    """Measures the reference and this pipeline alternately at the reference's size (--rounds
    times), then this pipeline once at every other size; prints the ratios."""
    runs = []
    if FLAGS.reference_mb:
        runs += [("reference", FLAGS.reference_mb), ("pipeline", FLAGS.reference_mb)] * FLAGS.rounds
    runs += [("pipeline", float(size)) for size in FLAGS.sizes_mb
             if not FLAGS.reference_mb or float(size) != FLAGS.reference_mb]
    results = []
    for side, size_mb in runs:
        corpus = work_dir / f"corpus_{size_mb:g}mb.txt"
        if not corpus.exists():
            build_corpus(pathlib.Path(FLAGS.data_dir), corpus, int(size_mb * 1e6))
        output = work_dir / f"{side}_{size_mb:g}mb.tfrecord"
        results.append(_measure(side, corpus, output))
        output.unlink()
        _print_result(results[-1])
    reference = [r for r in results if r["side"] == "reference"]
    same_size = [r for r in results if r["side"] == "pipeline"][:len(reference)]
    if reference:
        ratios = sorted(p["instances_per_s"] / r["instances_per_s"]
                        for r, p in zip(reference, same_size))
        cpu_ratios = sorted(r["cpu_us_per_instance"] / p["cpu_us_per_instance"]
                            for r, p in zip(reference, same_size))
        print(f"at {FLAGS.reference_mb:g} MB, over {len(ratios)} alternated rounds: "
              f"{statistics.median(ratios):.1f}x the reference's instances/s (wall clock; "
              f"{ratios[0]:.1f}-{ratios[-1]:.1f}x), "
              f"{statistics.median(cpu_ratios):.1f}x less CPU time per instance "
              f"({cpu_ratios[0]:.1f}-{cpu_ratios[-1]:.1f}x)")
    if FLAGS.output_json:
        pathlib.Path(FLAGS.output_json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    app.run(main)
