"""Tests of the fine-tuning benchmark's pieces: run order, timings, verdicts, the peer's labelling."""
import json
import shutil

import numpy as np
import pytest

from bench import finetune_report
from bench.finetune_real_weights import TASKS, FineTuneTask, plan, run_key, training_timing
from data import conll, ner_features, tokenization


def test_plan_runs_every_task_once_before_the_extra_seeds_each_framework_in_turn():
    runs = plan(list(TASKS), None)
    first_round = [(t, f) for t, f, seed in runs if seed == 1]
    assert first_round == [(t, f) for t in TASKS for f in ("this_project", "transformers")]
    assert runs[:len(first_round)] == [(t, f, 1) for t, f in first_round]
    for name, task in TASKS.items():
        for framework in ("this_project", "transformers"):
            assert sorted(s for t, f, s in runs if (t, f) == (name, framework)) == \
                list(range(1, task.seeds + 1))
    # At least two tasks with three seeds per framework.
    assert sum(task.seeds >= 3 for task in TASKS.values()) >= 2
    assert all(seed == 1 for _, _, seed in plan(list(TASKS), 1))


def test_training_time_comes_from_the_last_progress_line():
    log = ("I1201 trainer.py:187] step 10/20: loss = 0.7, learning_rate = 1e-05, 40.0 examples/s\n"
           "I1201 trainer.py:187] step 20/20: loss = 0.5, learning_rate = 0, 32.0 examples/s\n")
    timing = training_timing(log, num_examples=300, num_epochs=2)
    # 20 steps of 32 examples at 32 examples/s.
    assert timing["train_seconds"] == pytest.approx(20.0)
    assert timing["seconds_per_epoch"] == pytest.approx(10.0)
    assert timing["examples_per_second"] == pytest.approx(600 / 20.0)


def _results(ours: list[float], theirs: list[float], ours_epoch_s: float,
             theirs_epoch_s: float) -> dict:
    runs = {}
    for framework, values, seconds in (("this_project", ours, ours_epoch_s),
                                       ("transformers", theirs, theirs_epoch_s)):
        for seed, value in enumerate(values, start=1):
            runs[run_key("cola", framework, seed)] = {
                "eval_mcc": value, "eval_accuracy": 0.8, "seconds_per_epoch": seconds,
                "examples_per_second": 100.0 / seconds}
    return {"runs": runs}


_COLA = FineTuneTask("cola", 32, 2, 3, ("eval_mcc", "eval_accuracy"))


def test_a_mean_lower_by_more_than_one_point_and_one_sd_fails():
    # This: 0.40, 0.42, 0.44 (mean 42, sd 2 points); transformers: 0.44, 0.45, 0.46 (45, sd 1).
    summary = finetune_report.task_summary(_results([0.40, 0.42, 0.44], [0.44, 0.45, 0.46],
                                                    20.0, 25.0), _COLA)
    ours = summary["frameworks"]["this_project"]["metrics"]["eval_mcc"]
    assert ours == pytest.approx((42.0, 2.0))
    assert not summary["metric_ok"]  # 42 < 45 - max(1, 2)
    assert summary["speed_ratio"] == pytest.approx(25.0 / 20.0)


def test_a_mean_within_the_larger_sd_passes_and_one_seed_uses_one_point():
    summary = finetune_report.task_summary(_results([0.41, 0.43, 0.45], [0.44, 0.45, 0.46],
                                                    20.0, 25.0), _COLA)
    assert summary["metric_ok"]  # 43 >= 45 - 2
    single = finetune_report.task_summary(_results([0.439], [0.45], 20.0, 25.0), _COLA)
    assert single["frameworks"]["this_project"]["metrics"]["eval_mcc"][1] is None
    assert not single["metric_ok"]  # 43.9 < 45 - 1
    assert finetune_report.task_summary({"runs": {}}, _COLA) is None


def test_markdown_shows_each_task_with_both_frameworks():
    text = finetune_report.markdown(_results([0.40, 0.42, 0.44], [0.44, 0.45, 0.46], 20.0, 25.0),
                                    {"cola": _COLA})
    row = next(line for line in text.splitlines() if line.startswith("| CoLA"))
    assert row.split(" | ")[1:7] == ["MCC", "3/3", "42.0 ± 2.0", "45.0 ± 1.0", "**no**", "20"]
    assert row.rstrip(" |").endswith("1.25x")


def test_the_transformers_run_labels_the_words_this_project_labels(uncased_vocab,
                                                                   shared_data_dir, tmp_path):
    """Both frameworks train on the first piece of every word of the same CoNLL sentences."""
    transformers = pytest.importorskip("transformers")
    from bench.hf_finetune import _ner_encodings
    data = conll.read_conll_file(shared_data_dir / "conll2003" / "valid.txt")
    data = conll.ConllData(documents=data.documents[:3], source_scheme=data.source_scheme)
    labels = conll.label_list(conll.entity_types(data))
    # A folder as the converted models have it: vocab.txt and tokenizer_config.json.
    shutil.copyfile(uncased_vocab, tmp_path / "vocab.txt")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"do_lower_case": True, "tokenizer_class": "BertTokenizer"}))
    hf_tokenizer = transformers.BertTokenizerFast.from_pretrained(str(tmp_path))
    assert hf_tokenizer.tokenize("all-rounder") == ["all", "-", "round", "##er"]
    encodings, positions = _ner_encodings(hf_tokenizer, data, labels, max_seq_length=24)
    ours = ner_features.convert_documents_to_features(
        data.documents, tokenization.FullTokenizer(str(uncased_vocab), True), labels, 24)
    assert [list(p) for p in ours.word_positions] == positions
    np.testing.assert_array_equal(encodings["input_ids"].numpy(), ours.input_ids)
    hf_labels = encodings["labels"].numpy()
    np.testing.assert_array_equal(np.where(hf_labels == -100, -1, hf_labels), ours.label_ids)


def test_the_transformers_answer_is_the_best_span_inside_the_context(uncased_vocab, tmp_path):
    transformers = pytest.importorskip("transformers")
    from bench.hf_finetune import _best_spans
    shutil.copyfile(uncased_vocab, tmp_path / "vocab.txt")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"do_lower_case": True, "tokenizer_class": "BertTokenizer"}))
    tokenizer = transformers.BertTokenizerFast.from_pretrained(str(tmp_path))
    questions = [("q1", "who came?", "The old man came home late.")]
    encoded = tokenizer(["who came?"], ["The old man came home late."], truncation="only_second",
                        max_length=32, stride=8, return_overflowing_tokens=True,
                        return_offsets_mapping=True, padding="max_length")
    tokens = encoded.tokens(0)
    start_logits, end_logits = np.zeros((1, 32)), np.zeros((1, 32))
    # The best pair overall starts in the question: it must lose to "old man".
    start_logits[0, tokens.index("who")], end_logits[0, tokens.index("came")] = 9.0, 9.0
    start_logits[0, tokens.index("old")], end_logits[0, tokens.index("man")] = 5.0, 5.0
    answers = _best_spans(encoded, {"start_logits": start_logits, "end_logits": end_logits},
                          questions, max_answer_length=30)
    assert answers == {"q1": "old man"}
