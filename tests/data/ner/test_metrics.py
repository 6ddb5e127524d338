"""Tests of data/ner/metrics.py: hand-computed cases, a transcription of conlleval's counting
loop as an independent reference, and the real CoNLL-2003 dev set."""
import random

import pytest

from data.ner import conll, metrics as ner_metrics
from data.ner.metrics import Chunk


@pytest.mark.parametrize("tags, chunks", [
    (["B-PER", "I-PER", "O", "B-LOC"], [Chunk("PER", 0, 2), Chunk("LOC", 3, 4)]),
    # IOB1: an I- after O or at the sentence start opens an entity.
    (["I-ORG", "I-ORG", "O", "I-PER"], [Chunk("ORG", 0, 2), Chunk("PER", 3, 4)]),
    # IOB1: B- separates two adjacent entities of one type.
    (["I-LOC", "B-LOC", "I-LOC"], [Chunk("LOC", 0, 1), Chunk("LOC", 1, 3)]),
    # A type change ends one entity and opens another, whatever the prefix.
    (["B-PER", "I-LOC", "I-LOC", "I-MISC"],
     [Chunk("PER", 0, 1), Chunk("LOC", 1, 3), Chunk("MISC", 3, 4)]),
    (["B-PER", "B-PER", "O", "O"], [Chunk("PER", 0, 1), Chunk("PER", 1, 2)]),
    (["O", "O"], []),
    ([], []),
])
def test_extract_chunks(tags, chunks):
    assert ner_metrics.extract_chunks(tags) == chunks


def test_extract_chunks_rejects_unknown_tags():
    with pytest.raises(ValueError, match="S-PER"):
        ner_metrics.extract_chunks(["O", "S-PER"])


def _hand_case():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["I-ORG", "O"]]
    predicted = [["B-PER", "O", "O", "B-LOC"], ["B-ORG", "O"]]
    return gold, predicted


def test_hand_computed_scores():
    # Gold: PER[0,2) LOC[3,4) | ORG[0,1); predicted: PER[0,1) LOC[3,4) | ORG[0,1).
    # LOC and ORG match, PER ends too early. Tags equal: B-PER, O, B-LOC, O -> 4 of 6
    # (I-ORG and B-ORG are the same entity but different tags).
    evaluation = ner_metrics.evaluate_ner(*_hand_case())
    assert evaluation.overall == ner_metrics.ChunkScores(correct=2, found_gold=3,
                                                         found_predicted=3)
    assert evaluation.overall.precision == pytest.approx(200 / 3)
    assert evaluation.overall.recall == pytest.approx(200 / 3)
    assert evaluation.overall.f1 == pytest.approx(200 / 3)
    assert evaluation.accuracy == pytest.approx(400 / 6)
    assert list(evaluation.per_type) == ["LOC", "ORG", "PER"]
    assert evaluation.per_type["PER"] == ner_metrics.ChunkScores(0, 1, 1)
    assert evaluation.per_type["PER"].f1 == 0.0
    assert evaluation.per_type["LOC"].f1 == 100.0


def test_precision_and_recall_differ():
    # Gold: PER[0,2), ORG[3,4); predicted: PER[0,2), MISC[2,3), ORG[3,4) wrongly as LOC.
    gold = [["B-PER", "I-PER", "O", "B-ORG"]]
    predicted = [["B-PER", "I-PER", "B-MISC", "B-LOC"]]
    evaluation = ner_metrics.evaluate_ner(gold, predicted)
    assert evaluation.overall == ner_metrics.ChunkScores(1, 2, 3)
    precision, recall = 100 / 3, 50.0
    assert evaluation.overall.precision == pytest.approx(precision)
    assert evaluation.overall.recall == pytest.approx(recall)
    assert evaluation.overall.f1 == pytest.approx(2 * precision * recall / (precision + recall))
    assert evaluation.per_type["ORG"] == ner_metrics.ChunkScores(0, 1, 0)
    assert evaluation.per_type["MISC"] == ner_metrics.ChunkScores(0, 0, 1)
    assert evaluation.per_type["ORG"].precision == 0.0


def test_entities_do_not_cross_sentences():
    # As two sentences the I-PER opens a second entity; gold has two one-word entities.
    evaluation = ner_metrics.evaluate_ner([["B-PER"], ["B-PER"]], [["B-PER"], ["I-PER"]])
    assert evaluation.overall == ner_metrics.ChunkScores(2, 2, 2)


