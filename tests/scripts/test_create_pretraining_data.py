"""End-to-end tests of create_pretraining_data.py: statistics against the original, determinism,
errors before any output, the summary, the temporary files of killed runs."""
import json
import os
import pathlib
import re
import resource
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from bench.data import original_pretraining as reference
from data import tokenization
from data.pretraining import chunks as pretraining_chunks, writer
from data.pretraining.dataset import pretraining_dataset
from data.pretraining.instances import PretrainingConfig
from tests.support import pretraining_statistics as stats
from tests.support.paths import REPO_ROOT

SCRIPT = str(REPO_ROOT / "create_pretraining_data.py")


def _run_script(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=900)


DEFAULT_OPTIONS = writer.WriterOptions()


def _write(input_files, output_files, vocab_file, seed=12345, do_whole_word_mask=False,
           dupe_factor=10, num_workers=1, chunk_bytes=DEFAULT_OPTIONS.chunk_bytes,
           min_chunk_documents=DEFAULT_OPTIONS.min_chunk_documents):
    settings = pretraining_chunks.ChunkSettings(
        str(vocab_file), True,
        PretrainingConfig(dupe_factor=dupe_factor, do_whole_word_mask=do_whole_word_mask), seed)
    options = writer.WriterOptions(
        num_workers=num_workers, chunk_bytes=chunk_bytes,
        min_chunk_documents=min_chunk_documents)
    return writer.write_pretraining_records(
        [str(p) for p in input_files], [str(p) for p in output_files], settings, options)


def test_flag_defaults_are_the_original_ones():
    help_text = _run_script("--helpshort").stdout.split("\nflags:\n")[1]
    sections = {}
    for section in help_text.split("\n  --")[1:]:
        name, _, description = section.partition(":")
        sections[name.removeprefix("[no]")] = description
    for flag, default in [("do_lower_case", "'true'"), ("do_whole_word_mask", "'false'"),
                          ("max_seq_length", "'128'"), ("max_predictions_per_seq", "'20'"),
                          ("random_seed", "'12345'"), ("dupe_factor", "'10'"),
                          ("masked_lm_prob", "'0.15'"), ("short_seq_prob", "'0.1'")]:
        assert f"(default: {default})" in sections[flag], flag
    for flag in ("input_file", "output_file", "vocab_file", "num_workers"):
        assert flag in sections


