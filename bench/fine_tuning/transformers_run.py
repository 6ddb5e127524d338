"""One fine-tuning run with Hugging Face transformers (PyTorch), as its users write it.

The peer of this project's scripts in `bench/fine_tuning/real_weights.py`: the same weights, the
same files (read by the project's readers, so both see the same examples), the same metrics code,
and the same hyper-parameters: max_seq_length, batch size, learning rate, epochs, 10% linear warm-up
then linear decay, weight decay 0.01 (not on biases and LayerNorm), dropout 0.1, gradient
clipping at 1.0. The optimizer is PyTorch's AdamW (bias-corrected, epsilon 1e-8), the tokenizer
`BertTokenizerFast`, the loop the one of transformers' `run_glue_no_trainer.py` /
`run_ner_no_trainer.py` examples (multi-label: `AutoModelForSequenceClassification` with
`problem_type="multi_label_classification"`, a sigmoid and binary cross-entropy per label). Each
batch is padded to its own longest sequence, as their data collator (`DataCollatorWithPadding`)
does unless `--pad_to_max_length` is given (`--padding=max_length` here); `--group_by_length`
orders the shuffled examples with transformers' own `LengthGroupedSampler`, as the Trainer's
`group_by_length=True`.

    python -m bench.fine_tuning.transformers_run --task=mrpc --model_dir=HF_FOLDER \
        --data_dir=GLUE/MRPC --max_seq_length=96 --seed=1 --result_file=/tmp/result.json
    python -m bench.fine_tuning.transformers_run --task=squad_predict --model_dir=HF_SQUAD_MODEL \
        --predict_file=dev-v1.1.json --result_file=/tmp/result.json

Writes one JSON object: the dev metrics (the keys of the project's `eval_results.txt`) and the
timings (`train_seconds` of the training loop, `examples_per_second`).
"""
from __future__ import annotations

import json
import os
import time

from absl import flags
import numpy as np
import torch
import transformers
from transformers.trainer_pt_utils import LengthGroupedSampler

from bench.support import write_json, write_text
from data.classifier import glue_tasks, own_files
from data.classifier.metrics import multi_label_metrics, task_metrics
from data.ner import conll, metrics as ner_metrics
from data.squad import metrics as squad_metrics
from utils import entry_point

FLAGS = flags.FLAGS

_IGNORED = -100  # transformers' ignored label id


def _glue_encodings(tokenizer, task, examples, max_seq_length: int) -> dict[str, torch.Tensor]:
    texts_b = [e.text_b for e in examples] if task.splits[0].text_b_column is not None else None
    encoded = tokenizer([e.text_a for e in examples], texts_b, truncation=True,
                        max_length=max_seq_length, padding="max_length", return_tensors="pt")
    if task.is_regression:
        labels = torch.tensor([float(e.label) for e in examples])
    else:
        labels = torch.tensor([task.labels.index(e.label) for e in examples])
    return {**encoded, "labels": labels}


def _ner_encodings(tokenizer, data: conll.ConllData, labels: list[str], max_seq_length: int
                   ) -> tuple[dict[str, torch.Tensor], list[list[int]]]:
    """Encodings with each word's first piece labelled, and each word's first-piece position."""
    sentences = data.sentences
    encoded = tokenizer([s.words for s in sentences], is_split_into_words=True, truncation=True,
                        max_length=max_seq_length, padding="max_length")
    label_rows, positions = [], []
    for row, sentence in enumerate(sentences):
        word_ids = encoded.word_ids(row)
        first = {}
        for position, word in enumerate(word_ids):
            if word is not None and word not in first:
                first[word] = position
        label_row = [_IGNORED] * max_seq_length
        for word, position in first.items():
            label_row[position] = labels.index(sentence.tags[word])
        label_rows.append(label_row)
        positions.append([first.get(word, -1) for word in range(len(sentence.words))])
    tensors = {k: torch.tensor(v) for k, v in encoded.items()}
    return {**tensors, "labels": torch.tensor(label_rows)}, positions


def adamw_and_schedule(model, learning_rate: float, warmup_proportion: float,
                       num_training_steps: int):
    """PyTorch's AdamW (weight decay 0.01, not on biases and LayerNorm) and transformers' linear
    schedule with warm-up over `warmup_proportion` of the steps."""
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)],
         "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=learning_rate)
    scheduler = transformers.get_linear_schedule_with_warmup(
        optimizer, int(warmup_proportion * num_training_steps), num_training_steps)
    return optimizer, scheduler


