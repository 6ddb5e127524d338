"""A small generated English-like corpus, so that the demo and tests need no downloaded data.

Documents are about one topic each (an animal and its place), so neighbouring sentences share
words: masked words are partly predictable from context and next-sentence prediction is learnable.
The same generator makes labelled task files in the GLUE, SQuAD, SWAG and CoNLL formats.
"""
from __future__ import annotations

import random

ANIMALS = ["cat", "dog", "horse", "fox", "owl", "bear", "wolf", "duck", "frog", "goat", "lion",
           "mouse", "rabbit", "sheep", "tiger", "whale"]
PLACES = ["forest", "river", "garden", "village", "mountain", "farm", "city", "island", "desert",
          "valley", "lake", "meadow"]
PEOPLE = ["anna", "boris", "clara", "david", "elena", "felix", "greta", "henry"]
GOOD = ["happy", "bright", "kind", "warm", "gentle", "clever", "calm", "brave"]
BAD = ["sad", "dark", "cruel", "cold", "angry", "dull", "nervous", "lazy"]
ACTIONS = ["runs", "sleeps", "sings", "waits", "plays", "walks", "hides", "eats"]
TIMES = ["morning", "evening", "night", "winter", "summer", "spring"]


def _sentence(rng: random.Random, animal: str, place: str, person: str) -> str:
    templates = [
        "the {adj} {animal} {action} near the {place} every {time} .",
        "{person} saw the {animal} in the {place} one {time} .",
        "in the {place} , the {animal} {action} with {person} .",
        "the {animal} of the {place} is {adj} and {adj2} .",
        "{person} says that the {animal} {action} in the {time} .",
        "every {time} the {place} is {adj} , and the {animal} {action} .",
    ]
    words = dict(adj=rng.choice(GOOD + BAD), adj2=rng.choice(GOOD + BAD), animal=animal,
                 action=rng.choice(ACTIONS), place=place, time=rng.choice(TIMES), person=person)
    text = rng.choice(templates).format(**words)
    return text[0].upper() + text[1:]


def pretraining_corpus(num_documents: int, seed: int = 0, sentences: tuple[int, int] = (6, 14)
                       ) -> str:
    """One sentence a line, a blank line between documents (create_pretraining_data's input)."""
    rng = random.Random(seed)
    documents = []
    for _ in range(num_documents):
        animal, place, person = rng.choice(ANIMALS), rng.choice(PLACES), rng.choice(PEOPLE)
        count = rng.randint(*sentences)
        documents.append("\n".join(_sentence(rng, animal, place, person) for _ in range(count)))
    return "\n\n".join(documents) + "\n"


def sentiment_rows(num_rows: int, seed: int = 0) -> list[tuple[str, int]]:
    """(sentence, label) pairs: label 1 when the sentence's adjectives are all from GOOD."""
    rng = random.Random(seed)
    rows = []
    for _ in range(num_rows):
        label = rng.randint(0, 1)
        words = GOOD if label else BAD
        text = (f"the {rng.choice(words)} {rng.choice(ANIMALS)} {rng.choice(ACTIONS)} in the "
                f"{rng.choice(PLACES)} and feels {rng.choice(words)} .")
        rows.append((text, label))
    return rows


def sst2_tsv(num_rows: int, seed: int = 0) -> str:
    """The GLUE SST-2 layout: header `sentence<TAB>label`, then one row per example."""
    return "sentence\tlabel\n" + "".join(f"{t}\t{l}\n" for t, l in sentiment_rows(num_rows, seed))
