"""Small generated SWAG and CoNLL-2003 files, so that the demo and tests need no downloaded data.

SWAG: each question's context is about one animal in one place; the right ending goes "back to"
the same place and animal, the three wrong ones "away from" other animals or places. The words
"back to" are a shallow cue, like the annotation artefacts of the real SWAG, that even a small
model from random values learns in a few dozen steps; the coherence of animal and place is the cue
that next-sentence pretraining on `synthetic.corpus` teaches.

CoNLL: documents of sentences that mention people (PER), cities (LOC), organisations (ORG) and
nationalities (MISC), entities of one or two words, tagged in IOB2, with four columns and
`-DOCSTART-` lines as the CoNLL-2003 files.
"""
from __future__ import annotations

import csv
import io
import os
import random

from synthetic.corpus import ACTIONS, ANIMALS, PEOPLE, PLACES, TIMES
from utils.output_files import write_text_atomically

SWAG_HEADER = ("", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
               "ending0", "ending1", "ending2", "ending3", "label")
_NUM_ENDINGS = 4

SURNAMES = ["Berg", "Costa", "Dubois", "Meyer", "Novak", "Rossi"]
CITIES = ["Paris", "Lima", "Oslo", "Cairo", "New York", "Buenos Aires", "Hong Kong"]
ORGANISATIONS = ["Reuters", "Acme Corporation", "United Farmers", "Red Cross", "Nordbank"]
NATIONALITIES = ["German", "French", "Italian", "Spanish", "Dutch"]
# Sentence templates; `{PER}`, `{LOC}`, `{ORG}` and `{MISC}` are entity slots.
_NER_TEMPLATES = [
    "{PER} travelled to {LOC} with the {animal} .",
    "{ORG} opened a farm near {LOC} in the {time} .",
    "The {MISC} {animal} of {PER} {action} in the {place} .",
    "{PER} works for {ORG} in {LOC} .",
    "On the {place} , {PER} met a {MISC} {animal} .",
    "The {animal} {action} every {time} .",
]
_FUNCTION_TAGS = {"the": ("DT", "I-NP"), "a": ("DT", "I-NP"), "of": ("IN", "I-PP"),
                  "to": ("TO", "I-PP"), "with": ("IN", "I-PP"), "near": ("IN", "I-PP"),
                  "in": ("IN", "I-PP"), "for": ("IN", "I-PP"), "on": ("IN", "I-PP"),
                  "every": ("DT", "I-NP"), ".": (".", "O"), ",": (",", "O")}
_VERBS = set(ACTIONS) | {"travelled", "opened", "works", "met"}


def _swag_row(rng: random.Random, index: int) -> list[str]:
    animal, place, person = rng.choice(ANIMALS), rng.choice(PLACES), rng.choice(PEOPLE)
    context = f"{person.capitalize()} saw the {animal} near the {place} one {rng.choice(TIMES)}."
    start = f"The {animal}"
    wrong = []
    while len(wrong) < _NUM_ENDINGS - 1:
        # A wrong ending changes the place, or the animal, or both.
        other_animal, other_place = rng.choice(ANIMALS), rng.choice(PLACES)
        if (other_animal, other_place) != (animal, place) and \
                (other_animal, other_place) not in wrong:
            wrong.append((other_animal, other_place))
    label = rng.randrange(_NUM_ENDINGS)
    pairs = wrong[:label] + [(animal, place)] + wrong[label:]
    endings = [f"{rng.choice(ACTIONS)} {'back to' if (a, p) == (animal, place) else 'away from'} "
               f"the {p} where the {a} was." for a, p in pairs]
    return [str(index), f"synthetic-{index // 10}", str(index), f"{context} {start}", context,
            start, "gold", *endings, str(label)]


def swag_csv(num_rows: int, seed: int = 0, labelled: bool = True) -> str:
    """A SWAG distribution CSV (`train.csv`/`val.csv` layout; without `label`, `test.csv`'s)."""
    rng = random.Random(seed)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    header = list(SWAG_HEADER) if labelled else list(SWAG_HEADER[:-1])
    writer.writerow(header)
    for index in range(num_rows):
        writer.writerow(_swag_row(rng, index)[:len(header)])
    return text.getvalue()


