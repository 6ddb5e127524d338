"""The official SQuAD v1.1 and v2.0 evaluations, in-process, to the last digit.

Answers are compared after normalisation (lower-case, punctuation removed, the articles
a/an/the removed, whitespace collapsed): exact match, and F1 over the bag of normalised
tokens, each the maximum over a question's gold answers, averaged as percentages.
v2.0 treats a question without gold answers as expecting "", reports the HasAns/NoAns
breakdown, optionally applies a no-answer probability threshold, and with no-answer scores
finds the threshold that would maximise each metric. Sums run in the same order as in the
official scripts, so the floating-point results are identical.
"""
from __future__ import annotations

import collections
import json
import os
import re
import string
from typing import Any, Iterator

from absl import logging

from utils.output_files import write_text_atomically

VERSION_1 = "1.1"
VERSION_2 = "2.0"

_ARTICLES_RE = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-cases and removes punctuation, articles and extra whitespace."""
    text = "".join(char for char in text.lower() if char not in _PUNCTUATION)
    return " ".join(_ARTICLES_RE.sub(" ", text).split())


def _token_f1(prediction_tokens: list[str], ground_truth_tokens: list[str]) -> float:
    common = collections.Counter(prediction_tokens) & collections.Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def exact_match_score(prediction: str, ground_truth: str) -> bool:
    """v1.1 exact match of one prediction against one gold answer."""
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def f1_score(prediction: str, ground_truth: str) -> float:
    """v1.1 token F1 (0 when either side is empty after normalisation)."""
    return _token_f1(normalize_answer(prediction).split(),
                     normalize_answer(ground_truth).split())


def compute_exact(gold_answer: str, prediction: str) -> int:
    """v2.0 exact match as 0 or 1."""
    return int(normalize_answer(gold_answer) == normalize_answer(prediction))


def compute_f1(gold_answer: str, prediction: str) -> float:
    """v2.0 token F1: where either side is empty, 1 if both are, else 0."""
    gold_tokens = normalize_answer(gold_answer).split()
    prediction_tokens = normalize_answer(prediction).split()
    if not gold_tokens or not prediction_tokens:
        return int(gold_tokens == prediction_tokens)
    return _token_f1(prediction_tokens, gold_tokens)


def iter_questions(dataset: list[Any]) -> Iterator[tuple[str, list[str]]]:
    """Yields (question id, gold answer texts) of the "data" list of a SQuAD file.

    Raises:
      ValueError: a missing "paragraphs" or "qas" list, a question without a string "id",
        or without an "answers" list of {"text": ...} objects.
    """
    for article_index, article in enumerate(dataset):
        for paragraph in _list_at(article, "paragraphs", f"article {article_index}"):
            for qa in _list_at(paragraph, "qas", f"a paragraph of article {article_index}"):
                qid = qa.get("id") if isinstance(qa, dict) else None
                if not isinstance(qid, str):
                    raise ValueError(f'a question in article {article_index} has no string '
                                     f'"id": {str(qa)[:200]}')
                answers = _list_at(qa, "answers", f"question id {qid!r}")
                if not all(isinstance(a, dict) and isinstance(a.get("text"), str)
                           for a in answers):
                    raise ValueError(f'question id {qid!r}: "answers" should be a list of '
                                     '{"text": ...} objects')
                yield qid, [answer["text"] for answer in answers]


def _list_at(record: Any, key: str, where: str) -> list[Any]:
    value = record.get(key) if isinstance(record, dict) else None
    if not isinstance(value, list):
        raise ValueError(f'{where}: missing the "{key}" list')
    return value


def evaluate_v1(dataset: list[Any], predictions: dict[str, str]) -> dict[str, float]:
    """The official v1.1 evaluation: {"exact_match": %, "f1": %}.

    A question without a prediction scores 0 (and is logged).

    Raises:
      ValueError: no questions, or a question without gold answers.
    """
    f1 = exact_match = total = 0
    for qid, ground_truths in iter_questions(dataset):
        total += 1
        if qid not in predictions:
            logging.warning("Unanswered question %s will receive score 0.", qid)
            continue
        if not ground_truths:
            raise ValueError(f"question id {qid!r} has no gold answers (a SQuAD v1.1 file "
                             "must give at least one)")
        prediction = predictions[qid]
        exact_match += max(exact_match_score(prediction, gt) for gt in ground_truths)
        f1 += max(f1_score(prediction, gt) for gt in ground_truths)
    if total == 0:
        raise ValueError("the dataset has no questions")
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


def evaluate_v2(dataset: list[Any], predictions: dict[str, str],
                na_probs: dict[str, float] | None = None,
                na_prob_thresh: float = 1.0) -> dict[str, Any]:
    """The official v2.0 evaluation, its keys in the official order.

    Args:
      dataset: the "data" list of a SQuAD v2.0 file.
      predictions: question id -> answer text ("" for no answer).
      na_probs: question id -> no-answer score (e.g. null_odds.json). Adds best_exact,
        best_exact_thresh, best_f1, best_f1_thresh.
      na_prob_thresh: a question whose no-answer score exceeds this counts as answered "".

    Raises:
      ValueError: no questions, a question without a prediction, or without a no-answer score.
    """
    qid_to_has_ans = {qid: bool(answers) for qid, answers in iter_questions(dataset)}
    if not qid_to_has_ans:
        raise ValueError("the dataset has no questions")
    _check_complete(qid_to_has_ans, predictions, "prediction")
    exact_raw, f1_raw = _raw_scores_v2(dataset, predictions)
    thresholds = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}
    _check_complete(exact_raw, thresholds, "no-answer score")
    exact_thresh = _apply_no_answer_threshold(exact_raw, thresholds, qid_to_has_ans,
                                              na_prob_thresh)
    f1_thresh = _apply_no_answer_threshold(f1_raw, thresholds, qid_to_has_ans, na_prob_thresh)
    out_eval = _eval_dict(exact_thresh, f1_thresh, list(exact_thresh))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid, has_ans in qid_to_has_ans.items() if has_ans == wanted]
        if qids:
            for key, value in _eval_dict(exact_thresh, f1_thresh, qids).items():
                out_eval[f"{prefix}_{key}"] = value
    if na_probs is not None:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            best, thresh = _find_best_thresh(predictions, raw, na_probs, qid_to_has_ans)
            out_eval[f"best_{name}"] = best
            out_eval[f"best_{name}_thresh"] = thresh
    return out_eval


def _check_complete(qids: dict[str, Any], values: dict[str, Any], what: str) -> None:
    """Raises ValueError naming the questions of `qids` that `values` lacks."""
    missing = [qid for qid in qids if qid not in values]
    if missing:
        raise ValueError(f"{len(missing)} questions have no {what}, e.g. "
                         f"{', '.join(missing[:5])}")


def _raw_scores_v2(dataset: list[Any], predictions: dict[str, str]
                   ) -> tuple[dict[str, int], dict[str, float]]:
    exact_scores = {}
    f1_scores = {}
    for qid, answers in iter_questions(dataset):
        gold_answers = [text for text in answers if normalize_answer(text)] or [""]
        prediction = predictions[qid]
        exact_scores[qid] = max(compute_exact(gold, prediction) for gold in gold_answers)
        f1_scores[qid] = max(compute_f1(gold, prediction) for gold in gold_answers)
    return exact_scores, f1_scores


def _apply_no_answer_threshold(scores: dict[str, float], na_probs: dict[str, float],
                               qid_to_has_ans: dict[str, bool],
                               na_prob_thresh: float) -> dict[str, float]:
    return {qid: float(not qid_to_has_ans[qid]) if na_probs[qid] > na_prob_thresh else score
            for qid, score in scores.items()}


def _eval_dict(exact_scores: dict[str, float], f1_scores: dict[str, float],
               qids: list[str]) -> dict[str, Any]:
    total = len(qids)
    return {"exact": 100.0 * sum(exact_scores[qid] for qid in qids) / total,
            "f1": 100.0 * sum(f1_scores[qid] for qid in qids) / total,
            "total": total}


def _find_best_thresh(predictions: dict[str, str], scores: dict[str, float],
                      na_probs: dict[str, float],
                      qid_to_has_ans: dict[str, bool]) -> tuple[float, float]:
    """Best score over thresholds: answer "" for every question scored above the threshold.

    Starting from all-"" (every NoAns question right), questions are answered in increasing
    order of their no-answer score.
    """
    cur_score = sum(1 for qid in qid_to_has_ans if not qid_to_has_ans[qid])
    best_score = cur_score
    best_thresh = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if predictions[qid] else 0
        cur_score += diff
        if cur_score > best_score:
            best_score = cur_score
            best_thresh = na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def detect_version(dataset_json: dict[str, Any]) -> str:
    """VERSION_2 if the file says version 2.x or any question has "is_impossible"."""
    if str(dataset_json.get("version", "")).lstrip("v").startswith("2"):
        return VERSION_2
    for article in dataset_json.get("data", []):
        for paragraph in article.get("paragraphs", []) if isinstance(article, dict) else []:
            for qa in paragraph.get("qas", []) if isinstance(paragraph, dict) else []:
                if isinstance(qa, dict) and "is_impossible" in qa:
                    return VERSION_2
    return VERSION_1


def evaluate(dataset_json: dict[str, Any], predictions: dict[str, str],
             version: str | None = None, na_probs: dict[str, float] | None = None,
             na_prob_thresh: float = 1.0) -> dict[str, Any]:
    """Runs the official evaluation of `version` (detected from the file when None).

    Raises:
      ValueError: see `evaluate_v1` / `evaluate_v2`; no-answer scores given for v1.1.
    """
    version = version or detect_version(dataset_json)
    if version == VERSION_1:
        if na_probs is not None:
            raise ValueError("no-answer scores apply to SQuAD v2.0 only")
        return evaluate_v1(dataset_json["data"], predictions)
    if version == VERSION_2:
        return evaluate_v2(dataset_json["data"], predictions, na_probs, na_prob_thresh)
    raise ValueError(f"unknown SQuAD version {version!r}; expected {VERSION_1} or {VERSION_2}")


def format_eval_results(results: dict[str, Any]) -> str:
    """The text the official script prints: one line for v1.1, indented JSON for v2.0."""
    return json.dumps(results, indent=None if "exact_match" in results else 2)


def write_eval_results(path: str | os.PathLike, results: dict[str, Any]) -> None:
    """Writes `format_eval_results(results)` and a newline to `path` atomically."""
    write_text_atomically(path, format_eval_results(results) + "\n")
