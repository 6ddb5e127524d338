"""Tests of the fine-tuning benchmark's pieces: run order, timings, verdicts, the peer's labelling."""
import json
import shutil

import numpy as np
import pytest

from bench.fine_tuning import real_weights, report as finetune_report
from bench.fine_tuning.real_weights import (TIMING, TIMING_GROUPED, TIMINGS, drop_stale_runs, plan,
                                            run_key, runs_table)
from bench.fine_tuning.runs import TASKS, FineTuneTask, real_token_counts, training_timing
from data import tokenization
from data.ner import conll, features
from tests.support.dependencies import require


def test_plan_runs_every_task_once_before_the_extra_seeds_then_times_each_task():
    runs = plan(list(TASKS), None)
    seeded = [name for name, task in TASKS.items() if task.seeds]
    first_round = [(t, f) for t, f, seed in runs if seed == 1]
    assert first_round == [(t, f) for t in seeded for f in ("this_project", "transformers")]
    assert runs[:len(first_round)] == [(t, f, 1) for t, f in first_round]
    for name, task in TASKS.items():
        for framework in ("this_project", "transformers"):
            assert sorted(s for t, f, s in runs if (t, f) == (name, framework)
                          and s not in TIMINGS) == list(range(1, task.seeds + 1))
    # The timing runs come last: one per task and framework, SQuAD prediction among them, then
    # one with length-grouped batches per training task and framework.
    timing = [(t, f) for t, f, seed in runs if seed == TIMING]
    grouped = [(t, f) for t, f, seed in runs if seed == TIMING_GROUPED]
    assert runs[-len(timing) - len(grouped):] == \
        [(t, f, TIMING) for t, f in timing] + [(t, f, TIMING_GROUPED) for t, f in grouped]
    assert timing == [(t, f) for t in TASKS for f in ("this_project", "transformers")]
    assert grouped == [(t, f) for t, f in timing if t != "squad_predict"]
    # At least two tasks with three seeds per framework.
    assert sum(task.seeds >= 3 for task in TASKS.values()) >= 2
    assert all(seed in (1, *TIMINGS) for _, _, seed in plan(list(TASKS), 1))
    assert all(seed not in TIMINGS for _, _, seed in plan(list(TASKS), None, "accuracy"))
    assert plan(["mrpc"], None, TIMING) == [
        ("mrpc", "this_project", TIMING), ("mrpc", "transformers", TIMING),
        ("mrpc", "this_project", TIMING_GROUPED), ("mrpc", "transformers", TIMING_GROUPED)]


def test_every_task_runs_at_the_scripts_default_length_and_stale_runs_are_dropped():
    assert {t.max_seq_length for n, t in TASKS.items() if n != "squad_predict"} == {128}
    assert TASKS["squad_predict"].max_seq_length == 384
    results = {"runs": {"mrpc/this_project/1": {"max_seq_length": 88},
                        "mrpc/transformers/1": {"max_seq_length": 128},
                        "cola/transformers/1": {}},
               "timing": {"m": {"runs": {"cola/this_project/timing": {"max_seq_length": 32}}}}}
    drop_stale_runs(results)
    assert results == {"runs": {"mrpc/transformers/1": {"max_seq_length": 128}},
                       "timing": {"m": {"runs": {}}}}


def test_timings_are_kept_per_kind_of_machine(monkeypatch):
    results = {"runs": {}}
    machines = iter([{"cpu": "Xeon", "cores": 2, "isa": ["avx2", "amx_bf16"]},
                     {"cpu": "EPYC", "cores": 2, "isa": ["avx2"]}])
    monkeypatch.setattr(real_weights, "machine_description", lambda: next(machines))
    runs_table(results, TIMING)["mrpc/this_project/timing"] = {"seconds_per_epoch": 1.0}
    runs_table(results, TIMING)["mrpc/this_project/timing"] = {"seconds_per_epoch": 2.0}
    runs_table(results, 1)["mrpc/this_project/1"] = {"eval_f1": 0.8}
    assert sorted(results["timing"]) == ["EPYC, 2 cores, avx2", "Xeon, 2 cores, avx2, amx_bf16"]
    assert results["timing"]["EPYC, 2 cores, avx2"]["runs"] == {
        "mrpc/this_project/timing": {"seconds_per_epoch": 2.0}}
    assert results["runs"] == {"mrpc/this_project/1": {"eval_f1": 0.8}}


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
    runs, timing = {}, {}
    for framework, values, seconds in (("this_project", ours, ours_epoch_s),
                                       ("transformers", theirs, theirs_epoch_s)):
        for seed, value in enumerate(values, start=1):
            runs[run_key("cola", framework, seed)] = {"eval_mcc": value, "eval_accuracy": 0.8}
        timing[run_key("cola", framework, TIMING)] = {"seconds_per_epoch": seconds,
                                                      "examples_per_second": 100.0 / seconds}
    machine = {"cpu": "EPYC", "cores": 2, "isa": ["avx2"], "versions": {"torch": "2"}}
    return {"runs": runs, "timing": {"EPYC, 2 cores, avx2": {"machine": machine, "runs": timing}}}


