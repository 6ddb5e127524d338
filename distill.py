"""Distils a fine-tuned BERT (the teacher) into a smaller student, as Turc et al. 2019 did for
the small BERTs: the student learns the teacher's outputs on the task's training set and on
unlabelled text.

    python distill.py --teacher=/tmp/sst2_base --task_name=SST-2 --data_dir=$GLUE_DIR/SST-2 \
      --student_layers=0,5,11 --transfer_file=reviews.txt --temperature=2 --alpha=0.9 \
      --do_train --do_eval --num_train_epochs=3 --learning_rate=1e-4 --output_dir=/tmp/sst2_l3

--teacher is a fine-tuned classifier, tagger or SQuAD model: the output folder of
run_classifier.py, run_ner.py or run_squad.py, or a Hugging Face ...ForSequenceClassification,
...ForTokenClassification or ...ForQuestionAnswering folder. Its task's data is named as its
script names it (--task_name and --data_dir, or --train_file, --dev_file and --test_file with
their columns; a CoNLL --data_dir; SQuAD JSON in --train_file and --dev_file). The student starts
from --student_layers (those of the teacher's layers, with its embeddings and head), from
--student_init (any checkpoint: a smaller released BERT, a KerasHub preset), or from random
values of --student_config. It learns alpha * T^2 * the soft cross-entropy against the teacher's
outputs at --temperature plus (1 - alpha) * the task's loss; --hidden_loss_layers and
--attention_loss_layers add TinyBERT's hidden-state and MiniLM's attention losses. The teacher
labels the rows once: its outputs are kept in output_dir/teacher_outputs and read again by a
rerun. --transfer_file adds unlabelled lines (a text or `text ||| text` a line; a sentence for
a tagger; `question ||| context` for SQuAD) that the teacher labels.

Writes the student as every fine-tuned model is written (model.ckpt in the original's format,
bert_config.json, model_spec.json, vocab.txt, label_list.txt), the task's eval_results.txt and
test outputs (--do_eval, --do_predict), best/ with --eval_every_steps or --eval_every_epoch.
Rerunning an interrupted command resumes it.
"""
from __future__ import annotations

from utils import tensorflow_startup  # noqa: F401  (first: TensorFlow starts quietly)
from utils import entry_point

import dataclasses

from absl import flags

import common_flags
from data import tokenization
from data.classifier import own_files
from data.ner import conll
from tasks import distillation, distillation_models as models, runner
from tasks.distillation_data import MAX_SEQ_LENGTH, TaskData, task_settings

FLAGS = flags.FLAGS
flags.DEFINE_string("teacher", None, "The fine-tuned teacher: a run_classifier.py, run_ner.py "
                    "or run_squad.py output folder, or a Hugging Face task folder.")
flags.DEFINE_list("student_layers", None, "The teacher's layers the student keeps, from 0 "
                  "(e.g. 0,2,4), with the teacher's embeddings, pooler and head.")
flags.DEFINE_string("student_init", None, "The student's start instead: a checkpoint of any "
                    "format (a smaller BERT); its head too where it has the teacher's.")
flags.DEFINE_string("student_config", None, "The student's bert_config.json instead: random "
                    "values.")
flags.DEFINE_string("student_vocab_file", None, "The student's vocab.txt. Default: "
                    "--student_init's, else the teacher's.")
flags.DEFINE_bool("do_lower_case", None, "Lower-case the student's input. Default: what "
                  "--student_init's folder records, else the teacher's casing.")
flags.DEFINE_bool("allow_vocab_mismatch", False, "Distil a teacher and a student with different "
                  "vocabularies (or casing): each text is tokenized for each with its own "
                  "(classifiers and taggers; not with the hidden-state or attention losses).")
flags.DEFINE_float("temperature", 1.0, "Softens the teacher's and the student's distributions "
                   "of the soft loss, which is scaled by its square.")
flags.DEFINE_float("alpha", 1.0, "The soft loss's share of the loss; the task's loss has "
                   "1 - alpha (on the labelled rows).")
flags.DEFINE_list("hidden_loss_layers", [], "student:teacher pairs of layers (from 0, -1 the "
                  "last; `embeddings`) whose hidden states are brought together (mean squared "
                  "error, through a learned projection where the widths differ).")
flags.DEFINE_list("attention_loss_layers", [], "student:teacher pairs of layers whose attention "
                  "distributions are brought together (KL divergence), e.g. -1:-1.")
flags.DEFINE_float("hidden_loss_weight", 1.0, "Weight of the hidden-state loss.")
flags.DEFINE_float("attention_loss_weight", 1.0, "Weight of the attention loss.")
flags.DEFINE_string("transfer_file", None, "Unlabelled text, a line each (`text ||| text` pairs; "
                    "`question ||| context` for SQuAD), labelled by the teacher.")
