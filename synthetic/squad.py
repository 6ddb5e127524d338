"""Small generated question-answering sets in the official SQuAD v1.1 / v2.0 JSON format.

Each paragraph is a short story about one animal, in the words of `synthetic.corpus`: what it
does and when, where it lives, who saw it, and sentences that describe it. The questions ask where
it lives, who saw it and which animal does what it does; each answer is one word of the paragraph,
and the question's words point at it, so that a tiny model learns the task in a few hundred steps.
With `version_2_with_negative`, some paragraphs leave out where the animal lives or who saw it, and
the question about what was left out is unanswerable (`is_impossible`).
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
from typing import Any

from synthetic.corpus import ACTIONS, ANIMALS, BAD, GOOD, PEOPLE, PLACES, TIMES
from utils.output_files import write_text_atomically


@dataclasses.dataclass(frozen=True)
class _Story:
    """The facts of one paragraph; `place` or `person` is None when the paragraph omits it."""

    animal: str
    action: str
    time: str
    place: str | None
    person: str | None


def _paragraph(rng: random.Random, story: _Story) -> tuple[str, dict[str, int]]:
    """The context text, and the character offset of each answer in it."""
    # Sentences as words; the second item names the answer each word is, if any.
    sentences = [[("the", ""), (story.animal, "animal"), (story.action, ""), ("every", ""),
                  (story.time, ""), (".", "")]]
    if story.place:
        sentences.append([("the", ""), (story.animal, ""), ("lives", ""), ("near", ""),
                          ("the", ""), (story.place, "place"), (".", "")])
    if story.person:
        sentences.append([(story.person, "person"), ("saw", ""), ("the", ""),
                          (story.animal, ""), ("one", ""), ("day", ""), (".", "")])
    for _ in range(rng.randint(1, 3)):
        first, second = rng.sample(GOOD if rng.random() < 0.5 else BAD, 2)
        sentences.append([(word, "") for word in (
            "the", story.animal, "is", first, "and", second, ".")])
    rng.shuffle(sentences)
    words, offsets, length = [], {}, 0
    for sentence in sentences:
        for position, (word, kind) in enumerate(sentence):
            word = word.capitalize() if position == 0 else word
            if kind:
                offsets[kind] = length
            words.append(word)
            length += len(word) + 1
    return " ".join(words), offsets


def _questions(story: _Story) -> list[tuple[str, str, str | None]]:
    """(kind, question, answer or None when unanswerable) for every question about a story."""
    return [
        ("place", f"where does the {story.animal} live ?", story.place),
        ("person", f"who saw the {story.animal} ?", story.person),
        ("animal", f"which animal {story.action} every {story.time} ?", story.animal),
    ]


def squad_dataset(num_paragraphs: int, seed: int = 0, version_2_with_negative: bool = False,
                  name: str = "synthetic") -> dict[str, Any]:
    """A SQuAD-format dataset: {"version", "data": [articles]} with one paragraph per article.

    Args:
        num_paragraphs: paragraphs to generate; each gets three questions, of which one may be
            unanswerable (v2.0) or left out (v1.1).
        seed: the generator's seed (same seed, same file).
        version_2_with_negative: write v2.0 (`is_impossible` on every question).
        name: prefix of the question ids and titles.
    """
    rng = random.Random(seed)
    articles = []
    for index in range(num_paragraphs):
        story = _Story(animal=rng.choice(ANIMALS), action=rng.choice(ACTIONS),
                       time=rng.choice(TIMES), place=rng.choice(PLACES),
                       person=rng.choice(PEOPLE).capitalize())
        if version_2_with_negative and rng.random() < 0.5:
            story = dataclasses.replace(story, **{rng.choice(["place", "person"]): None})
        context, offsets = _paragraph(rng, story)
        qas = []
        for kind, question, answer in _questions(story):
            if answer is None and not version_2_with_negative:
                continue
            qa = {"id": f"{name}-{index:05d}-{kind}", "question": question, "answers": []}
            if answer is not None:
                qa["answers"].append({"text": answer, "answer_start": offsets[kind]})
            if version_2_with_negative:
                qa["is_impossible"] = answer is None
            qas.append(qa)
        articles.append({"title": f"{name} {index}: the {story.animal}",
                         "paragraphs": [{"context": context, "qas": qas}]})
    return {"version": "v2.0" if version_2_with_negative else "1.1", "data": articles}


def write_squad_files(output_dir: str | os.PathLike, num_train_paragraphs: int = 400,
                      num_dev_paragraphs: int = 50, seed: int = 0,
                      version_2_with_negative: bool = False) -> tuple[str, str]:
    """Writes `train-v*.json` and `dev-v*.json` to `output_dir`; returns their paths.

    The two sets come from different seeds, so dev paragraphs are new combinations.
    """
    version = "v2.0" if version_2_with_negative else "v1.1"
    os.makedirs(output_dir, exist_ok=True)
    paths = []
    for split, count, split_seed in (("train", num_train_paragraphs, 2 * seed),
                                     ("dev", num_dev_paragraphs, 2 * seed + 1)):
        dataset = squad_dataset(count, split_seed, version_2_with_negative, name=split)
        path = os.path.join(os.fspath(output_dir), f"{split}-{version}.json")
        write_text_atomically(path, json.dumps(dataset))
        paths.append(path)
    return paths[0], paths[1]
