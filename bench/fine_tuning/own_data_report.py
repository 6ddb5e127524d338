"""The own-data benchmark's report (`bench/fine_tuning/own_data.py`): own_data.md from the
results of the sections run so far."""
from __future__ import annotations

import statistics

from bench.support import machine_label

_FILE_NAMES = {"four_columns": "four columns (CoNLL-2003 as shipped, IOB2)",
               "two_columns_iob2": "two columns (word, tag), its own IOB2 tags",
               "two_columns_iobes": "two columns (word, tag), IOBES"}


def _mean_sd(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    seeds = ", ".join(f"{value:.2f}" for value in values)
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f} ({seeds})"


def multi_label_lines(section: dict, sections: dict) -> list[str]:
    runs = section["runs"]
    ours, theirs = runs["this_project"], runs["transformers"]

    def points(side: list[dict], key: str) -> list[float]:
        return [100 * (run["from_predictions"] if "from_predictions" in run else run)[key]
                for run in side]

    def epoch(side: list[dict]) -> float:
        return statistics.median(run["seconds_per_epoch"] for run in side)

    lines = [f"{section['train_examples']} training sentences ({section['train_without_entity']} "
             f"without an entity; {section['train_label_counts']}), {section['dev_examples']} "
             f"dev sentences; {len(ours)} seed(s) a side. F1 in points from each side's predicted "
             "labels; seconds per epoch: the training loop, median over the seeds.", "",
             "| side | micro-F1 | macro-F1 | seconds per epoch |", "| --- | --- | --- | --- |"]
    for name, side in (("this project (`run_classifier.py`)", ours), ("transformers", theirs)):
        lines.append(f"| {name} | {_mean_sd(points(side, 'eval_f1_micro'))} | "
                     f"{_mean_sd(points(side, 'eval_f1_macro'))} | {epoch(side):.1f} |")
    micro = (statistics.mean(points(ours, "eval_f1_micro"))
             - statistics.mean(points(theirs, "eval_f1_micro")))
    macro = (statistics.mean(points(ours, "eval_f1_macro"))
             - statistics.mean(points(theirs, "eval_f1_macro")))
    lines.append(f"| this project against transformers | {micro:+.2f} | {macro:+.2f} | "
                 f"{epoch(theirs) / epoch(ours):.2f}x the speed |")
    same = all(abs(run["eval_f1_micro"] - run["from_predictions"]["eval_f1_micro"]) < 1e-6
               for run in ours)
    lines += ["", f"- micro-F1 within 1 point of transformers': {_yes(abs(micro) <= 1)}; "
              f"an epoch at least as fast as transformers': "
              f"{_yes(epoch(ours) <= epoch(theirs))}.",
              f"- `eval_results.txt`'s micro-F1 is the one `predictions.jsonl` gives, every "
              f"seed: {_yes(same)}."]
    return lines


def multi_label_optimizer_lines(section: dict, sections: dict) -> list[str]:
    """This project with transformers' optimizer against multi_label's transformers runs: the
    metric only (the section may run beside another, so its times are not compared)."""
    ours = [run["from_predictions"] for run in section["runs"]]
    lines = [f"multi_label's data and seeds, this project with transformers' optimizer "
             f"(`{' '.join(section['flags'])}`).", "",
             "| side | micro-F1 | macro-F1 |", "| --- | --- | --- |",
             f"| this project, transformers' optimizer | "
             f"{_mean_sd([100 * run['eval_f1_micro'] for run in ours])} | "
             f"{_mean_sd([100 * run['eval_f1_macro'] for run in ours])} |"]
    if "multi_label" in sections:
        theirs = sections["multi_label"]["runs"]["transformers"]
        micro = (statistics.mean(100 * run["eval_f1_micro"] for run in ours)
                 - statistics.mean(100 * run["eval_f1_micro"] for run in theirs))
        lines += ["", f"- Against transformers (multi_label above): micro-F1 {micro:+.2f} points; "
                  f"within 1 point: {_yes(abs(micro) <= 1)}."]
    return lines


def _yes(condition: bool) -> str:
    return "yes" if condition else "**no**"


def tagging_lines(section: dict, sections: dict) -> list[str]:
    runs = section["runs"]
    reference = runs["four_columns"]["eval_f1"]
    lines = [f"{section['train_sentences']} training sentences, {section['dev_sentences']} dev "
             f"sentences, seed {section['seed']}; `run_ner.py --train_file --dev_file`.", "",
             "| file | entity F1 | against four columns |", "| --- | --- | --- |"]
    for name, run in runs.items():
        lines.append(f"| {_FILE_NAMES[name]} | {100 * run['eval_f1']:.2f} | "
                     f"{100 * (run['eval_f1'] - reference):+.2f} |")
    same = runs["two_columns_iob2"]["eval_f1"] == reference
    lines += ["", f"- Two columns with CoNLL-2003's own tags give the four-column file's "
              f"`eval_f1` to the printed digit: {_yes(same)}; IOBES gives "
              f"{runs['two_columns_iobes']['eval_f1']} against {reference}."]
    return lines


