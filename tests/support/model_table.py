"""The table of every model format the project reads x every command that takes a model.

Each cell either works, its outputs checked against a reference, or is refused before anything is
written with one `error:` line that says what the model lacks for that command. `ROWS` are the
models (tiny ones, all on the 100-token vocabulary of the Model Garden fixtures, so that one set
of texts serves every row), `COLUMNS` the commands; `expected(row, column)` is what a cell must
do. `tests/support/model_table_cells.py` makes the models and runs the cells, the tests
(`tests/scripts/test_model_table_*.py`) check them; `docs/checkpoints.md` shows the table,
between the markers below, as `markdown_table()` writes it:

    python tests/support/model_table.py    # rewrites the table in docs/checkpoints.md
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "tests" / "support" / "fixtures_model_garden"
DOC = REPO_ROOT / "docs" / "checkpoints.md"
DOC_BEGIN = "<!-- model table: written by `python tests/support/model_table.py` -->"
DOC_END = "<!-- end of model table -->"

# The vocabulary of tests/support/fixtures_model_garden: 5 special tokens and w0 ... w94.
VOCAB = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(95)))
MAX_SEQ_LENGTH = 16
# The fixtures' sizes; every row has them.
SIZES = dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=64, max_position_embeddings=MAX_SEQ_LENGTH, type_vocab_size=2)

# Inputs of the commands, one text a line (predict_text.py's formats).
SINGLES = ["w1 w2 w3", "w10 xyz w20 w30 w40", "w5 w6 w7 w8 w9 " * 4]
PAIRS = ["w1 w2 ||| w3 w4 w5", "w11 w12 w13 ||| w14"]
TEXTS = {
    "extract_features": SINGLES + PAIRS,
    "embed": SINGLES + PAIRS,
    "fill_mask": ["w1 [MASK] w3", "[MASK] w4 [MASK] w6 w7", "w7 w8 w9"],
    "classify": PAIRS + SINGLES,
    "squad": ["w1 w2 ||| " + " ".join(f"w{i}" for i in range(20, 40)), "w3 ||| w4 w5 w6"],
    "swag": ["w1 w2 ||| w3 w4 ||| w5 ||| w6 w7 ||| w8", "w9 ||| w10 ||| w11 w12 ||| w13 ||| w14"],
    "ner": ["w1 w2 w3", "w4 xyz w5 w6"],
}
SQUAD_FLAGS = ["--max_query_length=6", "--doc_stride=4"]

ENCODER, PRETRAINING, MASKED_LM = "encoder", "pretraining", "masked_lm"
CLASSIFIER, SQUAD, MULTIPLE_CHOICE, TAGGER = ("classifier", "squad", "multiple_choice",
                                              "token_classifier")
HEADS = (ENCODER, PRETRAINING, MASKED_LM, CLASSIFIER, SQUAD, MULTIPLE_CHOICE, TAGGER)


@dataclasses.dataclass(frozen=True)
class Row:
    """A model format, and the head the project reads it with."""

    # Its id in test names.
    name: str
    # Its name in the docs.
    title: str
    # How it is made: "tf1", "keras" (written by this project), "hf" (by transformers),
    # "sentence_transformers", or "fixture" (made by Model Garden's code).
    kind: str
    head: str
    # The label names a user gave it (keras: model_spec.json; hf: config.json's id2label).
    labels: tuple[str, ...] | None = None
    # hf: the transformers class; fixture: the folder under tests/support/fixtures_model_garden.
    source: str = ""

    @property
    def hidden_act(self) -> str:
        """Hugging Face's "gelu" is the exact (erf) gelu; the others' the tanh approximation."""
        return "gelu_exact" if self.kind in ("hf", "sentence_transformers") else "gelu"

    @property
    def num_labels(self) -> int | None:
        if self.head == CLASSIFIER and self.kind == "tf1":
            return 3
        return len(self.labels) if self.labels else None


ROWS = (
    Row("tf1_pretraining", "Google's TF1 `bert_model.ckpt`, pretraining heads", "tf1", PRETRAINING),
    Row("tf1_encoder", "TF1, encoder only", "tf1", ENCODER),
    Row("tf1_classifier", "TF1, classifier (`output_weights` at the root)", "tf1", CLASSIFIER),
    Row("tf1_squad", "TF1, SQuAD (`cls/squad/...`)", "tf1", SQUAD),
    Row("keras_classifier", "this project's, classifier", "keras", CLASSIFIER,
        ("contradiction", "entailment", "neutral")),
    Row("keras_ner", "this project's, NER tagger", "keras", TAGGER,
        ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")),
    Row("keras_swag", "this project's, SWAG (multiple choice)", "keras", MULTIPLE_CHOICE),
    Row("hf_model", "Hugging Face `BertModel`", "hf", ENCODER, source="BertModel"),
    Row("hf_masked_lm", "Hugging Face `BertForMaskedLM`", "hf", MASKED_LM,
        source="BertForMaskedLM"),
    Row("hf_pretraining", "Hugging Face `BertForPreTraining`", "hf", PRETRAINING,
        source="BertForPreTraining"),
    Row("hf_classifier", "Hugging Face `BertForSequenceClassification`", "hf", CLASSIFIER,
        ("negative", "positive"), "BertForSequenceClassification"),
    Row("hf_ner", "Hugging Face `BertForTokenClassification`", "hf", TAGGER,
        ("O", "B-ORG", "I-ORG"), "BertForTokenClassification"),
    Row("sentence_transformers", "sentence-transformers (mean pooling, normalised)",
        "sentence_transformers", ENCODER, source="BertModel"),
    Row("mg_encoder", "Model Garden `BertEncoder`", "fixture", ENCODER, source="encoder"),
    Row("mg_pretrainer", "Model Garden `BertPretrainerV2`", "fixture", PRETRAINING,
        source="pretrainer"),
    Row("hub_encoder", "TF-Hub encoder", "fixture", ENCODER, source="hub_encoder"),
    Row("hub_masked_lm", "TF-Hub encoder with the masked LM (`mlm`)", "fixture", MASKED_LM,
        source="hub_masked_lm"),
)
ROW_NAMES = tuple(row.name for row in ROWS)


@dataclasses.dataclass(frozen=True)
class Refusal:
    """How a cell is refused: `cause` is in its `error:` line, `short` in the docs."""

    short: str
    cause: str


@dataclasses.dataclass(frozen=True)
class Column:
    """A command that takes a model, run as a user runs it."""

    # Its id in test names.
    name: str
    # Its name in the docs.
    title: str
    script: str
    # The heads it works with (every head when None); the others are refused.
    takes: frozenset[str] | None = None
    refusal: Refusal | None = None
    # How a model with the exact (erf) gelu is refused, where the output format has no such
    # activation.
    exact_gelu_refusal: Refusal | None = None


def _task(name: str, takes: set[str] | None = None, refusal: Refusal | None = None) -> Column:
    return Column(name, f"`{name}`", "predict_text.py",
                  None if takes is None else frozenset(takes), refusal)


COLUMNS = (
    Column("extract_features", "`extract_features.py`", "extract_features.py"),
    Column("export", "`export_savedmodel.py`", "export_savedmodel.py",
           frozenset(HEADS) - {MULTIPLE_CHOICE},
           Refusal("no text signature for multiple choice", "has no text serving signature")),
    _task("fill_mask", {PRETRAINING, MASKED_LM},
          Refusal("no masked-LM head", "without the masked-LM head")),
    _task("embed"),
    _task("classify", {CLASSIFIER}, Refusal("not a classifier", "not a fine-tuned classifier")),
    _task("squad", {SQUAD}, Refusal("not a SQuAD model", "not a fine-tuned SQuAD model")),
    _task("swag", {MULTIPLE_CHOICE},
          Refusal("not a multiple-choice model", "not a fine-tuned multiple-choice model")),
    _task("ner", {TAGGER}, Refusal("not a tagger", "not a fine-tuned tagger")),
    *(Column(f"to_{output}", f"`--to={output}`", "convert_checkpoint.py") for output in
      ("tf1", "keras")),
    Column("to_hf", "`--to=hf`", "convert_checkpoint.py", frozenset(HEADS) - {MULTIPLE_CHOICE},
           Refusal("no Hugging Face class", "has no Hugging Face BERT class")),
    Column("to_model_garden", "`--to=model_garden`", "convert_checkpoint.py",
           frozenset({ENCODER, PRETRAINING, MASKED_LM}),
           Refusal("fine-tuned heads are not written", "not written in the Model Garden format"),
           Refusal("no exact (erf) gelu in Model Garden",
                   "Model Garden's params.yaml has no name for hidden_act='gelu_exact'")),
    Column("run_pretraining", "`run_pretraining.py`", "run_pretraining.py"),
    Column("run_classifier", "`run_classifier.py`", "run_classifier.py"),
)
COLUMN_NAMES = tuple(column.name for column in COLUMNS)


def row_named(name: str) -> Row:
    return next(row for row in ROWS if row.name == name)


def column_named(name: str) -> Column:
    return next(column for column in COLUMNS if column.name == name)


def expected(row: Row, column: Column) -> Refusal | None:
    """None where the cell works; else the refusal it must print."""
    if column.takes is not None and row.head not in column.takes:
        return column.refusal
    if row.hidden_act == "gelu_exact":
        return column.exact_gelu_refusal
    return None


# ---- The commands of a cell.

def cell_output(column: Column, cell_dir: str) -> str:
    """What the cell writes: its output file or folder (absent after a refusal)."""
    if column.script == "predict_text.py":
        return os.path.join(cell_dir, "out.npy" if column.name == "embed" else "out.jsonl")
    return os.path.join(cell_dir, "out.jsonl" if column.name == "extract_features" else "out")


def cell_arguments(column: Column, model: str, cell_dir: str, inputs: str) -> list[str]:
    """The script's arguments for the cell, as a user writes them: no --bert_config_file or
    --vocab_file (they default to the model's own), max_seq_length 16 everywhere.

    Args:
        model: the path a user passes (a checkpoint prefix or a folder).
        cell_dir: the cell's own folder, for its outputs.
        inputs: the folder `write_inputs` filled.
    """
    output = cell_output(column, cell_dir)
    length = f"--max_seq_length={MAX_SEQ_LENGTH}"
    if column.script == "predict_text.py":
        return [f"--task={column.name}", f"--model={model}", length, f"--output_file={output}",
                f"--input_file={os.path.join(inputs, column.name + '.txt')}",
                *(SQUAD_FLAGS if column.name == "squad" else ())]
    if column.name == "extract_features":
        return [f"--init_checkpoint={model}", "--layers=-1,-2", length, f"--output_file={output}",
                f"--input_file={os.path.join(inputs, 'extract_features.txt')}"]
    if column.name == "export":
        return [f"--input={model}", f"--output={output}", length]
    if column.script == "convert_checkpoint.py":
        return [f"--input={model}", f"--output={output}", f"--to={column.name[len('to_'):]}"]
    common = [f"--init_checkpoint={model}", f"--output_dir={output}", length, "--do_train",
              "--learning_rate=0", "--train_batch_size=2"]
    if column.name == "run_pretraining":
        return [*common, f"--input_file={os.path.join(inputs, 'pretraining.tfrecord')}",
                "--num_train_steps=1", "--max_predictions_per_seq=3"]
    return [*common, "--task_name=rte", f"--data_dir={os.path.join(inputs, 'rte')}",
            "--num_train_epochs=1"]


# ---- The table in the docs.

def markdown_table() -> str:
    """The table as docs/checkpoints.md shows it: "yes", or the refusal in short."""
    lines = ["| model | " + " | ".join(column.title for column in COLUMNS) + " |",
             "| --- |" + " --- |" * len(COLUMNS)]
    for row in ROWS:
        cells = [("yes" if refusal is None else refusal.short)
                 for refusal in (expected(row, column) for column in COLUMNS)]
        lines.append(f"| {row.title} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def doc_table(text: str) -> str:
    """The table between the markers of a docs page."""
    match = re.search(re.escape(DOC_BEGIN) + r"\n(.*?)" + re.escape(DOC_END), text, re.S)
    if match is None:
        raise ValueError(f"no table between {DOC_BEGIN!r} and {DOC_END!r}")
    return match.group(1)


def _rewrite_doc() -> None:
    text = DOC.read_text(encoding="utf-8")
    old = doc_table(text)
    DOC.write_text(text.replace(DOC_BEGIN + "\n" + old, DOC_BEGIN + "\n" + markdown_table()),
                   encoding="utf-8")


if __name__ == "__main__":
    _rewrite_doc()
