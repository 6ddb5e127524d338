"""Fine-tunes and evaluates BERT on SWAG (paper section 4.4), in the style of run_classifier.py.

    python run_swag.py --data_dir=$SWAG_DIR --vocab_file=$BERT_DIR/vocab.txt \
      --bert_config_file=$BERT_DIR/bert_config.json --init_checkpoint=$BERT_DIR/bert_model.ckpt \
      --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=16 \
      --learning_rate=2e-5 --num_train_epochs=3.0 --output_dir=/tmp/swag_output

--data_dir holds the SWAG distribution's train.csv, val.csv and test.csv. Each question becomes
four sequences `[CLS] sent1 [SEP] sent2 ending_i [SEP]`; one learned vector scores each pooled
output and a softmax runs over the four (the paper's defaults: learning rate 2e-5, batch 16, 3
epochs). Outputs in --output_dir: `eval_results.txt` (eval_accuracy, eval_loss, loss, global_step)
and `eval_predictions.csv` for val.csv, `predictions.csv` for test.csv (`id,prob0..prob3,
prediction`), and the fine-tuned model as `model.ckpt` (original format) with its
`bert_config.json`, beside the training checkpoints (`ckpt-N`, this project's format). Without
--do_train, --init_checkpoint (default: the newest checkpoint in --output_dir) must be a fine-tuned
SWAG model. Rerunning an interrupted training command resumes from --output_dir. With
--eval_every_steps or --eval_every_epoch, val.csv is scored during training
(eval_results_step_N.txt) and the most accurate model kept in `best/`;
--early_stopping_patience stops after that many scorings without improvement.
"""
from __future__ import annotations

from utils import tensorflow_startup  # noqa: F401  (first: TensorFlow starts quietly)
from utils import entry_point

from absl import flags

import common_flags
from tasks import runner, swag

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "Folder of the SWAG CSVs: train.csv, val.csv, test.csv.")
common_flags.define_model_flags(
    "Pretrained checkpoint to fine-tune (the encoder is loaded), or without --do_train a "
    "fine-tuned one to evaluate (default: the newest in --output_dir).",
    max_seq_length_help="Tokens per choice; longer ones are cut longest part first, shorter "
    "ones padded.")
common_flags.define_fine_tuning_flags(
    {"train": "Fine-tune on train.csv.", "eval": "Score val.csv and write eval_results.txt.",
     "predict": "Predict test.csv and write predictions.csv."},
    train_batch_size=16, learning_rate=2e-5)
flags.mark_flags_as_required(["data_dir", "output_dir"])


def main(_):
    config = common_flags.config_from_flags()
    common_flags.check_fine_tuning_flags(config)
    settings = swag.Settings(
        data_dir=FLAGS.data_dir, output_dir=FLAGS.output_dir, max_seq_length=FLAGS.max_seq_length,
        do_lower_case=FLAGS.do_lower_case, eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.predict_batch_size, batching=common_flags.batching_from_flags(),
        evaluation=common_flags.evaluation_plan_from_flags(swag.MAIN_METRIC))
    runner.fine_tune(swag, settings, config, common_flags.tokenizer_from_flags(config),
                     common_flags.roles_from_flags(), common_flags.start_fine_tuning_run,
                     FLAGS.output_dir)


if __name__ == "__main__":
    entry_point.run(main)
