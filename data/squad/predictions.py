"""Start/end logits -> answer texts, exactly as the original `write_predictions`.

For each example, the `n_best_size` highest start and end logits of every window are paired
into candidate spans; a span is kept if it lies in the context, starts at a token scored in
this window (`token_is_max_context`), does not end before it starts and is at most
`max_answer_length` tokens long. Candidates are ranked by start + end logit, mapped back onto
the original context text (`get_final_text`), de-duplicated, and given softmax probabilities.
For SQuAD v2.0 the null answer ([CLS], [CLS]) of the window where it scores lowest competes
too, and "" is predicted when its score exceeds the best non-null score by more than
`null_score_diff_threshold`.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
from typing import Any, Iterable, Sequence

import numpy as np

from data.squad.examples import SquadExample
from data.squad.features import SquadFeatures
from data.tokenization import BasicTokenizer
from utils.output_files import write_text_atomically, written_together

# The null score to beat before any window is seen ("large and positive" in the original).
_NO_NULL_SCORE = 1000000


@dataclasses.dataclass(frozen=True)
class RawResult:
    """The model's output for one feature: `start_logits`, `end_logits` [max_seq_length]."""

    unique_id: int
    start_logits: Sequence[float]
    end_logits: Sequence[float]


@dataclasses.dataclass
class SquadPredictions:
    """Everything the original writes, keyed by question id in example order.

    `nbest` entries are dicts with keys text, probability, start_logit, end_logit.
    `null_odds` (v2.0 only, else empty) is score_null - best_non_null_score.
    """

    predictions: dict[str, str]
    nbest: dict[str, list[dict[str, Any]]]
    null_odds: dict[str, float]


@dataclasses.dataclass(frozen=True)
class _Candidate:
    feature_index: int
    start_index: int
    end_index: int
    start_logit: float
    end_logit: float


@dataclasses.dataclass(frozen=True)
class _NbestEntry:
    text: str
    start_logit: float
    end_logit: float


def compute_predictions(examples: Sequence[SquadExample], features: Iterable[SquadFeatures],
                        results: Iterable[RawResult], n_best_size: int,
                        max_answer_length: int, do_lower_case: bool,
                        version_2_with_negative: bool = False,
                        null_score_diff_threshold: float = 0.0) -> SquadPredictions:
    """Chooses the answer of every example from the logits of its windows.

    Raises:
      ValueError: a feature has no result.
    """
    features_by_example = collections.defaultdict(list)
    for feature in features:
        features_by_example[feature.example_index].append(feature)
    logits_by_id = {result.unique_id: result for result in results}
    output = SquadPredictions(predictions={}, nbest={}, null_odds={})
    for example_index, example in enumerate(examples):
        example_features = features_by_example[example_index]
        logits = [_feature_logits(logits_by_id, feature, example)
                  for feature in example_features]
        candidates, null, null_score = _candidates(
            example_features, logits, n_best_size, max_answer_length, version_2_with_negative)
        nbest = _nbest(example, example_features, candidates, null, n_best_size,
                       do_lower_case, version_2_with_negative)
        probabilities = compute_softmax([e.start_logit + e.end_logit for e in nbest])
        output.nbest[example.qas_id] = [
            {"text": entry.text, "probability": probability,
             "start_logit": entry.start_logit, "end_logit": entry.end_logit}
            for entry, probability in zip(nbest, probabilities)]
        if not version_2_with_negative:
            output.predictions[example.qas_id] = nbest[0].text
            continue
        best_non_null = next(entry for entry in nbest if entry.text)
        score_diff = null_score - best_non_null.start_logit - best_non_null.end_logit
        output.null_odds[example.qas_id] = score_diff
        output.predictions[example.qas_id] = (
            "" if score_diff > null_score_diff_threshold else best_non_null.text)
    return output