_COLA = FineTuneTask("cola", 32, 2, 3, ("eval_mcc", "eval_accuracy"))


def test_a_mean_lower_by_more_than_one_point_and_one_sd_fails():
    # This: 0.40, 0.42, 0.44 (mean 42, sd 2 points); transformers: 0.44, 0.45, 0.46 (45, sd 1).
    results = _results([0.40, 0.42, 0.44], [0.44, 0.45, 0.46], 20.0, 25.0)
    summary = finetune_report.task_summary(results, _COLA)
    ours = summary["frameworks"]["this_project"]["metrics"]["eval_mcc"]
    assert ours == pytest.approx((42.0, 2.0))
    assert not summary["metric_ok"]  # 42 < 45 - max(1, 2)
    timing = results["timing"]["EPYC, 2 cores, avx2"]["runs"]
    assert finetune_report.speed_ratio(timing, "cola") == pytest.approx(25.0 / 20.0)
    assert finetune_report.speed_ratio(timing, "mrpc") is None


def test_a_mean_within_the_larger_sd_passes_and_one_seed_uses_one_point():
    summary = finetune_report.task_summary(_results([0.41, 0.43, 0.45], [0.44, 0.45, 0.46],
                                                    20.0, 25.0), _COLA)
    assert summary["metric_ok"]  # 43 >= 45 - 2
    single = finetune_report.task_summary(_results([0.439], [0.45], 20.0, 25.0), _COLA)
    assert single["frameworks"]["this_project"]["metrics"]["eval_mcc"][1] is None
    assert not single["metric_ok"]  # 43.9 < 45 - 1
    assert finetune_report.task_summary({"runs": {}}, _COLA) is None


def test_markdown_shows_each_task_with_both_frameworks_and_a_speed_table_per_machine():
    text = finetune_report.markdown(_results([0.40, 0.42, 0.44], [0.44, 0.45, 0.46], 20.0, 25.0),
                                    {"cola": _COLA})
    rows = [line for line in text.splitlines() if line.startswith("| CoLA")]
    assert rows[0].split(" | ")[1:] == ["MCC", "3/3", "42.0 ± 2.0", "45.0 ± 1.0", "**no** |"]
    assert "## Speed on EPYC, 2 cores, avx2" in text
    # No matmul peak and no token counts in these results: no MFU figures.
    assert rows[1].split(" | ")[1:] == ["32", "random", "20", "25", "5.0", "4.0", "-", "-",
                                        "1.25x |"]
    assert "measured with the run (none with these runs)" in text


def test_the_peak_is_the_fastest_float32_rate_from_wall_or_cpu_time():
    rows = [{"framework": "tensorflow", "dtype": "float32", "gflops": 200.0, "best_gflops": 210.0},
            {"framework": "torch", "dtype": "float32", "gflops": 190.0, "best_gflops": 205.0,
             "cpu_gflops": 230.0},
            {"framework": "torch", "dtype": "bfloat16", "gflops": 400.0, "best_gflops": 400.0}]
    assert finetune_report.peak_gflops(rows) == 230.0
    assert finetune_report.peak_gflops(rows[:1]) == 210.0
    assert finetune_report.peak_gflops(rows[2:]) is None


