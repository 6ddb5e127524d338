"""The pipeline end to end on a generated corpus, on CPU, in a few minutes (`make demo`).

Each stage runs a project script exactly as a user would, from the shell, and the demo prints what
each produced: the vocabulary, the pretraining data, the masked-LM accuracy of a tiny BERT pretrained
from scratch, then the fine-tuning stages' metrics.
"""
import json
import os
import subprocess
import sys
import time

from absl import flags

from synthetic import corpus as synthetic_corpus, squad as synthetic_squad, swag_ner
from utils import entry_point

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", "demo_output", "Where every stage writes.")
flags.DEFINE_integer("pretraining_steps", 300, "Steps of pretraining.")

TINY_BERT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256,
                 hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 max_position_embeddings=128, type_vocab_size=2, initializer_range=0.02)


def run(stage: str, script: str, **flag_values) -> None:
    """Runs `python script --flag=value ...`, showing its last lines if it fails."""
    command = [sys.executable, script] + [f"--{k}={v}" for k, v in flag_values.items()]
    print(f"\n== {stage}\n$ {' '.join(command[1:])}", flush=True)
    start = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        print(result.stdout[-3000:], result.stderr[-6000:], sep="\n")
        raise SystemExit(f"stage '{stage}' failed with exit code {result.returncode}")
    print(f"   done in {time.monotonic() - start:.0f} s", flush=True)
    return result.stderr