def test_script_writes_records_and_reports_what_it_skipped(tmp_path, fixtures_dir,
                                                           uncased_vocab):
    sample = (fixtures_dir / "pretraining_data" / "sample_text.txt").read_bytes()
    corpus = tmp_path / "corpus.txt"
    # A document of control characters only, and a line with undecodable bytes.
    corpus.write_bytes(sample + b"\n\x01\x02\n\x03\n\nbroken \xff\xfe bytes here.\nok.\n")
    out = tmp_path / "out"
    result = _run_script(f"--input_file={tmp_path}/*.txt",
                         f"--output_file={out}/a.tfrecord,{out}/b.tfrecord",
                         f"--vocab_file={uncased_vocab}", "--dupe_factor=2",
                         "--num_workers=2", "--progress_interval=0")
    assert result.returncode == 0, result.stderr
    assert "read 5 documents" in result.stderr and "processed 100.0%" in result.stderr
    assert "1 documents without any token, 2 lines without any token" in result.stderr
    assert "1 lines had invalid UTF-8" in result.stderr
    records = stats.read_records([out / "a.tfrecord", out / "b.tfrecord"], 128, 20)
    counts = [len(stats.read_records([out / name], 128, 20)["input_ids"])
              for name in ("a.tfrecord", "b.tfrecord")]
    assert f"Wrote {sum(counts):,} instances from 4 documents" in result.stderr
    assert f"b.tfrecord: {counts[1]:,} instances" in result.stderr
    assert abs(counts[0] - counts[1]) <= 1
    assert sorted(p.name for p in out.iterdir()) == ["a.tfrecord", "b.tfrecord"]
    assert set(records["next_sentence_labels"].ravel()) <= {0, 1}
    batches = pretraining_dataset(f"{out}/*.tfrecord", 8, 128, 20, is_training=False)
    assert sum(len(batch["input_ids"]) for batch in batches) == sum(counts)
    # The script's forked workers and this process's own work write the same bytes.
    _write([corpus], [tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"], uncased_vocab,
           dupe_factor=2)
    for name in ("a.tfrecord", "b.tfrecord"):
        assert (tmp_path / name).read_bytes() == (out / name).read_bytes()


@pytest.mark.parametrize("flags, message", [
    (["--input_file={tmp}/missing.txt"], "does not exist"),
    (["--input_file={tmp}/*.nothing"], "matches no file"),
    (["--vocab_file={tmp}/no_vocab.txt"], "cannot read vocab file"),
    (["--vocab_file={tmp}/small_vocab.txt"], r"lacks \[MASK\]"),
    (["--max_seq_length=4"], "max_seq_length=4 must be"),
    (["--max_predictions_per_seq=200"], "max_predictions_per_seq=200 must be"),
    (["--masked_lm_prob=0"], "masked_lm_prob=0.0 must be"),
    (["--output_file={tmp}/corpus.txt"], "is also an input file"),
    (["--output_file={tmp}/out/a,{tmp}/out/a"], "names a file twice"),
])
def test_bad_input_fails_before_writing(tmp_path, uncased_vocab, flags, message):
    (tmp_path / "corpus.txt").write_text("One sentence.\nTwo sentences.\n\nOther doc.\n")
    (tmp_path / "small_vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n")
    args = {"input_file": f"{tmp_path}/corpus.txt", "output_file": f"{tmp_path}/out/x.tfrecord",
            "vocab_file": str(uncased_vocab)}
    for flag in flags:
        name, value = flag[2:].split("=", 1)
        args[name] = value.replace("{tmp}", str(tmp_path))
    result = _run_script(*[f"--{name}={value}" for name, value in args.items()])
    assert result.returncode != 0
    assert any(line for line in result.stderr.splitlines() if message.split(r"\[")[0] in line)
    assert not (tmp_path / "out").exists()


def test_interrupted_run_leaves_no_output(tmp_path, uncased_vocab):
    """A run that fails midway (here: no [MASK] in the workers' vocab) writes nothing."""
    (tmp_path / "corpus.txt").write_text("One sentence.\nTwo.\n\nOther doc.\n")
    bad_vocab = tmp_path / "vocab.txt"
    bad_vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n")
    with pytest.raises(ValueError, match="lacks"):
        _write([tmp_path / "corpus.txt"], [tmp_path / "a.tfrecord"], bad_vocab)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "vocab.txt"]


def test_a_full_disk_names_the_output_and_keeps_the_earlier_file(tmp_path, fixtures_dir,
                                                               uncased_vocab):
    """A file-size limit (EFBIG) as a full disk (ENOSPC) would: no partial file is left."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.tfrecord").write_text("the user's earlier file\n")

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, resource.RLIM_INFINITY))
    args = _kill_test_args(fixtures_dir, tmp_path, uncased_vocab, out) + ["--num_workers=1"]
    result = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=300, preexec_fn=small_files)
    assert result.returncode != 0
    assert re.search(rf"writing {out}/[ab].tfrecord failed: File too large", result.stderr), \
        result.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["a.tfrecord"]
    assert (out / "a.tfrecord").read_text() == "the user's earlier file\n"


def _kill_test_args(fixtures_dir, tmp_path, uncased_vocab, out):
    """Flags of a run over a small corpus long enough to be caught mid-way: sample_text.txt's
    sentences as 100 overlapping documents (86 KB), 40 duplicates, 2,000-byte chunks, records
    written as each chunk is done (no shuffle buffer)."""
    corpus = tmp_path / "corpus.txt"
    if not corpus.exists():
        text = (fixtures_dir / "pretraining_data" / "sample_text.txt").read_text("utf-8")
        lines = [line for line in text.splitlines() if line.strip()]
        documents = ["\n".join(lines[i:i + 6]) for i in range(len(lines) - 6)]
        corpus.write_text("\n\n".join(documents * 4) + "\n", "utf-8")
    return [f"--input_file={corpus}", f"--output_file={out}/a.tfrecord,{out}/b.tfrecord",
            f"--vocab_file={uncased_vocab}", "--dupe_factor=40", "--num_workers=2",
            "--chunk_bytes=2000", "--min_chunk_documents=1", "--shuffle_buffer_size=0"]


def _start_script(args):
    return subprocess.Popen([sys.executable, SCRIPT, *args], cwd=REPO_ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _temporary_files(folder):
    return sorted(str(p) for p in folder.glob(".*.incomplete"))


def _wait_for_temporary_files(folder, process, holding_records):
    """The run's two temporary files once they exist (and hold records, if asked)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert process.poll() is None, "the run ended before it could be caught mid-way"
        found = _temporary_files(folder)
        try:
            if len(found) == 2 and (not holding_records
                                    or all(pathlib.Path(p).stat().st_size for p in found)):
                return found
        except FileNotFoundError:
            pass  # renamed into place between the listing and the stat
        time.sleep(0.005)
    raise AssertionError("no temporary files appeared")