def test_the_useful_token_mfu_of_each_side_by_hand():
    results = _results([0.4], [0.4], 20.0, 25.0)
    runs = results["timing"]["EPYC, 2 cores, avx2"]["runs"]
    for run in runs.values():
        run["peak_gflops"] = 230.0
    # 100 sequences of 40 tokens; this project's epoch trains on 96 of them (3 batches of 32),
    # transformers' on all 100.
    tokens = {"cola": {"sequences": 100, "tokens": 4000, "tokens_squared": 160_000,
                       "max_seq_length": 128}}
    results["tokens"] = tokens
    size = finetune_report.MINILM_L6_H384
    per_sequence = 6 * size.non_embedding_parameters * 40 + 3 * 6 * 4 * 384 * 40 ** 2
    ours = finetune_report.useful_mfu(runs["cola/this_project/timing"], "this_project",
                                      tokens["cola"])
    theirs = finetune_report.useful_mfu(runs["cola/transformers/timing"], "transformers",
                                        tokens["cola"])
    assert ours == pytest.approx(96 * per_sequence / 20.0 / 230e9)
    assert theirs == pytest.approx(100 * per_sequence / 25.0 / 230e9)
    assert finetune_report.useful_mfu(runs["cola/this_project/timing"], "this_project", None) \
        is None
    assert finetune_report.useful_gflops(runs["cola/this_project/timing"], "this_project",
                                         tokens["cola"]) == pytest.approx(ours * 230)
    text = finetune_report.markdown(results, {"cola": _COLA})
    row = [line for line in text.splitlines() if line.startswith("| CoLA")][1]
    assert row.split(" | ")[7:9] == [f"{230 * ours:.0f} ({100 * ours:.0f}%)",
                                     f"{230 * theirs:.0f} ({100 * theirs:.0f}%)"]
    assert "measured with the run (230 GFLOP/s)" in text
    # Without a peak the rate stands alone.
    del runs["cola/transformers/timing"]["peak_gflops"]
    row = [line for line in finetune_report.markdown(results, {"cola": _COLA}).splitlines()
           if line.startswith("| CoLA")][1]
    assert row.split(" | ")[8] == f"{230 * theirs:.0f}"


def test_real_tokens_are_counted_as_the_scripts_make_the_sequences(uncased_vocab, tmp_path):
    from data.classifier import glue_tasks
    from data.classifier.features import convert_examples_to_features, features_to_arrays
    rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
            "1\t1\t2\tThe cat sat on the mat.\tA cat was sitting on a mat.",
            "0\t3\t4\tStocks fell sharply on Monday.\t" + "Markets rallied " * 40]
    (tmp_path / "train.tsv").write_text("\n".join(rows) + "\n")
    task = FineTuneTask("mrpc", 32, 1, 1, ("eval_f1",))
    counts = real_token_counts(task, str(tmp_path), str(uncased_vocab))
    glue = glue_tasks.get_task("mrpc")
    features = convert_examples_to_features(
        glue_tasks.read_examples(glue, str(tmp_path), "train"), glue.label_list, 32,
        tokenization.FullTokenizer(str(uncased_vocab), True))
    lengths = features_to_arrays(features)["input_mask"].sum(axis=1)
    assert lengths[1] == 32  # cut to max_seq_length
    assert counts == finetune_report.TokenCounts.from_lengths(lengths)


def test_markdown_shows_the_squad_prediction_beside_the_epoch_timings():
    results = _results([0.4], [0.4], 20.0, 25.0)
    squad = {"questions": 100, "features_seconds": 1.0, "answers_seconds": 2.0,
             "exact_match": 50.0, "f1": 60.0}
    timing = results["timing"]["EPYC, 2 cores, avx2"]["runs"]
    timing[run_key("squad_predict", "this_project", TIMING)] = {
        **squad, "questions_per_second": 5.0, "predict_seconds": 20.0, "model_seconds": 17.0}
    timing[run_key("squad_predict", "transformers", TIMING)] = {
        **squad, "questions_per_second": 4.0, "predict_seconds": 25.0, "model_seconds": 22.0,
        "same_answer_share": 0.99}
    text = finetune_report.markdown(results, {"cola": _COLA, "squad_predict": TASKS["squad_predict"]})
    assert "| this project | 5.0 | 20 | 1.0 | 17.0 | 2.0 | 50.0 | 60.0 |" in text
    assert "| transformers | 4.0 | 25 |" in text
    assert "Same answer in 99.0% of the questions" in text
    assert "(this project's questions/s / transformers'): 1.25x" in text


