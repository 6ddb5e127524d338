"""Fine-tunes and evaluates BERT on a GLUE task or XNLI, as the original run_classifier.py.

    python run_classifier.py --task_name=MRPC --do_train --do_eval --do_predict \
      --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_DIR/vocab.txt \
      --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
      --output_dir=/tmp/mrpc_output

Tasks: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli, ax (the diagnostic set, predicted
with a model fine-tuned on MNLI) and xnli. Outputs in --output_dir: `eval_results.txt` (MNLI also
`eval_results_mismatched.txt`), `test_results.tsv` (per-class probabilities, one row per test
example), the GLUE server's submission file (`MRPC.tsv`, `MNLI-m.tsv`, ...), and the fine-tuned
model as `model.ckpt` in the original format with its `bert_config.json`. With
`--eval_every_epoch`, dev is scored after each epoch (`eval_results_epoch_N.txt`) and the best model
by the task's metric is kept in `best/`. Without --do_train, --init_checkpoint (default: the
newest checkpoint in --output_dir) must be a fine-tuned classifier, the original's or this one's.
Rerunning an interrupted training command resumes from the newest checkpoint in --output_dir.
"""
from __future__ import annotations

from utils import tensorflow_startup  # noqa: F401  (first: TensorFlow starts quietly)
from utils import entry_point

from absl import flags

import common_flags
from data.classifier import glue_tasks
from tasks import classifier, runner

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "The task's folder of .tsv files (GLUE/XNLI layout).")
flags.DEFINE_string("task_name", None, "The task: " + ", ".join(glue_tasks.TASKS) + ".")
common_flags.define_model_flags(
    "Pretrained checkpoint to fine-tune (the encoder is loaded), or without --do_train a "
    "fine-tuned one to evaluate (default: the newest in --output_dir).")
common_flags.define_fine_tuning_flags(
    {"train": "Fine-tune on the train split.",
     "eval": "Score the dev split(s) and write eval_results.txt.",
     "predict": "Predict the test split(s) and write test_results.tsv and the GLUE submission "
                "file."})
flags.DEFINE_bool("eval_every_epoch", False, "Score dev after each epoch "
                  "(eval_results_epoch_N.txt) and keep the best model in output_dir/best.")
flags.DEFINE_string("xnli_language", "zh", "XNLI: language of the train file and dev rows.")
flags.mark_flags_as_required(["data_dir", "task_name", "output_dir"])


def _settings() -> classifier.Settings:
    return classifier.Settings(
        task=glue_tasks.get_task(FLAGS.task_name), data_dir=FLAGS.data_dir,
        output_dir=FLAGS.output_dir, max_seq_length=FLAGS.max_seq_length,
        do_lower_case=FLAGS.do_lower_case, eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.predict_batch_size, batching=common_flags.batching_from_flags(),
        xnli_language=FLAGS.xnli_language, eval_every_epoch=FLAGS.eval_every_epoch)


def main(_):
    settings = _settings()
    config = common_flags.config_from_flags()
    common_flags.check_fine_tuning_flags(config)
    runner.fine_tune(classifier, settings, config, common_flags.tokenizer_from_flags(config),
                     common_flags.roles_from_flags(), common_flags.start_fine_tuning_run,
                     FLAGS.output_dir)


if __name__ == "__main__":
    entry_point.run(main)
