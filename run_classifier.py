"""Fine-tunes and evaluates BERT on a GLUE task, XNLI, or one's own files, as the original
run_classifier.py.

    python run_classifier.py --task_name=MRPC --do_train --do_eval --do_predict \
      --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_DIR/vocab.txt \
      --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
      --output_dir=/tmp/mrpc_output

    python run_classifier.py --train_file=tickets/train.csv --dev_file=tickets/dev.csv \
      --test_file=tickets/test.csv --text_column=body --label_column=category \
      --do_train --do_eval --do_predict --init_checkpoint=$BERT_DIR/bert_model.ckpt \
      --output_dir=/tmp/tickets     # --problem_type=multi_label or regression; JSON lines too

Tasks: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli, ax (the diagnostic set, predicted
with a model fine-tuned on MNLI) and xnli. Outputs in --output_dir: `eval_results.txt` (MNLI also
`eval_results_mismatched.txt`), `test_results.tsv` (per-class probabilities, one row per test
example), the GLUE server's submission file (`MRPC.tsv`, `MNLI-m.tsv`, ...), and the fine-tuned
model as `model.ckpt` in the original format with its `bert_config.json`.

One's own files (CSV, TSV or JSON lines, by extension or --file_format) are read by column:
by header name, or by index for files without a header. Labels are --label_list, else every label
of the training file, sorted, written to `label_list.txt` beside the model. `eval_results.txt`
holds every metric of the problem type (single-label: accuracy, macro and weighted F1, Matthews
correlation, per-label precision, recall, F1 and support, with `confusion_matrix.tsv`;
multi-label: micro and macro F1, subset accuracy, per-label figures; regression: Pearson,
Spearman, mean squared error); the test file gets `test_results.tsv` and `predictions.jsonl`.

With `--eval_every_steps` or `--eval_every_epoch`, dev is scored during training
(`eval_results_step_N.txt`, `eval_results_epoch_N.txt`) and the best model by the task's metric
(or --metric_for_best) is kept in `best/`; `--early_stopping_patience` stops training after that
many scorings without improvement. Without --do_train, --init_checkpoint (default: the newest
checkpoint in --output_dir) must be a fine-tuned classifier, the original's or this one's.
Rerunning an interrupted training command resumes from the newest checkpoint in --output_dir.
"""
from __future__ import annotations

from utils import tensorflow_startup  # noqa: F401  (first: TensorFlow starts quietly)
from utils import entry_point

from absl import flags

import common_flags
from data.classifier import glue_tasks, own_files
from tasks import classifier, runner

FLAGS = flags.FLAGS
flags.DEFINE_string("task_name", None, "A GLUE or XNLI task: " + ", ".join(glue_tasks.TASKS) +
                    ". Not with your own files (--train_file, ...).")
flags.DEFINE_string("data_dir", None, "The task's folder of .tsv files (GLUE/XNLI layout).")
common_flags.define_model_flags(
    "Pretrained checkpoint to fine-tune (the encoder is loaded), or without --do_train a "
    "fine-tuned one to evaluate (default: the newest in --output_dir).")
common_flags.define_fine_tuning_flags(
    {"train": "Fine-tune on the train split (file).",
     "eval": "Score the dev split(s) (file) and write eval_results.txt.",
     "predict": "Predict the test split(s) (file) and write test_results.tsv, and the GLUE "
                "submission file or predictions.jsonl."})
flags.DEFINE_string("xnli_language", "zh", "XNLI: language of the train file and dev rows.")
for _role, _split in own_files.ROLE_SPLITS.items():
    flags.DEFINE_string(f"{_split}_file", None, f"Your own {_split} file (CSV, TSV or JSON lines) "
                        f"for --do_{_role}, instead of --task_name.")
flags.DEFINE_enum("file_format", None, list(own_files.FORMATS), "The files' format. Default: "
                  "by extension (.csv, .tsv, .jsonl or .json).")
flags.DEFINE_string("text_column", "text", "The text's column: a header name, or an index (from "
                    "0) for CSV and TSV files without a header.")
flags.DEFINE_string("text_pair_column", None, "The second text's column, for pairs.")
flags.DEFINE_string("label_column", "label", "The label's column (unlabelled test files may "
                    "lack it).")
flags.DEFINE_string("id_column", None, "A column of ids, written to predictions.jsonl (default: "
                    "the row's number from 0).")
flags.DEFINE_list("label_list", None, "The labels, in class-index order. Default: every label "
                  "of the training file, sorted (without training, those saved beside the "
                  "model).")
flags.DEFINE_enum("problem_type", glue_tasks.SINGLE_LABEL, list(glue_tasks.PROBLEM_TYPES),
                  "single_label: one class a row (softmax); multi_label: any number of classes "
                  "a row, joined by --label_separator (a sigmoid each, binary cross-entropy); "
                  "regression: a number a row (mean squared error).")
flags.DEFINE_string("label_separator", ",", "multi_label: what joins a row's labels.")
flags.DEFINE_float("multi_label_threshold", 0.5, "multi_label: the probability from which a "
                   "label is predicted.")
flags.DEFINE_enum("class_weights", None, list(classifier.CLASS_WEIGHTS), "balanced: weight each "
                  "class (a multi-label task: each label's positive and negative terms) "
                  "inversely to its frequency in the training file, as scikit-learn's.")
flags.mark_flags_as_required(["output_dir"])


def _own_files() -> own_files.OwnFiles | None:
    paths = {role: FLAGS[f"{split}_file"].value for role, split in own_files.ROLE_SPLITS.items()
             if FLAGS[f"{split}_file"].value}
    if not paths:
        return None
    columns = own_files.Columns(FLAGS.text_column, FLAGS.text_pair_column, FLAGS.label_column,
                                FLAGS.id_column)
    columns.check()
    return own_files.OwnFiles(paths, columns, FLAGS.problem_type, FLAGS.file_format,
                              FLAGS.label_separator,
                              tuple(FLAGS.label_list) if FLAGS.label_list else None)


def _settings() -> classifier.Settings:
    files = _own_files()
    if files is None and not (FLAGS.task_name and FLAGS.data_dir):
        raise ValueError("name a GLUE or XNLI task (--task_name and --data_dir) or your own "
                         "files (--train_file, --dev_file, --test_file)")
    return classifier.Settings(
        task=glue_tasks.get_task(FLAGS.task_name) if FLAGS.task_name else None,
        data_dir=FLAGS.data_dir, files=files, output_dir=FLAGS.output_dir,
        init_checkpoint=FLAGS.init_checkpoint, max_seq_length=FLAGS.max_seq_length,
        do_lower_case=FLAGS.do_lower_case, eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.predict_batch_size, batching=common_flags.batching_from_flags(),
        xnli_language=FLAGS.xnli_language, class_weights=FLAGS.class_weights,
        multi_label_threshold=FLAGS.multi_label_threshold,
        evaluation=common_flags.evaluation_plan_from_flags())


def main(_):
    settings = _settings()
    config = common_flags.config_from_flags()
    common_flags.check_fine_tuning_flags(config)
    runner.fine_tune(classifier, settings, config, common_flags.tokenizer_from_flags(config),
                     common_flags.roles_from_flags(), common_flags.start_fine_tuning_run,
                     FLAGS.output_dir)


if __name__ == "__main__":
    entry_point.run(main)