def _outputs(folder):
    return {name: (folder / name).read_bytes() for name in ("a.tfrecord", "b.tfrecord")}


def test_rerun_after_sigkill_removes_the_stale_temporary_files(tmp_path, fixtures_dir,
                                                               uncased_vocab):
    expected = tmp_path / "expected"
    result = _run_script(*_kill_test_args(fixtures_dir, tmp_path, uncased_vocab, expected))
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    args = _kill_test_args(fixtures_dir, tmp_path, uncased_vocab, out)
    killed = _start_script(args)
    stale = _wait_for_temporary_files(out, killed, holding_records=True)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert _temporary_files(out) == stale  # left behind, with records in them
    assert not (out / "a.tfrecord").exists() and not (out / "b.tfrecord").exists()
    result = _run_script(*args)
    assert result.returncode == 0, result.stderr
    for path in stale:
        assert f"Removed {path}: a temporary file of" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["a.tfrecord", "b.tfrecord"]
    assert _outputs(out) == _outputs(expected)


def test_rerun_keeps_the_temporary_files_of_a_run_still_going(tmp_path, fixtures_dir,
                                                              uncased_vocab):
    out = tmp_path / "out"
    args = _kill_test_args(fixtures_dir, tmp_path, uncased_vocab, out)
    running = _start_script(args)
    try:
        temporary = _wait_for_temporary_files(out, running, holding_records=False)
        running.send_signal(signal.SIGSTOP)  # alive, held mid-way
        assert _temporary_files(out) == temporary, "the run ended before it was held"
        result = _run_script(*args)
        assert result.returncode == 0, result.stderr
        assert "Removed" not in result.stderr
        for path in temporary:
            assert f"Kept {path}: a temporary file of" in result.stderr
        assert _temporary_files(out) == temporary
        second = _outputs(out)
        running.send_signal(signal.SIGCONT)
        assert running.wait(timeout=300) == 0  # the first run finishes undisturbed
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()
    assert sorted(p.name for p in out.iterdir()) == ["a.tfrecord", "b.tfrecord"]
    assert _outputs(out) == second


def _pooled(statistics):
    """Instance-weighted means of per-run statistics (counts are averaged per run)."""
    weights = np.array([s.instances for s in statistics], np.float64)

    def mean(name):
        return float(np.dot(weights, [getattr(s, name) for s in statistics]) / weights.sum())

    masked_weights = weights * np.array([s.masked_per_instance for s in statistics])
    histogram = np.sum([w * s.length_histogram for w, s in zip(weights, statistics)], axis=0)
    return stats.PretrainingStatistics(
        instances=float(weights.mean()), fraction_random_next=mean("fraction_random_next"),
        masked_per_instance=mean("masked_per_instance"),
        fraction_mask=float(np.dot(masked_weights, [s.fraction_mask for s in statistics])
                            / masked_weights.sum()),
        fraction_random=float(np.dot(masked_weights, [s.fraction_random for s in statistics])
                              / masked_weights.sum()),
        fraction_kept=float(np.dot(masked_weights, [s.fraction_kept for s in statistics])
                            / masked_weights.sum()),
        length_histogram=histogram / histogram.sum(),
        words_with_masked_piece=sum(s.words_with_masked_piece for s in statistics),
        partly_masked_words=sum(s.partly_masked_words for s in statistics))


def _reference_statistics(corpus, vocab_file, seed, do_whole_word_mask, dupe_factor=10):
    tokenizer = tokenization.FullTokenizer(str(vocab_file))
    made = reference.run_reference([str(corpus)], [], str(vocab_file), random_seed=seed,
                                   dupe_factor=dupe_factor,
                                   do_whole_word_mask=do_whole_word_mask, tokenizer=tokenizer)
    return stats.statistics_from_instances(made, tokenizer.vocab, 128, 20)