def _feature_logits(logits_by_id: dict[int, RawResult], feature: SquadFeatures,
                    example: SquadExample) -> tuple[list[float], list[float]]:
    """The feature's logits as Python floats (float32 values widen exactly)."""
    result = logits_by_id.get(feature.unique_id)
    if result is None:
        raise ValueError(f"question id {example.qas_id!r}: no result for feature "
                         f"{feature.unique_id}")
    return (np.asarray(result.start_logits, dtype=np.float64).tolist(),
            np.asarray(result.end_logits, dtype=np.float64).tolist())


def get_best_indexes(logits: Sequence[float], n_best_size: int) -> list[int]:
    """Positions of the `n_best_size` largest logits, largest first, earlier first on ties."""
    # A stable ascending sort of the negated values keeps equal logits in position order.
    order = np.argsort(-np.asarray(logits, dtype=np.float64), kind="stable")
    return order[:n_best_size].tolist()


def _candidates(features: Sequence[SquadFeatures],
                logits: Sequence[tuple[list[float], list[float]]], n_best_size: int,
                max_answer_length: int,
                version_2_with_negative: bool) -> tuple[list[_Candidate], _Candidate, float]:
    """Valid spans sorted by score, and the lowest-scoring null span and its score.

    For v2.0 the null span is among the sorted candidates too.
    """
    candidates = []
    null = _Candidate(0, 0, 0, 0.0, 0.0)
    null_score = _NO_NULL_SCORE
    for feature_index, (feature, (start_logits, end_logits)) in enumerate(
            zip(features, logits)):
        if version_2_with_negative and start_logits[0] + end_logits[0] < null_score:
            null_score = start_logits[0] + end_logits[0]
            null = _Candidate(feature_index, 0, 0, start_logits[0], end_logits[0])
        end_indexes = get_best_indexes(end_logits, n_best_size)
        for start_index in get_best_indexes(start_logits, n_best_size):
            for end_index in end_indexes:
                if _is_valid_span(feature, start_index, end_index, max_answer_length):
                    candidates.append(_Candidate(feature_index, start_index, end_index,
                                                 start_logits[start_index],
                                                 end_logits[end_index]))
    if version_2_with_negative:
        candidates.append(null)
    candidates.sort(key=lambda c: c.start_logit + c.end_logit, reverse=True)
    return candidates, null, null_score


def _is_valid_span(feature: SquadFeatures, start_index: int, end_index: int,
                   max_answer_length: int) -> bool:
    """A span inside the context, starting where this window has max context, not too long."""
    if start_index >= len(feature.tokens) or end_index >= len(feature.tokens):
        return False
    if start_index not in feature.token_to_orig_map or end_index not in feature.token_to_orig_map:
        return False
    if not feature.token_is_max_context.get(start_index, False):
        return False
    return start_index <= end_index and end_index - start_index + 1 <= max_answer_length


def _nbest(example: SquadExample, features: Sequence[SquadFeatures],
           candidates: Sequence[_Candidate], null: _Candidate, n_best_size: int,
           do_lower_case: bool, version_2_with_negative: bool) -> list[_NbestEntry]:
    """The best distinct answer texts; never empty, and for v2.0 with "" among them."""
    seen_texts = set()
    nbest = []
    for candidate in candidates:
        if len(nbest) >= n_best_size:
            break
        if candidate.start_index > 0:  # a non-null span
            text = _candidate_text(example, features[candidate.feature_index], candidate,
                                   do_lower_case)
            if text in seen_texts:
                continue
        else:
            text = ""
        seen_texts.add(text)
        nbest.append(_NbestEntry(text, candidate.start_logit, candidate.end_logit))
    if version_2_with_negative and "" not in seen_texts:
        nbest.append(_NbestEntry("", null.start_logit, null.end_logit))
    # With no valid span at all, a placeholder keeps the output well-formed. (The original
    # does this for v1.1 and fails with an AttributeError for v2.0.)
    if all(not entry.text for entry in nbest):
        nbest.insert(0, _NbestEntry("empty", 0.0, 0.0))
    return nbest