def test_the_transformers_run_labels_the_words_this_project_labels(uncased_vocab,
                                                                   shared_data_dir, tmp_path):
    """Both frameworks train on the first piece of every word of the same CoNLL sentences."""
    transformers = require("transformers")
    from bench.fine_tuning.transformers_run import _ner_encodings
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
    ours = features.convert_documents_to_features(
        data.documents, tokenization.FullTokenizer(str(uncased_vocab), True), labels, 24)
    assert [list(p) for p in ours.word_positions] == positions
    np.testing.assert_array_equal(encodings["input_ids"].numpy(), ours.input_ids)
    hf_labels = encodings["labels"].numpy()
    np.testing.assert_array_equal(np.where(hf_labels == -100, -1, hf_labels), ours.label_ids)


def test_the_transformers_answer_is_the_best_span_inside_the_context(uncased_vocab, tmp_path):
    transformers = require("transformers")
    from bench.fine_tuning.transformers_run import _best_spans
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


def test_the_transformers_batches_are_its_collators(uncased_vocab, tmp_path):
    """Cut to the batch's longest row, the peer's batches are what DataCollatorWithPadding
    makes of the unpadded encodings."""
    transformers = require("transformers")
    torch = require("torch")
    from bench.fine_tuning.transformers_run import _batch
    shutil.copyfile(uncased_vocab, tmp_path / "vocab.txt")
    tokenizer = transformers.BertTokenizerFast(str(tmp_path / "vocab.txt"), do_lower_case=True)
    texts = ["a short one", "a somewhat longer sentence than the first", "mid length text",
             "x"]
    padded = {k: torch.tensor(v) for k, v in tokenizer(
        texts, max_length=32, truncation=True, padding="max_length").items()}
    collator = transformers.DataCollatorWithPadding(tokenizer)
    for rows in ([0, 2], [1, 3], [3]):
        ours = _batch(padded, torch.tensor(rows), "longest")
        theirs = collator([{k: v for k, v in tokenizer(texts[r]).items()} for r in rows])
        assert set(ours) == set(theirs)
        for key in ours:
            assert torch.equal(ours[key], theirs[key]), key
            assert ours[key].is_contiguous(), key  # as the collator's: `.view` must work
    assert _batch(padded, torch.tensor([0]), "max_length")["input_ids"].shape == (1, 32)


def test_optimizer_benchmark_summary_checks_and_choice_by_hand():
    from bench.fine_tuning import optimizers
    accuracy = {
        "adamw_bias_corrected": {"5e-5": {"1": 0.56, "2": 0.54, "3": 0.58},
                                 "2e-5": {"1": 0.58, "2": 0.50, "3": 0.55}},
        "transformers": {"5e-5": {"1": 0.57, "2": 0.55, "3": 0.56},
                         "2e-5": {"1": 0.60, "2": 0.59, "3": 0.58}}}
    found = optimizers.summarize(accuracy, majority=146 / 277)
    # A run at the majority class's accuracy, written as float32 by the script, is not below it.
    at_majority = optimizers.summarize({"adamw": {"5e-5": {"1": 0.5270758, "2": 0.6}}},
                                       majority=146 / 277)
    assert at_majority["summary"]["adamw"]["5e-5"]["below_majority"] == 0
    row = found["summary"]["adamw_bias_corrected"]["2e-5"]
    assert row["mean"] == pytest.approx(1.63 / 3)  # (0.58 + 0.50 + 0.55) / 3
    assert row["sd"] == pytest.approx(np.std([0.58, 0.50, 0.55], ddof=1))
    assert (row["min"], row["below_majority"]) == (0.50, 1)
    # 5e-5: 0.56 against 0.56, within 1 point, no seed below 0.5271; 2e-5: 0.5433 against 0.59.
    checks = found["checks"]["adamw_bias_corrected"]
    assert checks["5e-5"] == {"seeds": 3, "mean_gap": pytest.approx(0.0),
                              "within_1_point": True, "no_seed_below_majority": True}
    assert not checks["2e-5"]["within_1_point"]
    assert not checks["2e-5"]["no_seed_below_majority"]
    # Each bias-corrected side is checked, the one at PyTorch's epsilon too; the original's not.
    assert set(found["checks"]) == {"adamw_bias_corrected"}
    both = optimizers.summarize(
        {**accuracy, "adamw_bias_corrected_epsilon_1e-8": {"2e-5": {"1": 0.59, "2": 0.59}},
         "adamw": {"2e-5": {"1": 0.5}}}, majority=146 / 277)
    assert set(both["checks"]) == {"adamw_bias_corrected", "adamw_bias_corrected_epsilon_1e-8"}
    # 0.59 against transformers' 0.595 over the seeds both ran (1 and 2; 0.59 over all three):
    # 0.5 points below, within 1.
    assert both["checks"]["adamw_bias_corrected_epsilon_1e-8"] == {"2e-5": {
        "seeds": 2, "mean_gap": pytest.approx(-0.005), "within_1_point": True,
        "no_seed_below_majority": True}}
    # The best single run of all; 0.58 is reached at 5e-5 seed 3 first, in the grid's order.
    assert found["chosen"]["adamw_bias_corrected"] == {"learning_rate": "5e-5", "seed": 3,
                                                       "value": 0.58}
    assert found["chosen"]["transformers"]["value"] == 0.60