def early_stopping_lines(section: dict, sections: dict) -> list[str]:
    full, early = section["full"], section["early"]
    settings = section["settings"]
    lines = [f"MRPC, {section['train_examples']} training pairs, seed 1; dev scored every "
             f"{settings['eval_every_steps']} steps, patience "
             f"{settings['early_stopping_patience']}.",
             "", "| run | steps | dev F1 | wall seconds |", "| --- | --- | --- | --- |",
             f"| full | {section['full_steps']} | {100 * full['eval_f1']:.2f} (last step) | "
             f"{full['wall_seconds']:.0f} |",
             f"| `--early_stopping_patience` | stopped at {section['stopped_at_step']} | "
             f"{100 * section['best_eval_f1']:.2f} (best, step {section['best_step']}; "
             f"`best/`: {100 * section['best_saved_eval_f1']:.2f}) | "
             f"{early['wall_seconds']:.0f} |",
             f"| saved | {section['full_steps'] - section['stopped_at_step']} steps | "
             f"{100 * (section['best_eval_f1'] - full['eval_f1']):+.2f} | "
             f"{full['wall_seconds'] - early['wall_seconds']:.0f} s "
             f"({early['wall_seconds'] / full['wall_seconds']:.2f}x the full run's time) |"]
    return lines


def vocabulary_lines(section: dict, sections: dict) -> list[str]:
    released, extended = (section["sides"][s] for s in ("released", "extended"))
    lines = [f"{section['new_tokens']} new tokens from {section['corpus_documents']} WikiText-2 "
             f"validation articles; held out: {section['heldout_documents']} test articles; "
             f"{section['steps']} steps of continued pretraining (batch 32, sequences of 128).",
             "", "| | released vocabulary | extended | extended / released |",
             "| --- | --- | --- | --- |"]
    for text in ("corpus", "heldout"):
        before, after = released[text]["pieces_per_word"], extended[text]["pieces_per_word"]
        name = "training articles" if text == "corpus" else "held-out articles"
        lines.append(f"| WordPieces per word, {name} | {before:.4f} | {after:.4f} | "
                     f"{after / before:.3f} |")
    for when in ("before", "after"):
        before, after = (side[when]["masked_lm_accuracy"] for side in (released, extended))
        ratio = f"{after / before:.3f}" if before else "-"
        lines.append(f"| held-out masked-LM accuracy, {when} pretraining | {before:.4f} | "
                     f"{after:.4f} | {ratio} |")
    changed = section["heldout_tokenized_differently"]
    lines += ["", f"{changed['changed']} of the {changed['sentences']} held-out sentences "
              "tokenize differently with the extended vocabulary (every other one, exactly as "
              "before).",
              "", "Each vocabulary's records mask its own tokens: the extended vocabulary's "
              "held-out records hold fewer, longer tokens, so the two accuracies are over "
              "different predictions."]
    return lines


# (key, title, lines of (its section, every section run): some compare with another section)
_SECTIONS = (("multi_label", "Multi-label: CoNLL-2003 entity types", multi_label_lines),
             ("multi_label_optimizer", "Multi-label with transformers' optimizer",
              multi_label_optimizer_lines),
             ("tagging", "Two-column tagging files", tagging_lines),
             ("early_stopping", "Early stopping on MRPC", early_stopping_lines),
             ("vocabulary", "Domain vocabulary", vocabulary_lines))


def markdown(results: dict) -> str:
    machine = results["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items())
    lines = ["# Your own data from the shell", "", "```bash", results["command"], "```", "",
             f"Machine: {machine_label(machine)}, {machine['memory_gib']} GiB; load average at "
             f"the start {', '.join(f'{v:.1f}' for v in machine['load_average_start'])}. "
             f"Python {machine['python']}, {versions}.", "",
             "all-MiniLM-L6-v2, batch 32, learning rate 5e-5, 10% warm-up, max_seq_length 128, "
             "each script in its own process (`bench/fine_tuning/own_data.py`)."]
    for key, title, section_lines in _SECTIONS:
        if key in results["sections"]:
            section = results["sections"][key]
            lines += ["", f"## {title}", "", *section_lines(section, results["sections"]), "",
                      f"({section['section_seconds']:.0f} s, by `{section['command']}`; "
                      f"settings {section['settings']})"]
    return "\n".join(lines) + "\n"