def read_results(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return dict(line.strip().split(" = ") for line in f if " = " in line)


def pretrain(out: str) -> tuple[str, str, str]:
    corpus = os.path.join(out, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write(synthetic_corpus.pretraining_corpus(num_documents=400, seed=1))
    vocab = os.path.join(out, "vocab.txt")
    run("build a WordPiece vocabulary", "build_vocab.py", input_file=corpus, output_file=vocab,
        vocab_size=200)
    with open(vocab, encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    records = os.path.join(out, "pretraining.tfrecord")
    run("create the pretraining data", "create_pretraining_data.py", input_file=corpus,
        output_file=records, vocab_file=vocab, max_seq_length=64, max_predictions_per_seq=10,
        dupe_factor=3, num_workers=2)
    config = os.path.join(out, "bert_config.json")
    with open(config, "w", encoding="utf-8") as f:
        json.dump({**TINY_BERT, "vocab_size": vocab_size}, f, indent=2)
    pretraining_dir = os.path.join(out, "pretraining")
    log = run("pretrain a tiny BERT from scratch", "run_pretraining.py", input_file=records,
              output_dir=pretraining_dir, bert_config_file=config, do_train=True, do_eval=True,
              train_batch_size=32, max_seq_length=64, max_predictions_per_seq=10,
              num_train_steps=FLAGS.pretraining_steps, num_warmup_steps=30, learning_rate=1e-3,
              save_checkpoints_steps=100, log_steps=50, max_eval_steps=20)
    for line in log.splitlines():
        if "masked_lm_accuracy" in line and "step " in line:
            step = line.split("step ")[1].split(":")[0]
            accuracy = line.split("masked_lm_accuracy = ")[1].split(",")[0]
            print(f"   step {step}: masked-LM accuracy {accuracy} (training batch)")
    results = read_results(os.path.join(pretraining_dir, "eval_results.txt"))
    print(f"   eval: masked-LM accuracy {results['masked_lm_accuracy']}, next-sentence accuracy "
          f"{results['next_sentence_accuracy']} (chance: {1 / vocab_size:.4f} and 0.5)")
    return vocab, config, os.path.join(pretraining_dir, "bert_model.ckpt")


def classify(out: str, vocab: str, config: str, checkpoint: str) -> None:
    data_dir = os.path.join(out, "sst2")
    os.makedirs(data_dir, exist_ok=True)
    for name, rows, seed in (("train.tsv", 1024, 2), ("dev.tsv", 200, 3)):
        with open(os.path.join(data_dir, name), "w", encoding="utf-8") as f:
            f.write(synthetic_corpus.sst2_tsv(rows, seed))
    output_dir = os.path.join(out, "sst2_output")
    run("fine-tune a sentence classifier (SST-2 format)", "run_classifier.py",
        task_name="SST-2", do_train=True, do_eval=True, data_dir=data_dir, vocab_file=vocab,
        bert_config_file=config, init_checkpoint=checkpoint, max_seq_length=32,
        train_batch_size=16, learning_rate=5e-4, num_train_epochs=3, output_dir=output_dir)
    results = read_results(os.path.join(output_dir, "eval_results.txt"))
    print(f"   eval: accuracy {results['eval_accuracy']} (chance: 0.5)")


def answer_questions(out: str, vocab: str, config: str, checkpoint: str) -> None:
    train_file, dev_file = synthetic_squad.write_squad_files(
        os.path.join(out, "squad"), num_train_paragraphs=400, num_dev_paragraphs=50,
        version_2_with_negative=True)
    output_dir = os.path.join(out, "squad_v2_output")
    run("fine-tune question answering (SQuAD v2.0 format)", "run_squad.py", vocab_file=vocab,
        bert_config_file=config, init_checkpoint=checkpoint, do_train=True, train_file=train_file,
        do_predict=True, predict_file=dev_file, version_2_with_negative=True, max_seq_length=64,
        doc_stride=32, max_query_length=16, train_batch_size=32, learning_rate=1e-3,
        num_train_epochs=8, output_dir=output_dir)
    with open(os.path.join(output_dir, "eval_results.json"), encoding="utf-8") as f:
        results = json.load(f)
    print(f"   dev: exact {results['exact']:.1f}, F1 {results['f1']:.1f} (answerable "
          f"{results['HasAns_f1']:.1f}, unanswerable {results['NoAns_exact']:.1f}); best F1 "
          f"{results['best_f1']:.1f} at null threshold {results['best_f1_thresh']:.2f}")


def choose_endings(out: str, vocab: str, config: str, checkpoint: str) -> None:
    data_dir = swag_ner.write_swag_files(os.path.join(out, "swag"))
    output_dir = os.path.join(out, "swag_output")
    run("fine-tune multiple choice (SWAG format)", "run_swag.py", do_train=True, do_eval=True,
        do_predict=True, data_dir=data_dir, vocab_file=vocab, bert_config_file=config,
        init_checkpoint=checkpoint, max_seq_length=64, train_batch_size=16, learning_rate=1e-4,
        num_train_epochs=2, eval_batch_size=32, predict_batch_size=32, output_dir=output_dir)
    results = read_results(os.path.join(output_dir, "eval_results.txt"))
    print(f"   eval: accuracy {results['eval_accuracy']} (chance: 0.25)")


def tag_entities(out: str, vocab: str, config: str, checkpoint: str) -> None:
    data_dir = swag_ner.write_conll_files(os.path.join(out, "conll"))
    common = dict(data_dir=data_dir, vocab_file=vocab, bert_config_file=config,
                  init_checkpoint=checkpoint, do_lower_case=True, max_seq_length=64,
                  do_train=True, do_eval=True, do_predict=True, train_batch_size=16,
                  eval_batch_size=32, predict_batch_size=32)
    stages = (("fine-tune a named-entity tagger (CoNLL-2003 format)", "ner_output",
               dict(learning_rate=1e-3, num_train_epochs=10)),
              ("train a BiLSTM tagger on frozen BERT features (CoNLL-2003 format)",
               "ner_feature_based_output", dict(feature_based=True, feature_layers="-1,-2",
                                                lstm_units=64, learning_rate=3e-3,
                                                num_train_epochs=5)))
    for stage, name, extra in stages:
        output_dir = os.path.join(out, name)
        run(stage, "run_ner.py", **common, **extra, output_dir=output_dir)
        for split, results_file in (("dev", "eval_results.txt"), ("test", "test_results.txt")):
            results = read_results(os.path.join(output_dir, results_file))
            print(f"   {split}: entity F1 {float(results['eval_f1']):.3f} (precision "
                  f"{float(results['eval_precision']):.3f}, recall "
                  f"{float(results['eval_recall']):.3f})")


def main(_):
    out = os.path.abspath(FLAGS.output_dir)
    os.makedirs(out, exist_ok=True)
    os.chdir(os.path.dirname(os.path.abspath(__file__)))
    vocab, config, checkpoint = pretrain(out)
    classify(out, vocab, config, checkpoint)
    answer_questions(out, vocab, config, checkpoint)
    choose_endings(out, vocab, config, checkpoint)
    tag_entities(out, vocab, config, checkpoint)
    print(f"\nAll stages done; outputs in {out}")


if __name__ == "__main__":
    entry_point.run(main)