def _batch(inputs: dict[str, torch.Tensor], index, padding: str) -> dict[str, torch.Tensor]:
    """The rows `index`; with padding "longest", cut to their longest sequence as the collator
    pads them (every [N, T] tensor: ids, masks, token labels)."""
    batch = {k: v[index] for k, v in inputs.items()}
    if padding == "max_length":
        return batch
    mask = batch["attention_mask"]
    width = int(mask.sum(1).max())
    return {k: v[:, :width].contiguous() if v.dim() == 2 and v.shape == mask.shape else v
            for k, v in batch.items()}


def torch_inputs(arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """The project's feature arrays (`input_ids`, `input_mask`, `segment_ids`, `label_ids` if
    there) as transformers' int64 model inputs."""
    names = {"input_ids": "input_ids", "input_mask": "attention_mask",
             "segment_ids": "token_type_ids", "label_ids": "labels"}
    return {name: torch.from_numpy(arrays[key]).long() for key, name in names.items()
            if key in arrays}


def train_step(model, batch: dict[str, torch.Tensor], optimizer, scheduler) -> float:
    """One step of the examples' loop: loss, backward, clipping at 1.0, the update, the next
    rate. Returns the batch's loss."""
    loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    return loss.item()


def _train(model, train: dict[str, torch.Tensor], args) -> float:
    """Fine-tunes in place; returns the training loop's seconds."""
    num_examples = len(train["labels"])
    generator = torch.Generator().manual_seed(args.seed)
    batches_per_epoch = -(-num_examples // args.train_batch_size)
    optimizer, scheduler = adamw_and_schedule(model, args.learning_rate, args.warmup_proportion,
                                              batches_per_epoch * args.num_train_epochs)
    lengths = train["attention_mask"].sum(1).tolist()
    model.train()
    start = time.perf_counter()
    for epoch in range(args.num_train_epochs):
        if args.group_by_length:
            order = torch.tensor(list(LengthGroupedSampler(
                args.train_batch_size, lengths=lengths, generator=generator)))
        else:
            order = torch.randperm(num_examples, generator=generator)
        losses = []
        for first in range(0, num_examples, args.train_batch_size):
            index = order[first:first + args.train_batch_size]
            losses.append(train_step(model, _batch(train, index, args.padding), optimizer,
                                     scheduler))
        print(f"epoch {epoch + 1}/{args.num_train_epochs}: mean loss {np.mean(losses):.4f}, "
              f"{time.perf_counter() - start:.1f} s", flush=True)
    return time.perf_counter() - start


@torch.no_grad()
def model_outputs(model, inputs: dict[str, torch.Tensor], batch_size: int, padding: str,
                  keys=("logits",), per_token: bool = False):
    """Outputs in input order, each batch padded as `padding` says; `per_token` outputs
    ([B, T, ...]) are padded back to max_seq_length."""
    model.eval()
    inputs = {k: v for k, v in inputs.items() if k != "labels"}
    count, width = inputs["input_ids"].shape
    outputs = {key: [] for key in keys}
    for first in range(0, count, batch_size):
        with torch.inference_mode():  # as a user predicts: no autograd records
            result = model(**_batch(inputs, slice(first, first + batch_size), padding))
        for key in keys:
            value = result[key].float().numpy()
            if per_token:
                value = np.pad(value, [(0, 0), (0, width - value.shape[1])] +
                               [(0, 0)] * (value.ndim - 2))
            outputs[key].append(value)
    return {key: np.concatenate(values) for key, values in outputs.items()}


def _run_glue(args) -> dict:
    task = glue_tasks.get_task(args.task)
    tokenizer = transformers.BertTokenizerFast.from_pretrained(args.model_dir)
    train = _glue_encodings(tokenizer, task, glue_tasks.read_examples(task, args.data_dir, "train"),
                            args.max_seq_length)
    dev = _glue_encodings(tokenizer, task, glue_tasks.read_examples(task, args.data_dir, "dev"),
                          args.max_seq_length)
    model = transformers.BertForSequenceClassification.from_pretrained(
        args.model_dir, num_labels=task.num_labels,
        problem_type="regression" if task.is_regression else "single_label_classification")
    seconds = _train(model, train, args)
    logits = model_outputs(model, dev, args.eval_batch_size, args.padding)["logits"]
    results = task_metrics(task, logits, dev["labels"].numpy())
    return {**results, **_timing(len(train["labels"]), args.num_train_epochs, seconds)}


def _multi_label_encodings(tokenizer, examples, labels: list[str], max_seq_length: int
                           ) -> dict[str, torch.Tensor]:
    """Encodings with a float 0/1 label per class, as BCEWithLogitsLoss takes them."""
    encoded = tokenizer([e.text_a for e in examples], truncation=True, max_length=max_seq_length,
                        padding="max_length", return_tensors="pt")
    targets = torch.tensor([[float(label in e.label) for label in labels] for e in examples])
    return {**encoded, "labels": targets}


def _run_multi_label(args) -> dict:
    """Multi-label classification of the JSON lines `train.jsonl` and `dev.jsonl` (`text`, and
    `labels` joined by commas) in --data_dir, read by the project's reader: a sigmoid and binary
    cross-entropy per label (`problem_type="multi_label_classification"`), a label predicted
    from probability 0.5."""
    files = own_files.OwnFiles(
        {"train": os.path.join(args.data_dir, "train.jsonl"),
         "eval": os.path.join(args.data_dir, "dev.jsonl")},
        own_files.Columns(text="text", label="labels"), problem_type=glue_tasks.MULTI_LABEL,
        label_list=tuple(args.label_list) if args.label_list else None)
    train_examples = own_files.read_file(files, "train", files.label_list)
    labels = list(files.label_list or own_files.labels_of(train_examples, glue_tasks.MULTI_LABEL))
    dev_examples = own_files.read_file(files, "eval", labels)
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model_dir)
    train = _multi_label_encodings(tokenizer, train_examples, labels, args.max_seq_length)
    dev = _multi_label_encodings(tokenizer, dev_examples, labels, args.max_seq_length)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        args.model_dir, num_labels=len(labels), problem_type="multi_label_classification")
    seconds = _train(model, train, args)
    logits = model_outputs(model, dev, args.eval_batch_size, args.padding)["logits"]
    probabilities = 1 / (1 + np.exp(-logits.astype(np.float64)))
    results = multi_label_metrics(probabilities, dev["labels"].numpy(), labels)
    return {**results, **_timing(len(train["labels"]), args.num_train_epochs, seconds)}


