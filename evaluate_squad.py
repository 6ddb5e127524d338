"""Scores SQuAD predictions: a drop-in for the official evaluate-v1.1.py and evaluate-v2.0.py.

    python evaluate_squad.py DATA_FILE PRED_FILE [--na-prob-file NULL_ODDS]
        [--na-prob-thresh T] [--out-file EVAL_JSON] [--version {1.1,2.0}]

The SQuAD version comes from the data file ("version" 2.x, or questions with
"is_impossible") unless --version says otherwise. Prints what the official script prints:
{"exact_match": ..., "f1": ...} for v1.1; for v2.0 the indented object exact, f1, total,
HasAns_*, NoAns_* and, with --na-prob-file, best_exact, best_exact_thresh, best_f1,
best_f1_thresh. --out-file also writes that text to a file.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable, Sequence

from data.squad import metrics as squad_metrics
from data.squad.examples import load_squad_json, read_json
from utils import stop_signals


def _parse_args(argv: Sequence[str] | None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    parser = argparse.ArgumentParser(
        prog="evaluate_squad.py",
        description="Official SQuAD v1.1 / v2.0 evaluation of a predictions file.")
    parser.add_argument("data_file", metavar="DATA_FILE", help="SQuAD JSON with gold answers.")
    parser.add_argument("pred_file", metavar="PRED_FILE",
                        help="JSON object: question id -> predicted answer text.")
    parser.add_argument("--na-prob-file", "-n", metavar="NULL_ODDS",
                        help="JSON object: question id -> no-answer score (v2.0 only).")
    parser.add_argument("--na-prob-thresh", "-t", type=float, default=1.0,
                        help='Predict "" where the no-answer score exceeds this '
                             "(default 1.0; v2.0 only).")
    parser.add_argument("--out-file", "-o", metavar="EVAL_JSON",
                        help="Also write the printed metrics to this file.")
    parser.add_argument("--version", choices=(squad_metrics.VERSION_1, squad_metrics.VERSION_2),
                        help="SQuAD version of DATA_FILE (default: detected from the file).")
    return parser, parser.parse_args(argv)


def _load_json_object(path: str, what: str, is_valid: Callable[[Any], bool],
                      expected: str) -> dict[str, Any]:
    """Reads a JSON object whose values all pass `is_valid`, naming the file on error."""
    value = read_json(path, what)
    if not isinstance(value, dict):
        raise ValueError(f"{path}: the {what} file should hold a JSON object keyed by "
                         "question id")
    for qid, item in value.items():
        if not is_valid(item):
            raise ValueError(f"{path}: question id {qid!r}: expected {expected}, got "
                             f"{json.dumps(item)[:100]}")
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def main(argv: Sequence[str] | None = None) -> int:
    """Loads the files, evaluates, prints the metrics; returns the exit status."""
    parser, args = _parse_args(argv)
    try:
        dataset_json = load_squad_json(args.data_file)
        predictions = _load_json_object(args.pred_file, "predictions",
                                        lambda item: isinstance(item, str), "an answer string")
        na_probs = None
        if args.na_prob_file:
            na_probs = _load_json_object(args.na_prob_file, "no-answer score", _is_number,
                                         "a number")
        try:
            results = squad_metrics.evaluate(dataset_json, predictions, args.version,
                                             na_probs, args.na_prob_thresh)
        except ValueError as error:
            raise ValueError(f"{args.data_file}: {error}") from error
    except ValueError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    if args.out_file:
        squad_metrics.write_eval_results(args.out_file, results)
    print(squad_metrics.format_eval_results(results))
    return 0


if __name__ == "__main__":
    stop_signals.raise_on_stop_signals()
    sys.exit(main())