def _pipeline_statistics(corpus, vocab_file, folder, seed, do_whole_word_mask, dupe_factor=10,
                         num_workers=2, chunk_bytes=DEFAULT_OPTIONS.chunk_bytes,
                         min_chunk_documents=DEFAULT_OPTIONS.min_chunk_documents):
    outputs = [folder / f"{seed}_{do_whole_word_mask}_{i}.tfrecord" for i in range(2)]
    _write([corpus], outputs, vocab_file, seed, do_whole_word_mask, dupe_factor, num_workers,
           chunk_bytes, min_chunk_documents)
    records = stats.read_records(outputs, 128, 20)
    return stats.statistics_from_records(records, tokenization.load_vocab(vocab_file)), outputs


def _assert_within_issue_tolerances(ours, theirs):
    assert abs(ours.instances - theirs.instances) <= 0.02 * theirs.instances
    assert abs(ours.fraction_random_next - theirs.fraction_random_next) <= 0.015
    assert abs(ours.masked_per_instance - theirs.masked_per_instance) <= (
        0.01 * theirs.masked_per_instance)
    for share in ("fraction_mask", "fraction_random", "fraction_kept"):
        assert abs(getattr(ours, share) - getattr(theirs, share)) <= 0.01, share
    assert ours.total_variation(theirs) <= 0.03


@pytest.mark.parametrize("do_whole_word_mask", [False, True])
def test_statistics_on_sample_text_match_the_original(tmp_path, fixtures_dir, uncased_vocab,
                                                      do_whole_word_mask):
    """10 seeds of the pipeline against the original's figures (one seed) and the reference.

    sample_text.txt gives about 60 instances a run, so the original's single run is noisy: its
    figures are compared with 4 standard errors of a 60-instance sample (masked positions per
    instance have a standard deviation of about 4.5 there).
    """
    folder = fixtures_dir / "pretraining_data"
    corpus = folder / "sample_text.txt"
    name = f"original_wwm_{str(do_whole_word_mask).lower()}"
    original = json.loads((folder / f"{name}.stats.json").read_text())
    seeds = range(10)
    ours = _pooled([_pipeline_statistics(corpus, uncased_vocab, tmp_path, seed,
                                         do_whole_word_mask, 5, 1)[0] for seed in seeds])
    runs = [_reference_statistics(corpus, uncased_vocab, seed, do_whole_word_mask, 5)
            for seed in seeds]
    theirs = _pooled(runs)
    count_sd = np.std([run.instances for run in runs])
    assert abs(ours.instances - original["instances"]) < 4 * count_sd
    assert abs(ours.instances - theirs.instances) < 4 * count_sd * np.sqrt(2 / len(seeds))
    assert abs(ours.fraction_random_next - original["fraction_is_random_next"]) < 4 * np.sqrt(
        0.25 / original["instances"])
    assert abs(ours.masked_per_instance - original["masked_per_instance_mean"]) < (
        4 * 4.5 / np.sqrt(original["instances"]))
    assert abs(ours.fraction_mask - original["fraction_masked_replaced_by_MASK"]) < (
        4 * np.sqrt(0.16 / original["masked_total"]))
    if do_whole_word_mask:
        assert ours.partly_masked_words == theirs.partly_masked_words == 0


def _conll_corpus(shared_data_dir, path):
    """CoNLL-2003 training news as sentences (words joined by spaces), one document per
    -DOCSTART-: 946 documents, short enough that instance counts vary little between seeds."""
    documents, sentence = [[]], []
    for line in (shared_data_dir / "conll2003" / "train.txt").open(encoding="utf-8"):
        if line.startswith("-DOCSTART-"):
            documents.append([])
        elif line.strip():
            sentence.append(line.split()[0])
        elif sentence:
            documents[-1].append(" ".join(sentence))
            sentence = []
    path.write_text("".join("\n".join(d) + "\n\n" for d in documents if d), "utf-8")
    return path