def _run_ner(args) -> dict:
    train_data = conll.read_conll_file(os.path.join(args.data_dir, "train.txt"))
    dev_data = conll.read_conll_file(os.path.join(args.data_dir, "valid.txt"))
    labels = conll.label_list(conll.entity_types(train_data))
    tokenizer = transformers.BertTokenizerFast.from_pretrained(args.model_dir)
    train, _ = _ner_encodings(tokenizer, train_data, labels, args.max_seq_length)
    dev, positions = _ner_encodings(tokenizer, dev_data, labels, args.max_seq_length)
    model = transformers.BertForTokenClassification.from_pretrained(args.model_dir,
                                                                    num_labels=len(labels))
    seconds = _train(model, train, args)
    predicted = np.argmax(model_outputs(model, dev, args.eval_batch_size, args.padding,
                                        per_token=True)["logits"], -1)
    # A word cut off by max_seq_length is tagged O here (run_ner.py tags it from windows).
    tags = [[labels[row[p]] if p >= 0 else conll.OUTSIDE_TAG for p in word_positions]
            for row, word_positions in zip(predicted, positions)]
    evaluation = ner_metrics.evaluate_ner([s.tags for s in dev_data.sentences], tags)
    return {"eval_f1": evaluation.overall.f1 / 100,
            "eval_precision": evaluation.overall.precision / 100,
            "eval_recall": evaluation.overall.recall / 100,
            **_timing(len(train["labels"]), args.num_train_epochs, seconds)}


def _run_squad_predict(args) -> dict:
    """Predicts every question of a SQuAD file: features, model and answer spans, timed."""
    with open(args.predict_file, encoding="utf-8") as f:
        dataset = json.load(f)
    questions = [(qa["id"], qa["question"], paragraph["context"])
                 for article in dataset["data"] for paragraph in article["paragraphs"]
                 for qa in paragraph["qas"]]
    tokenizer = transformers.BertTokenizerFast.from_pretrained(args.model_dir)
    model = transformers.BertForQuestionAnswering.from_pretrained(args.model_dir)
    start = time.perf_counter()
    # As transformers' run_qa.py: its stride (the windows' overlap) set to --doc_stride.
    encoded = tokenizer([q for _, q, _ in questions], [c for _, _, c in questions],
                        truncation="only_second", max_length=args.max_seq_length,
                        stride=args.doc_stride,
                        return_overflowing_tokens=True, return_offsets_mapping=True,
                        padding="max_length")
    inputs = {k: torch.tensor(encoded[k])
              for k in ("input_ids", "attention_mask", "token_type_ids")}
    model_start = time.perf_counter()
    logits = model_outputs(model, inputs, args.eval_batch_size, args.padding,
                           keys=("start_logits", "end_logits"), per_token=True)
    answers_start = time.perf_counter()
    predictions = _best_spans(encoded, logits, questions, args.max_answer_length)
    end = time.perf_counter()
    results = squad_metrics.evaluate(dataset, predictions, squad_metrics.VERSION_1)
    write_text(os.path.join(os.path.dirname(args.result_file), "hf_predictions.json"),
               json.dumps(predictions))
    return {**results, "questions": len(questions), "features": len(inputs["input_ids"]),
            "predict_seconds": end - start, "questions_per_second": len(questions) / (end - start),
            "features_seconds": model_start - start, "model_seconds": answers_start - model_start,
            "answers_seconds": end - answers_start}


