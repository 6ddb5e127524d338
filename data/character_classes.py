"""Per-code-point classes and the lower-casing map of the original tokenizer, as tables.

`data.tokenization` decides character by character in Python (controls removed, whitespace, CJK
ideographs, punctuation, lower-casing with accents stripped, Greek final sigma). The in-graph
tokenizer (`data.text_tokenizer`) reads the same decisions from tables built here, once, through
those very functions, so both follow the Unicode version of the Python that runs them.
"""
from __future__ import annotations

import functools

import numpy as np

from data import tokenization

# Bits of the per-code-point class table.
REMOVE, SPACE, CJK, PUNCT, CASED, CASE_IGNORABLE = 1, 2, 4, 8, 16, 32
# Code points beyond these ranges are unassigned or private use in Unicode 14: class 0.
_CLASSIFIED_RANGES = ((0, 0x40000), (0xE0000, 0xE1000))
CAPITAL_SIGMA, FINAL_SIGMA = 0x3A3, 0x3C2


def classify(char: str) -> int:
    """Class bits of one character, by the rules of `data.tokenization`."""
    if ord(char) in (0, 0xFFFD) or tokenization.is_control(char):
        return REMOVE
    bits = 0
    if char.isspace():  # str.split() separators: is_whitespace plus U+2028 and U+2029
        bits |= SPACE
    if tokenization.is_chinese_char(ord(char)):
        bits |= CJK
    if tokenization.is_punctuation(char):
        bits |= PUNCT
    # Python's own Cased / Case_Ignorable properties, read back through str.lower()'s
    # final-sigma rule: a cased letter ends the scan, an ignorable one is skipped.
    if ("A\u03a3" + char).lower()[1] == "\u03c3":
        bits |= CASED
    elif ("A" + char + "\u03a3").lower()[-1] == "\u03c2":
        bits |= CASE_IGNORABLE
    return bits


@functools.lru_cache(maxsize=None)
def character_tables() -> dict[str, np.ndarray]:
    """Run-length class table and the lower-case + NFD + drop-Mn mapping, from Python."""
    run_starts, run_classes = [], []
    map_keys, map_lengths, map_values = [], [], []
    for low, high in _CLASSIFIED_RANGES:
        for cp in range(low, high):
            char = chr(cp)
            bits = classify(char)
            if not run_classes or run_classes[-1] != bits:
                run_starts.append(cp)
                run_classes.append(bits)
            mapped = tokenization.strip_accents(char.lower())
            if mapped != char:
                map_keys.append(cp)
                map_lengths.append(len(mapped))
                map_values.extend(ord(c) for c in mapped)
        run_starts.append(high)  # the unclassified gap after the range
        run_classes.append(0)
    return {
        "run_starts": np.array(run_starts, np.int32),
        "run_classes": np.array(run_classes, np.int32),
        "map_keys": np.array(map_keys, np.int32),
        "map_lengths": np.array(map_lengths, np.int32),
        "map_starts": np.cumsum([0] + map_lengths[:-1]).astype(np.int32),
        "map_values": np.array(map_values, np.int32),
    }