def _entity_words(rng: random.Random, slot: str) -> list[str]:
    if slot == "PER":
        first = rng.choice(PEOPLE).capitalize()
        return [first, rng.choice(SURNAMES)] if rng.random() < 0.5 else [first]
    names = {"LOC": CITIES, "ORG": ORGANISATIONS, "MISC": NATIONALITIES}[slot]
    return rng.choice(names).split()


def _word_columns(word: str, tag: str) -> str:
    if tag != "O":
        pos, chunk = "NNP", "I-NP"
    elif word.lower() in _FUNCTION_TAGS:
        pos, chunk = _FUNCTION_TAGS[word.lower()]
    elif word in _VERBS:
        pos, chunk = "VBD", "I-VP"
    else:
        pos, chunk = "NN", "I-NP"
    return f"{word} {pos} {chunk} {tag}"


def _ner_sentence(rng: random.Random) -> list[str]:
    fillers = dict(animal=rng.choice(ANIMALS), place=rng.choice(PLACES), time=rng.choice(TIMES),
                   action=rng.choice(ACTIONS))
    lines = []
    for piece in rng.choice(_NER_TEMPLATES).split():
        slot = piece.strip("{}")
        if slot in ("PER", "LOC", "ORG", "MISC"):
            words = _entity_words(rng, slot)
            tags = [f"B-{slot}"] + [f"I-{slot}"] * (len(words) - 1)
            lines += [_word_columns(w, t) for w, t in zip(words, tags)]
        else:
            lines.append(_word_columns(piece.format(**fillers), "O"))
    return lines


def conll_text(num_documents: int, seed: int = 0, sentences: tuple[int, int] = (2, 5)) -> str:
    """A CoNLL-2003 file: `-DOCSTART- -X- -X- O`, then sentences of `word POS chunk tag` lines."""
    rng = random.Random(seed)
    blocks = []
    for _ in range(num_documents):
        blocks.append("-DOCSTART- -X- -X- O\n")
        for _ in range(rng.randint(*sentences)):
            blocks.append("\n".join(_ner_sentence(rng)) + "\n")
    return "\n".join(blocks)


def write_swag_files(folder: str | os.PathLike, num_train: int = 400, num_eval: int = 100,
                     num_test: int = 100, seed: int = 0) -> str:
    """Writes `train.csv`, `val.csv` and an unlabelled `test.csv` into `folder`; returns it."""
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    for name, rows, offset, labelled in (("train.csv", num_train, 0, True),
                                         ("val.csv", num_eval, 1, True),
                                         ("test.csv", num_test, 2, False)):
        write_text_atomically(os.path.join(folder, name),
                              swag_csv(rows, seed=seed * 3 + offset, labelled=labelled))
    return folder


def write_conll_files(folder: str | os.PathLike, num_train: int = 150, num_eval: int = 30,
                      num_test: int = 30, seed: int = 0) -> str:
    """Writes `train.txt`, `valid.txt` and `test.txt` (that many documents) into `folder`."""
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    for name, documents, offset in (("train.txt", num_train, 0), ("valid.txt", num_eval, 1),
                                    ("test.txt", num_test, 2)):
        write_text_atomically(os.path.join(folder, name),
                              conll_text(documents, seed=seed * 3 + offset))
    return folder


def vocabulary() -> list[str]:
    """A WordPiece vocabulary covering every generated word, cased and lower-cased.

    Special tokens first, as in Google's vocab files, so that `[PAD]` is id 0.
    """
    words = set(ANIMALS + PLACES + PEOPLE + TIMES + ACTIONS + SURNAMES + NATIONALITIES)
    for names in (CITIES, ORGANISATIONS):
        words.update(word for name in names for word in name.split())
    for template in _NER_TEMPLATES:
        words.update(piece for piece in template.split() if "{" not in piece)
    words.update(["saw", "one", "back", "away", "from", "where", "was"])
    words |= {word.lower() for word in words} | {word.capitalize() for word in words}
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(words)