flags.DEFINE_integer("teacher_batch_size", 64, "Rows a call while the teacher labels them.")
flags.DEFINE_string("task_name", None, "A classifier teacher's GLUE or XNLI task.")
flags.DEFINE_string("data_dir", None, "The task's folder: GLUE's .tsv files, or CoNLL files.")
for _role, _split in own_files.ROLE_SPLITS.items():
    flags.DEFINE_string(f"{_split}_file", None, f"The {_split} file for --do_{_role}: CSV, TSV "
                        "or JSON lines (a classifier), CoNLL (a tagger) or SQuAD JSON.")
flags.DEFINE_string("text_column", "text", "Classifier files: the text's column.")
flags.DEFINE_string("text_pair_column", None, "Classifier files: the second text's column.")
flags.DEFINE_string("label_column", "label", "Classifier files: the label's column.")
flags.DEFINE_enum("file_format", None, list(own_files.FORMATS), "Classifier files' format "
                  "(default: by extension).")
flags.DEFINE_string("label_separator", ",", "Multi-label classifier files: what joins labels.")
flags.DEFINE_integer("token_column", 0, "Tagger files: the word's column.")
flags.DEFINE_integer("tag_column", -1, "Tagger files: the tag's column.")
flags.DEFINE_enum("tag_scheme", "auto", conll.TAG_SCHEMES, "Tagger files' tags.")
flags.DEFINE_bool("document_context", False, "Tagger: each sentence amid its document.")
flags.DEFINE_integer("doc_stride", None, "Tokens between windows (SQuAD's contexts, long "
                     "sentences of a tagger's dev and test files).")
flags.DEFINE_integer("max_query_length", 64, "SQuAD: question tokens kept.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD v2.0.")
flags.DEFINE_string("output_dir", None, "Where the student, the teacher's outputs and the "
                    "results go.")
flags.DEFINE_integer("max_seq_length", None, "Tokens per sequence (default: 384 for SQuAD, "
                     "else 128).")
common_flags.define_fine_tuning_flags(
    {"train": "Distil the student on the training set (and --transfer_file).",
     "eval": "Score the student on dev, as the task's script does.",
     "predict": "The student's predictions on the test file(s)."})
flags.mark_flags_as_required(["teacher", "output_dir"])


def _task_data(do_lower_case: bool) -> TaskData:
    return TaskData(
        output_dir=FLAGS.output_dir, max_seq_length=FLAGS.max_seq_length,
        do_lower_case=do_lower_case, eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.predict_batch_size, batching=common_flags.batching_from_flags(),
        evaluation=common_flags.evaluation_plan_from_flags(),
        files={role: FLAGS[f"{split}_file"].value for role, split in own_files.ROLE_SPLITS.items()
               if FLAGS[f"{split}_file"].value},
        task_name=FLAGS.task_name, data_dir=FLAGS.data_dir,
        columns=own_files.Columns(FLAGS.text_column, FLAGS.text_pair_column, FLAGS.label_column),
        file_format=FLAGS.file_format, label_separator=FLAGS.label_separator,
        token_column=FLAGS.token_column, tag_column=FLAGS.tag_column, tag_scheme=FLAGS.tag_scheme,
        document_context=FLAGS.document_context, doc_stride=FLAGS.doc_stride,
        max_query_length=FLAGS.max_query_length,
        version_2_with_negative=FLAGS.version_2_with_negative)


def _settings(teacher: models.Teacher, student: models.Student) -> distillation.Settings:
    losses = distillation.Losses(
        FLAGS.temperature, FLAGS.alpha,
        models.layer_pairs(FLAGS.hidden_loss_layers, FLAGS.attention_loss_layers, student,
                           teacher), FLAGS.hidden_loss_weight, FLAGS.attention_loss_weight)
    task = task_settings(teacher.head, _task_data(student.do_lower_case), teacher.labels,
                         teacher.problem)
    return distillation.Settings(task, teacher, student, losses, FLAGS.transfer_file,
                                 FLAGS.allow_vocab_mismatch, FLAGS.teacher_batch_size)


def _student_layers() -> tuple[int, ...] | None:
    if not FLAGS.student_layers:
        return None
    try:
        return tuple(int(layer) for layer in FLAGS.student_layers)
    except ValueError:
        raise ValueError(f"--student_layers={','.join(FLAGS.student_layers)}: the teacher's "
                         "layers are numbers from 0") from None


def main(_):
    teacher = models.read_teacher(FLAGS.teacher)
    student = models.plan_student(models.StudentSource(
        _student_layers(), FLAGS.student_init, FLAGS.student_config, FLAGS.student_vocab_file,
        FLAGS.do_lower_case), teacher)
    FLAGS.max_seq_length = FLAGS.max_seq_length or MAX_SEQ_LENGTH[teacher.head]
    common_flags.check_fine_tuning_flags(student.config)
    settings = _settings(teacher, student)
    runner.fine_tune(
        distillation, settings, student.config,
        tokenization.FullTokenizer(student.vocab_file, student.do_lower_case),
        common_flags.roles_from_flags(),
        lambda: dataclasses.replace(common_flags.start_fine_tuning_run(init_checkpoint=""),
                                    vocab_file=student.vocab_file if FLAGS.do_train else None),
        FLAGS.output_dir)


if __name__ == "__main__":
    entry_point.run(main)