def test_optimizer_benchmark_report_names_its_epochs():
    from bench.fine_tuning import optimizers
    accuracy = {"adamw_bias_corrected": {"2e-5": {"1": 0.56, "2": 0.50}},
                "transformers": {"2e-5": {"1": 0.57, "2": 0.55}}}
    results = {"accuracy": accuracy, "majority_class_accuracy": 146 / 277, "machines": {},
               **optimizers.summarize(accuracy, majority=146 / 277)}
    borrowed = "the fine-tuning benchmark's RTE runs"
    # Written before reports named their epochs: the fine-tuning benchmark's 2, whose RTE runs
    # at 5e-5 it borrows.
    report = optimizers.report_markdown(results)
    assert ", 2 epochs." in report and borrowed in report
    report = optimizers.report_markdown({**results, "epochs": 3})
    assert ", 3 epochs." in report and borrowed not in report
    assert "| 2e-5 | 56.0 | 50.0 |" in report  # seeds 1 and 2 of the bias-corrected side
    assert "mean -3.0 points over the 2 seeds both ran; within 1 point: no" in report


def test_optimizer_benchmark_report_has_a_column_for_every_seed_any_side_ran():
    from bench.fine_tuning import optimizers
    # More seeds for one side at one rate: the others' rows leave those cells empty.
    accuracy = {"adamw_bias_corrected": {"2e-5": {"1": 0.56, "2": 0.50, "7": 0.60}},
                "transformers": {"2e-5": {"1": 0.57, "2": 0.55}}}
    assert optimizers.seeds_of(accuracy) == [1, 2, 7]
    found = optimizers.summarize(accuracy, majority=146 / 277)
    assert found["chosen"]["adamw_bias_corrected"] == {"learning_rate": "2e-5", "seed": 7,
                                                       "value": 0.60}
    report = optimizers.report_markdown(
        {"accuracy": accuracy, "majority_class_accuracy": 146 / 277, "machines": {},
         "epochs": 3, **found})
    assert "| seed 1 | seed 2 | seed 7 | mean ± sd |" in report
    assert "| 2e-5 | 56.0 | 50.0 | 60.0 | 55.3 ± 5.0 | 1 |" in report
    assert "| 2e-5 | 57.0 | 55.0 |  | 56.0 ± 1.4 | 0 |" in report
    # Against transformers over seeds 1 and 2 only: 0.53 against 0.56, not 0.5533.
    assert "mean -3.0 points over the 2 seeds both ran" in report


def test_ner_document_context_summary_and_log_parsing():
    from bench.ner import document_context
    runs = {"sentence": {"1": {"dev_f1": 0.90, "test_f1": 0.86},
                         "2": {"dev_f1": 0.92, "test_f1": 0.85}},
            "document_context": {"1": {"dev_f1": 0.93, "test_f1": 0.88}}}
    summary = document_context.summarize(runs)
    assert summary["sentence"]["dev_f1"]["mean"] == pytest.approx(0.91)
    assert summary["sentence"]["test_f1"]["sd"] == pytest.approx(np.std([0.86, 0.85], ddof=1))
    assert summary["document_context"]["test_f1"] == {"mean": 0.88, "sd": 0.0}
    # The header the training loop logs (training/fine_tuning.py), read back for the run's size.
    line = ("I1205 08:57:06.926809 1 fine_tuning.py:161] ***** Running training *****: "
            "14041 examples, batch size 32, 1316 steps")
    assert document_context._TRAINING.findall(line) == [("14041", "1316")]