def test_mismatched_lengths_are_errors():
    with pytest.raises(ValueError, match="2 gold sentences but 1 predicted"):
        ner_metrics.evaluate_ner([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="Sentence 0: 2 gold tags but 1 predicted"):
        ner_metrics.evaluate_ner([["O", "O"]], [["O"]])


def test_report_matches_conlleval_layout(tmp_path):
    expected = (
        "processed 6 tokens with 3 phrases; found: 3 phrases; correct: 2.\n"
        "accuracy:  66.67%; precision:  66.67%; recall:  66.67%; FB1:  66.67\n"
        "              LOC: precision: 100.00%; recall: 100.00%; FB1: 100.00  1\n"
        "              ORG: precision: 100.00%; recall: 100.00%; FB1: 100.00  1\n"
        "              PER: precision:   0.00%; recall:   0.00%; FB1:   0.00  1\n")
    evaluation = ner_metrics.evaluate_ner(*_hand_case())
    assert ner_metrics.format_report(evaluation) == expected
    path = tmp_path / "eval_results.txt"
    ner_metrics.write_report(path, evaluation)
    assert path.read_text(encoding="utf-8") == expected
    assert [p.name for p in tmp_path.iterdir()] == ["eval_results.txt"]


def _conlleval_reference(gold_sentences, predicted_sentences):
    """conlleval.pl's streaming loop for O/B/I tags: (correct, found gold, found guessed)."""

    def split(tag):
        return tuple(tag.split("-", 1)) if "-" in tag else (tag, "")

    def ends(prev, cur, prev_type, cur_type):
        return (prev in "BI" and cur in "BO") or (prev != "O" and prev_type != cur_type)

    def starts(prev, cur, prev_type, cur_type):
        return (cur == "B" or (prev == "O" and cur == "I")
                or (cur != "O" and prev_type != cur_type))

    lines = []
    for gold, predicted in zip(gold_sentences, predicted_sentences):
        lines += [split(g) + split(p) for g, p in zip(gold, predicted)]
        lines.append(("O", "", "O", ""))  # The blank line between sentences.
    correct = found_gold = found_guessed = 0
    in_correct = False
    last_c, last_ct, last_g, last_gt = "O", "", "O", ""
    for c, ct, g, gt in lines:
        if in_correct:
            end_c, end_g = ends(last_c, c, last_ct, ct), ends(last_g, g, last_gt, gt)
            if end_c and end_g and last_gt == last_ct:
                in_correct = False
                correct += 1
            elif end_c != end_g or gt != ct:
                in_correct = False
        start_c, start_g = starts(last_c, c, last_ct, ct), starts(last_g, g, last_gt, gt)
        if start_c and start_g and gt == ct:
            in_correct = True
        found_gold += start_c
        found_guessed += start_g
        last_c, last_ct, last_g, last_gt = c, ct, g, gt
    return correct + in_correct, found_gold, found_guessed


def test_agrees_with_conlleval_loop_on_random_tags():
    rng = random.Random(12345)
    tags = ["O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG"]
    for _ in range(300):
        lengths = [rng.randint(1, 8) for _ in range(rng.randint(1, 4))]
        gold = [[rng.choice(tags) for _ in range(n)] for n in lengths]
        predicted = [[rng.choice(tags) for _ in range(n)] for n in lengths]
        overall = ner_metrics.evaluate_ner(gold, predicted).overall
        reference = _conlleval_reference(gold, predicted)
        assert (overall.correct, overall.found_gold, overall.found_predicted) == reference


@pytest.fixture(scope="module")
def valid_tags(shared_data_dir):
    data = conll.read_conll_file(shared_data_dir / "conll2003" / "valid.txt")
    return [sentence.tags for sentence in data.sentences]


def test_real_dev_set_against_itself(valid_tags):
    evaluation = ner_metrics.evaluate_ner(valid_tags, valid_tags)
    assert evaluation.overall == ner_metrics.ChunkScores(5942, 5942, 5942)
    assert evaluation.overall.f1 == 100.0
    assert evaluation.token_count == 51362
    assert evaluation.accuracy == 100.0
    assert {t: s.found_gold for t, s in evaluation.per_type.items()} == {
        "LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}


def test_real_dev_set_with_misc_predicted_as_org(valid_tags):
    # IOB2: every entity starts with B-, so retyping never merges entities. All 922 MISC
    # entities become wrong ORG ones; 1268 MISC tags (922 B- + 346 I-) become wrong.
    predicted = [[tag.replace("MISC", "ORG") for tag in tags] for tags in valid_tags]
    evaluation = ner_metrics.evaluate_ner(valid_tags, predicted)
    assert evaluation.overall == ner_metrics.ChunkScores(5942 - 922, 5942, 5942)
    assert evaluation.per_type["ORG"] == ner_metrics.ChunkScores(1341, 1341, 1341 + 922)
    assert evaluation.per_type["MISC"] == ner_metrics.ChunkScores(0, 922, 0)
    assert evaluation.per_type["ORG"].precision == pytest.approx(100 * 1341 / 2263)
    assert evaluation.accuracy == pytest.approx(100 * (51362 - 1268) / 51362)
    assert evaluation.overall.f1 == pytest.approx(100 * 5020 / 5942)


def test_real_dev_set_with_person_continuations_dropped(valid_tags):
    # I-PER -> O cuts every multi-word person to its first word: only the one-word persons
    # (a B-PER not followed by I-PER) stay correct, and 1307 I-PER tags become wrong.
    predicted = [["O" if tag == "I-PER" else tag for tag in tags] for tags in valid_tags]
    one_word = sum(1 for tags in valid_tags for i, tag in enumerate(tags)
                   if tag == "B-PER" and (i + 1 == len(tags) or tags[i + 1] != "I-PER"))
    evaluation = ner_metrics.evaluate_ner(valid_tags, predicted)
    assert evaluation.per_type["PER"] == ner_metrics.ChunkScores(one_word, 1842, 1842)
    assert evaluation.overall == ner_metrics.ChunkScores(4100 + one_word, 5942, 5942)
    assert evaluation.correct_tags == 51362 - 1307
