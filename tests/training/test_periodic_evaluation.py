"""Tests of training/periodic_evaluation.py: when dev is scored, the best kept, early stopping,
and the state a rerun after a kill continues from."""
import json
import os
import types

import pytest

from training.periodic_evaluation import (BEST_DIR, STATE_FILE, EvaluationPlan,
                                          PeriodicEvaluation)


def test_the_steps_scored():
    plan = EvaluationPlan(every_steps=40, every_epoch=True, metric="eval_f1")
    assert plan.steps(100, epoch_ends=[33, 66, 100]) == [33, 40, 66, 80, 100]
    assert EvaluationPlan(every_steps=50).steps(100, []) == [50, 100]
    assert EvaluationPlan(every_epoch=True).steps(90, [30, 60, 90]) == [30, 60, 90]
    assert EvaluationPlan(metric="eval_loss").lower_is_better
    assert not EvaluationPlan(metric="eval_accuracy").lower_is_better


@pytest.mark.parametrize("plan, message", [
    (EvaluationPlan(every_steps=0), "--eval_every_steps=0 must be at least 1"),
    (EvaluationPlan(every_steps=10, patience=0), "--early_stopping_patience=0 must be"),
    (EvaluationPlan(patience=2), "needs --eval_every_steps or --eval_every_epoch"),
])
def test_bad_plans(plan, message):
    with pytest.raises(ValueError, match=message):
        plan.check()


class _Run:
    """A task's evaluate and save over a scripted series of dev results."""

    def __init__(self, values):
        self.values = dict(values)
        self.evaluated, self.saved = [], []

    def evaluate(self, model, step, suffix):
        self.evaluated.append((step, suffix))
        return {"eval_f1": self.values[step], "global_step": step}

    def save(self, trained, folder):
        self.saved.append(trained.global_step)
        with open(os.path.join(folder, "model.txt"), "w") as f:
            f.write(str(trained.global_step))


def _trained(step):
    return types.SimpleNamespace(model=None, global_step=step)


def _evaluation(tmp_path, run, **plan):
    return PeriodicEvaluation(EvaluationPlan(metric="eval_f1", **plan), run.evaluate, run.save,
                              str(tmp_path), epoch_ends=[20, 40])


def test_the_best_is_kept_and_training_stops_after_the_patience(tmp_path):
    run = _Run({10: 0.5, 20: 0.7, 30: 0.6, 40: 0.7, 50: 0.9})
    evaluation = _evaluation(tmp_path, run, every_steps=10, every_epoch=True, patience=2)
    assert evaluation.stops(50) == [10, 20, 30, 40, 50]
    stopped = [evaluation(_trained(step), step) for step in (10, 20, 30, 40)]
    # 0.6 and an equal 0.7 are no improvement on 0.7: stopped after the second.
    assert stopped == [False, False, False, True]
    assert run.saved == [10, 20]
    assert (tmp_path / BEST_DIR / "model.txt").read_text() == "20"
    assert "eval_f1 = 0.7" in (tmp_path / BEST_DIR / "eval_results.txt").read_text()
    assert [suffix for _, suffix in run.evaluated] == ["_step_10", "_epoch_1", "_step_30",
                                                       "_epoch_2"]
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert (state["best_step"], state["stopped_at"], state["without_improvement"]) == (20, 40, 2)
    evals = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert [(e["step"], e["eval"]["eval_f1"]) for e in evals] == [
        (10, 0.5), (20, 0.7), (30, 0.6), (40, 0.7)]


def test_a_rerun_continues_with_the_same_best_and_count(tmp_path):
    first = _Run({10: 0.5, 20: 0.4, 30: 0.45, 40: 0.3})
    evaluation = _evaluation(tmp_path, first, every_steps=10, patience=3)
    for step in (10, 20):
        evaluation(_trained(step), step)
    # A new process (the run was killed after step 20): step 20 is not scored again, and the
    # count of scorings without improvement goes on from 1.
    second = _Run(first.values)
    resumed = _evaluation(tmp_path, second, every_steps=10, patience=3)
    assert [resumed(_trained(step), step) for step in (20, 30, 40)] == [False, False, True]
    assert second.evaluated == [(30, "_step_30"), (40, "_step_40")] and second.saved == []
    # A run that stopped early stays stopped when rerun: no step past the stop is trained to.
    again = _evaluation(tmp_path, _Run({}), every_steps=10, patience=3)
    assert again.stopped and again.stops(100) == [10, 20, 30, 40]


def test_a_loss_is_best_when_lowest(tmp_path):
    run = _Run({})
    evaluation = PeriodicEvaluation(
        EvaluationPlan(every_steps=1, metric="eval_loss"),
        lambda model, step, suffix: {"eval_loss": {1: 0.9, 2: 0.5, 3: 0.7}[step]}, run.save,
        str(tmp_path))
    for step in (1, 2, 3):
        evaluation(_trained(step), step)
    assert run.saved == [1, 2]


def test_a_metric_the_evaluation_does_not_give_is_named_with_those_it_does(tmp_path):
    run = _Run({1: 0.5})
    evaluation = PeriodicEvaluation(EvaluationPlan(every_steps=1, metric="eval_f2"),
                                    run.evaluate, run.save, str(tmp_path))
    with pytest.raises(ValueError, match="--metric_for_best=eval_f2 is not among the results of "
                                         "the evaluation: eval_f1, global_step"):
        evaluation(_trained(1), 1)