def test_ner_long_documents_says_whether_the_context_or_the_windows_changed_a_tag():
    from bench.ner import long_documents
    sentences = [["B-PER", "O", "B-LOC", "O"], ["B-ORG"]]
    windows = [["B-PER", "B-PER", "B-ORG", "O"], ["I-ORG"]]
    whole = [["B-PER", "B-PER", "B-LOC", "B-MISC"], ["B-MISC"]]
    # Three words differ: the whole document tags one as the windows, one as the sentence.
    assert long_documents.whole_document_sides(sentences, windows, whole) == (3, 1, 1)
    assert long_documents.whole_document_sides(sentences, sentences, whole) == (0, 0, 0)


def test_ner_long_documents_reads_run_ner_predictions_by_document(tmp_path):
    from bench.ner import long_documents
    test_file = tmp_path / "test.txt"
    test_file.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n"
                         "Peter NNP B-NP B-PER\n\n-DOCSTART- -X- -X- O\n\nBonn NNP B-NP B-LOC\n",
                         encoding="utf-8")
    documents = long_documents.test_documents(str(test_file))
    assert [len(d) for d in documents] == [2, 1]
    assert long_documents.run_ner_test_tags(str(tmp_path), documents) is None
    (tmp_path / "predictions_test.txt").write_text(
        "EU B-ORG B-ORG\nrejects O O\n\nPeter B-PER I-PER\n\nBonn B-LOC O\n\n", encoding="utf-8")
    assert long_documents.run_ner_test_tags(str(tmp_path), documents) == [
        ["B-ORG", "O", "I-PER"], ["O"]]
    # Words in agreement, and among them those the first tagging calls entities.
    first, second = [["B-ORG", "O", "I-PER"], ["O"]], [["B-ORG", "O", "B-PER"], ["B-LOC"]]
    assert long_documents.same_count(first, second) == 2
    assert long_documents.same_count(first, second, only_entities=True) == 1
    (tmp_path / "predictions_test.txt").write_text("EU B-ORG B-ORG\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="predictions_test.txt: 1 sentences"):
        long_documents.run_ner_test_tags(str(tmp_path), documents)


def test_paper_selection_reads_grids_and_chooses_by_the_papers_rule():
    from bench.fine_tuning import paper_selection
    selection = {"runs": [
        {"learning_rate": 5e-05, "seed": 1, "results": {"eval_f1": 0.80, "eval_accuracy": 0.7}},
        {"learning_rate": 4e-05, "seed": 1, "results": {"eval_f1": 0.84, "eval_accuracy": 0.8}},
        {"learning_rate": 2e-05, "seed": 1, "results": {"eval_f1": 0.84, "eval_accuracy": 0.9}}]}
    table = paper_selection.metric_table(selection, "eval_f1")
    assert table == {"5e-5": {"1": 0.80}, "4e-5": {"1": 0.84}, "2e-5": {"1": 0.84}}
    # 0.84 twice: the first in the grid's order (4e-5) is kept, as select_fine_tuning.py keeps it.
    assert paper_selection.best_run(table, paper_selection.LEARNING_RATES, (1,)) == {
        "learning_rate": "4e-5", "seed": 1, "value": 0.84}
    rte = {"5e-5": {"1": 0.55, "2": 0.59}, "3e-5": {"1": 0.60, "2": 0.52}}
    summary = paper_selection.summarize("rte", {"adamw": rte, "transformers": {}})
    assert set(summary) == {"adamw"}
    assert summary["adamw"]["rates"]["5e-5"]["mean"] == pytest.approx(0.57)
    assert summary["adamw"]["rates"]["3e-5"]["sd"] == pytest.approx(np.std([0.6, 0.52], ddof=1))
    assert summary["adamw"]["chosen"] == {"learning_rate": "3e-5", "seed": 1, "value": 0.60}
    report = paper_selection.report_markdown({
        "tasks": {"rte": {"adamw": rte}}, "summary": {"rte": summary},
        "machine": {"cpu": "cpu", "cores": 2, "isa": ["avx2"]}})
    assert "| 5e-5 | 55.0 | 59.0 | 57.0 |" in report
    assert "learning rate 3e-5, seed 1, dev accuracy 60.0 (of 4 runs; 8 in the grid)" in report