def _candidate_text(example: SquadExample, feature: SquadFeatures, candidate: _Candidate,
                    do_lower_case: bool) -> str:
    """The span's text in the original context, case and accents restored."""
    tok_tokens = feature.tokens[candidate.start_index:candidate.end_index + 1]
    orig_doc_start = feature.token_to_orig_map[candidate.start_index]
    orig_doc_end = feature.token_to_orig_map[candidate.end_index]
    orig_text = " ".join(example.doc_tokens[orig_doc_start:orig_doc_end + 1])
    # Glue WordPieces back into words, then normalise whitespace.
    tok_text = " ".join(tok_tokens).replace(" ##", "").replace("##", "")
    tok_text = " ".join(tok_text.strip().split())
    return get_final_text(tok_text, orig_text, do_lower_case)


def get_final_text(pred_text: str, orig_text: str, do_lower_case: bool) -> str:
    """Projects a normalised prediction back onto the original text.

    `pred_text` comes from WordPiece tokens (lower-cased, accents stripped, punctuation split
    off); `orig_text` is the whitespace words it came from. E.g. pred "steve smith" in orig
    "Steve Smith's" gives "Steve Smith". Both are aligned character by character once spaces
    are removed; where that alignment fails, the whole `orig_text` is returned.
    """
    tok_text = " ".join(BasicTokenizer(do_lower_case=do_lower_case).tokenize(orig_text))
    start_position = tok_text.find(pred_text)
    if start_position == -1:
        return orig_text
    end_position = start_position + len(pred_text) - 1
    orig_ns_text, orig_ns_to_s_map = _strip_spaces(orig_text)
    tok_ns_text, tok_ns_to_s_map = _strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        return orig_text
    tok_s_to_ns_map = {tok_index: ns_index for ns_index, tok_index in tok_ns_to_s_map.items()}
    orig_start_position = _project(start_position, tok_s_to_ns_map, orig_ns_to_s_map)
    orig_end_position = _project(end_position, tok_s_to_ns_map, orig_ns_to_s_map)
    if orig_start_position is None or orig_end_position is None:
        return orig_text
    return orig_text[orig_start_position:orig_end_position + 1]


def _strip_spaces(text: str) -> tuple[str, dict[int, int]]:
    """`text` without " ", and each remaining character's index in `text`."""
    kept = [index for index, char in enumerate(text) if char != " "]
    return text.replace(" ", ""), dict(enumerate(kept))


def _project(position: int, tok_s_to_ns_map: dict[int, int],
             orig_ns_to_s_map: dict[int, int]) -> int | None:
    ns_position = tok_s_to_ns_map.get(position)
    if ns_position is None:
        return None
    return orig_ns_to_s_map.get(ns_position)


def compute_softmax(scores: Sequence[float]) -> list[float]:
    """Softmax of Python floats, summed left to right as the original."""
    if not scores:
        return []
    max_score = max(scores)
    exp_scores = [math.exp(score - max_score) for score in scores]
    total_sum = 0.0
    for value in exp_scores:
        total_sum += value
    return [value / total_sum for value in exp_scores]


def write_predictions(predictions: SquadPredictions, output_prediction_file: str | os.PathLike,
                      output_nbest_file: str | os.PathLike,
                      output_null_log_odds_file: str | os.PathLike | None = None) -> None:
    """Writes predictions.json, nbest_predictions.json and (if given) null_odds.json.

    The format is the original's: `json.dumps(..., indent=4)` plus a newline. Each file is
    written atomically, and they take their final names together.
    """
    outputs = [(output_prediction_file, predictions.predictions),
               (output_nbest_file, predictions.nbest)]
    if output_null_log_odds_file is not None:
        outputs.append((output_null_log_odds_file, predictions.null_odds))
    with written_together():
        for path, value in outputs:
            write_text_atomically(path, json.dumps(value, indent=4) + "\n")