def _best_spans(encoded, logits: dict[str, np.ndarray], questions, max_answer_length: int,
                n_best: int = 20) -> dict[str, str]:
    """Each question's highest-scoring context span over its features (transformers' run_qa)."""
    best: dict[int, tuple[float, str]] = {}
    for row, question in enumerate(encoded["overflow_to_sample_mapping"]):
        offsets = encoded["offset_mapping"][row]
        in_context = [s == 1 for s in encoded.sequence_ids(row)]
        start_logits, end_logits = logits["start_logits"][row], logits["end_logits"][row]
        for s in np.argsort(start_logits)[::-1][:n_best]:
            for e in np.argsort(end_logits)[::-1][:n_best]:
                if not (in_context[s] and in_context[e]) or e < s or e - s + 1 > max_answer_length:
                    continue
                score = float(start_logits[s] + end_logits[e])
                if question not in best or score > best[question][0]:
                    context = questions[question][2]
                    best[question] = (score, context[offsets[s][0]:offsets[e][1]])
    return {qid: best.get(index, (0.0, ""))[1] for index, (qid, _, _) in enumerate(questions)}


def _timing(num_examples: int, num_epochs: int, seconds: float) -> dict:
    return {"train_seconds": seconds, "seconds_per_epoch": seconds / num_epochs,
            "examples_per_second": num_examples * num_epochs / seconds,
            "train_examples": num_examples}


def define_flags() -> None:
    """The run's flags, defined where it runs as the main module (bench/support.py)."""
    flags.DEFINE_string("task", None, "A GLUE task, conll2003, multi_label (train.jsonl and "
                        "dev.jsonl in --data_dir) or squad_predict.")
    flags.DEFINE_string("model_dir", None, "Hugging Face BERT folder.")
    flags.DEFINE_string("data_dir", None, "The task's folder (GLUE layout, or CoNLL files).")
    flags.DEFINE_string("predict_file", None, "squad_predict: the SQuAD JSON to predict.")
    flags.DEFINE_string("result_file", None, "Where the run's JSON object goes.")
    flags.DEFINE_list("label_list", None, "multi_label: the labels in class-index order "
                      "(default: the training file's, sorted).")
    flags.DEFINE_integer("max_seq_length", 128, "Longest sequence in WordPieces.")
    flags.DEFINE_integer("doc_stride", 128, "squad_predict: the windows' overlap (run_qa's "
                         "stride).")
    flags.DEFINE_integer("max_answer_length", 30, "squad_predict: longest answer in WordPieces.")
    flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
    flags.DEFINE_integer("eval_batch_size", 64, "Evaluation and prediction batch size.")
    flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
    flags.DEFINE_integer("num_train_epochs", 3, "Training epochs.")
    flags.DEFINE_float("warmup_proportion", 0.1, "Share of the steps of linear warm-up.")
    flags.DEFINE_integer("seed", 1, "transformers.set_seed's seed.")
    flags.DEFINE_enum("padding", "longest", ["longest", "max_length"],
                      "Pad each batch to its longest sequence (the collator's default) or to "
                      "--max_seq_length.")
    flags.DEFINE_bool("group_by_length", False,
                      "Batch examples of similar lengths (LengthGroupedSampler).")
    flags.mark_flags_as_required(["task", "model_dir", "result_file"])


def main(argv: list[str]) -> None:
    del argv
    transformers.set_seed(FLAGS.seed)
    if FLAGS.task == "squad_predict":
        result = _run_squad_predict(FLAGS)
    elif FLAGS.task == "conll2003":
        result = _run_ner(FLAGS)
    elif FLAGS.task == "multi_label":
        result = _run_multi_label(FLAGS)
    else:
        result = _run_glue(FLAGS)
    result["torch_threads"] = torch.get_num_threads()
    write_json(FLAGS.result_file, result, sort_keys=True)
    print(json.dumps(result, sort_keys=True), flush=True)


if __name__ == "__main__":
    define_flags()
    entry_point.run(main)