@pytest.mark.slow
def test_statistics_on_conll_news_match_the_reference_within_the_issue_tolerances(
        tmp_path, shared_data_dir, uncased_vocab):
    """Three seeds of each (about 35,000 instances a run), pooled.

    Between seeds the original's instance count varies by about 0.7% (one standard deviation)
    and its mean masked count by about 0.55% here, so the pooled differences have standard
    deviations of about 0.55% and 0.45% against the 2% and 1% tolerances; the shares of random
    next sentences and of [MASK] / random / kept tokens are far more precise.
    """
    corpus = _conll_corpus(shared_data_dir, tmp_path / "conll.txt")
    seeds = (1, 2, 3)
    ours = _pooled([_pipeline_statistics(corpus, uncased_vocab, tmp_path, seed, False,
                                         num_workers=1)[0] for seed in seeds])
    theirs = _pooled([_reference_statistics(corpus, uncased_vocab, seed + 100, False)
                      for seed in seeds])
    assert theirs.instances > 30_000
    _assert_within_issue_tolerances(ours, theirs)


@pytest.fixture(scope="module")
def wikitext_run(tmp_path_factory, shared_data_dir, uncased_vocab):
    """This pipeline with whole-word masking on WikiText-2 test, 2 workers, 6 chunks."""
    corpus = shared_data_dir / "wikitext-2-raw" / "wiki.test.sentences.txt"
    folder = tmp_path_factory.mktemp("wikitext")
    statistics, outputs = _pipeline_statistics(corpus, uncased_vocab, folder, 7, True,
                                               chunk_bytes=200_000, min_chunk_documents=8)
    return corpus, statistics, outputs


def test_statistics_on_wikitext_match_the_reference(wikitext_run, uncased_vocab):
    """Whole-word masking on WikiText-2 test (62 long articles).

    The masking statistics meet the issue's tolerances. On this corpus the original's own
    packing statistics vary between seeds by more than those tolerances (one standard
    deviation: instance count 2.2%, random-next share 1.1 points, mean length 1.6%), because a
    short target drawn for one long article changes hundreds of instances; they are compared
    with 4 of those standard deviations here and at the issue's tolerances on the CoNLL news.
    """
    corpus, ours, _ = wikitext_run
    theirs = _reference_statistics(corpus, uncased_vocab, 8, True)
    assert theirs.instances > 25_000
    assert ours.partly_masked_words == theirs.partly_masked_words == 0
    for share in ("fraction_mask", "fraction_random", "fraction_kept"):
        assert abs(getattr(ours, share) - getattr(theirs, share)) <= 0.01, share
    assert abs(ours.instances - theirs.instances) <= 4 * 0.022 * np.sqrt(2) * theirs.instances
    assert abs(ours.fraction_random_next - theirs.fraction_random_next) <= 4 * 0.011 * np.sqrt(2)
    assert abs(ours.masked_per_instance - theirs.masked_per_instance) <= (
        4 * 0.016 * np.sqrt(2) * theirs.masked_per_instance)


def test_output_is_deterministic_whatever_num_workers(wikitext_run, tmp_path, uncased_vocab):
    corpus, _, first_outputs = wikitext_run
    for num_workers in (1, 2):
        folder = tmp_path / str(num_workers)
        folder.mkdir()
        _, outputs = _pipeline_statistics(corpus, uncased_vocab, folder, 7, True,
                                          num_workers=num_workers, chunk_bytes=200_000,
                                          min_chunk_documents=8)
        for ours, first in zip(outputs, first_outputs):
            assert ours.read_bytes() == first.read_bytes()


@pytest.mark.parametrize("signum, to_group", [(signal.SIGINT, True), (signal.SIGTERM, False)])
def test_ctrl_c_or_sigterm_mid_way_removes_the_runs_temporary_files(tmp_path, fixtures_dir,
                                                                   uncased_vocab, signum, to_group):
    """Ctrl-C reaches the parent and its worker processes at once (the terminal's process
    group); a scheduler's SIGTERM the parent alone. Either way the run stops within seconds,
    says so, and leaves the earlier file as it was and nothing of its own."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.tfrecord").write_text("the user's earlier file\n")
    running = subprocess.Popen([sys.executable, SCRIPT, *_kill_test_args(
        fixtures_dir, tmp_path, uncased_vocab, out)], cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for_temporary_files(out, running, holding_records=True)
        if to_group:
            os.killpg(running.pid, signum)
        else:
            running.send_signal(signum)
        _, stderr = running.communicate(timeout=120)
    finally:
        if running.poll() is None:
            os.killpg(running.pid, signal.SIGKILL)
            running.wait()
    assert running.returncode == 1, stderr[-3000:]
    assert f"stopped by {signal.Signals(signum).name}" in stderr, stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["a.tfrecord"]
    assert (out / "a.tfrecord").read_text() == "the user's earlier file\n"
