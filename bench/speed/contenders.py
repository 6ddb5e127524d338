"""The implementations the benchmark compares, each behind `build(case, workdir) -> run()`.

Every contender gets the same model sizes, the tanh GELU, dropout 0.1, full-length sequences of the
same random token ids, and, for the training step, the same computation: encoder, masked-LM head
(dense + GELU + LayerNorm + tied output embedding) on `MAX_PREDICTIONS_PER_SEQ` gathered positions,
next-sentence head, both cross-entropy losses, gradients, global-norm clipping to 1.0 and an Adam
update with decoupled weight decay. bfloat16 means each library's mixed precision: float32
variables, bfloat16 compute (Keras "mixed_bfloat16", PyTorch CPU autocast).

Each module imports its framework lazily: a worker process imports only its own.
"""
from __future__ import annotations

import os
from typing import Callable

import numpy as np

from bench.speed.cases import MAX_PREDICTIONS_PER_SEQ, VOCAB_SIZE, Case, ModelSize


def synthetic_batch(case: Case, seed: int = 0) -> dict[str, np.ndarray]:
    """Random pretraining features of the case's shape: full-length sequences, 2 segments,
    `MAX_PREDICTIONS_PER_SEQ` masked positions (fewer where the sequence has fewer tokens)."""
    rng = np.random.default_rng(seed)
    b, t = case.batch_size, case.seq_length
    p = min(MAX_PREDICTIONS_PER_SEQ, t - 1)
    positions = np.sort(np.stack([rng.choice(np.arange(1, t), p, replace=False)
                                  for _ in range(b)]), axis=1)
    return {
        "input_ids": rng.integers(1000, VOCAB_SIZE, (b, t)).astype(np.int32),
        "input_mask": np.ones((b, t), np.int32),
        "segment_ids": (np.arange(t)[None, :] >= t // 2).repeat(b, 0).astype(np.int32),
        "masked_lm_positions": positions.astype(np.int32),
        "masked_lm_ids": rng.integers(1000, VOCAB_SIZE, (b, p)).astype(np.int32),
        "masked_lm_weights": np.ones((b, p), np.float32),
        "next_sentence_labels": rng.integers(0, 2, (b, 1)).astype(np.int32),
    }


def bert_config(model: ModelSize):
    """This project's `BertConfig` of a benchmark model: its sizes, the original's defaults."""
    from modeling.config import BertConfig
    return BertConfig(vocab_size=VOCAB_SIZE, hidden_size=model.hidden_size,
                      num_hidden_layers=model.num_layers, num_attention_heads=model.num_heads,
                      intermediate_size=model.intermediate_size, type_vocab_size=2)


class ThisProject:
    """This repository's `BertEncoder` / `BertPretrainer`, the training step of its `Trainer`
    fed by its TFRecord input pipeline, XLA on or off as `running.xla_choice` picks (for the
    forward pass by the call's size too), or as `jit_compile` forces it (the subclasses below,
    which measure that choice)."""

    name = "this project"
    framework = "tensorflow"
    # XLA on (True) or off (False) whatever `prefers_xla` says; None: as it says.
    jit_compile: bool | None = None

    def build(self, case: Case, workdir: str) -> Callable[[], object]:
        import keras
        import tensorflow as tf
        from modeling.models.encoder import BertEncoder
        from utils.encoder_inputs import ENCODER_INPUTS
        from running.xla_choice import prefers_xla
        keras.mixed_precision.set_dtype_policy(
            "mixed_bfloat16" if case.dtype == "bfloat16" else "float32")
        config = bert_config(case.model)
        if case.mode == "train":
            return self._train_step(case, config, workdir)
        encoder = BertEncoder(config)
        inputs = {k: tf.constant(v) for k, v in synthetic_batch(case).items()
                  if k in ENCODER_INPUTS}
        jit_compile = self.jit_compile
        if jit_compile is None:
            jit_compile = prefers_xla(encoder.compute_dtype, case.batch_size * case.seq_length,
                                      case.model.hidden_size, forward_only=True)
        forward = tf.function(lambda x: encoder(x, training=False)["sequence_output"],
                              jit_compile=jit_compile)
        # Reading one value back waits for the call to end on an accelerator too.
        return lambda: forward(inputs)[0, 0, 0].numpy()

    def _train_step(self, case: Case, config, workdir: str) -> Callable[[], object]:
        import tensorflow as tf
        from data.pretraining.dataset import pretraining_dataset
        from modeling.models.pretrainer import BertPretrainer, pretraining_losses
        from training.optimizer import create_optimizer
        from training.trainer import Trainer, TrainingConfig

        def loss_fn(outputs, batch, normaliser):
            return pretraining_losses(
                outputs, batch, normaliser.global_sum(tf.reduce_sum(batch["masked_lm_weights"])),
                normaliser.global_batch_size(batch))

        model = BertPretrainer(config)
        optimizer = create_optimizer(1e-4, 100000, 1000)
        trainer = Trainer(tf.distribute.get_strategy(), model, optimizer, loss_fn,
                          TrainingConfig(num_train_steps=100000, output_dir=workdir,
                                         jit_compile=self.jit_compile))
        self.input_files = write_pretraining_records(case, workdir)
        self.dataset_fn = lambda: pretraining_dataset(
            self.input_files, case.batch_size, case.seq_length, MAX_PREDICTIONS_PER_SEQ,
            is_training=True, seed=0)
        iterator = iter(self.dataset_fn())
        step = trainer.make_step()
        return lambda: {k: float(v) for k, v in step(iterator).items()}

    def input_pipeline_rate(self, batches: int = 50) -> float:
        """Batches per second of the training input pipeline alone (after its first batch)."""
        import time
        iterator = iter(self.dataset_fn())
        next(iterator)
        start = time.perf_counter()
        for _ in range(batches):
            next(iterator)
        return batches / (time.perf_counter() - start)


def write_pretraining_records(case: Case, workdir: str, num_batches: int = 8) -> list[str]:
    """Writes `num_batches` batches of synthetic pretraining examples as a TFRecord file."""
    import tensorflow as tf

    def feature(values: np.ndarray) -> tf.train.Feature:
        if values.dtype.kind == "f":
            return tf.train.Feature(float_list=tf.train.FloatList(value=values.tolist()))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values.tolist()))

    path = os.path.join(workdir, f"pretraining_T{case.seq_length}.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for seed in range(num_batches):
            batch = synthetic_batch(case, seed)
            for i in range(case.batch_size):
                example = tf.train.Example(features=tf.train.Features(
                    feature={k: feature(v[i]) for k, v in batch.items()}))
                writer.write(example.SerializeToString())
    return [path]


class Transformers:
    """Hugging Face transformers' `BertModel` / `BertForPreTraining` on PyTorch (the GPU when
    PyTorch sees one, else the CPU), with its default (SDPA) attention and the fused tanh GELU
    ("gelu_pytorch_tanh")."""

    name = "transformers (PyTorch)"
    framework = "torch"

    def build(self, case: Case, workdir: str) -> Callable[[], object]:
        import torch
        import transformers
        config = transformers.BertConfig(
            vocab_size=VOCAB_SIZE, hidden_size=case.model.hidden_size,
            num_hidden_layers=case.model.num_layers, num_attention_heads=case.model.num_heads,
            intermediate_size=case.model.intermediate_size, hidden_act="gelu_pytorch_tanh",
            type_vocab_size=2, layer_norm_eps=1e-12)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        batch = {k: torch.from_numpy(v).to(device) for k, v in synthetic_batch(case).items()}
        inputs = dict(input_ids=batch["input_ids"].long(),
                      attention_mask=batch["input_mask"].long(),
                      token_type_ids=batch["segment_ids"].long())
        autocast = lambda: torch.autocast(  # noqa: E731
            device, dtype=torch.bfloat16, enabled=case.dtype == "bfloat16")
        if case.mode == "forward":
            model = transformers.BertModel(config, add_pooling_layer=True).to(device).eval()

            def forward():
                with torch.inference_mode(), autocast():
                    # Reading one value back waits for the call to end on a GPU too.
                    return model(**inputs).last_hidden_state[0, 0, 0].item()
            return forward
        model = transformers.BertForPreTraining(config).to(device).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, eps=1e-6)
        positions = batch["masked_lm_positions"].long()
        index = positions[:, :, None].expand(-1, -1, case.model.hidden_size)

        def train_step():
            optimizer.zero_grad(set_to_none=True)
            with autocast():
                sequence_output, pooled_output = model.bert(**inputs, return_dict=False)[:2]
                masked = torch.gather(sequence_output, 1, index)
                masked_lm_logits = model.cls.predictions(masked).float()
                next_sentence_logits = model.cls.seq_relationship(pooled_output).float()
            weights = batch["masked_lm_weights"].reshape(-1)
            nll = torch.nn.functional.cross_entropy(
                masked_lm_logits.reshape(-1, VOCAB_SIZE), batch["masked_lm_ids"].long().reshape(-1),
                reduction="none")
            loss = (nll * weights).sum() / (weights.sum() + 1e-5)
            loss = loss + torch.nn.functional.cross_entropy(
                next_sentence_logits, batch["next_sentence_labels"].long().reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            return loss.item()
        return train_step


class KerasHub:
    """KerasHub's `BertBackbone` (TensorFlow backend) in a `tf.function`; for training, its
    `MaskedLMHead` tied to the token embedding, a dense next-sentence head and Keras' AdamW."""

    name = "KerasHub (TensorFlow)"
    framework = "tensorflow"

    def build(self, case: Case, workdir: str) -> Callable[[], object]:
        import keras
        import keras_hub
        import tensorflow as tf
        keras.mixed_precision.set_dtype_policy(
            "mixed_bfloat16" if case.dtype == "bfloat16" else "float32")
        backbone = keras_hub.models.BertBackbone(
            vocabulary_size=VOCAB_SIZE, num_layers=case.model.num_layers,
            num_heads=case.model.num_heads, hidden_dim=case.model.hidden_size,
            intermediate_dim=case.model.intermediate_size)
        batch = {k: tf.constant(v) for k, v in synthetic_batch(case).items()}
        inputs = {"token_ids": batch["input_ids"], "segment_ids": batch["segment_ids"],
                  "padding_mask": batch["input_mask"]}
        if case.mode == "forward":
            forward = tf.function(lambda x: backbone(x, training=False)["sequence_output"])
            # Reading one value back waits for the call to end on an accelerator too.
            return lambda: forward(inputs)[0, 0, 0].numpy()
        masked_lm = keras_hub.layers.MaskedLMHead(
            token_embedding=backbone.token_embedding, intermediate_activation="gelu",
            layer_norm_epsilon=1e-12)
        next_sentence = keras.layers.Dense(2)
        masked_lm.build((None, None, case.model.hidden_size), (None, MAX_PREDICTIONS_PER_SEQ))
        next_sentence.build((None, case.model.hidden_size))
        optimizer = keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6,
                                           global_clipnorm=1.0)
        mlm_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        nsp_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        @tf.function
        def train_step():
            with tf.GradientTape() as tape:
                outputs = backbone(inputs, training=True)
                logits = masked_lm(outputs["sequence_output"],
                                   mask_positions=batch["masked_lm_positions"])
                loss = mlm_loss(batch["masked_lm_ids"], tf.cast(logits, tf.float32),
                                sample_weight=batch["masked_lm_weights"])
                loss += nsp_loss(batch["next_sentence_labels"],
                                 tf.cast(next_sentence(outputs["pooled_output"]), tf.float32))
            variables = (backbone.trainable_variables + masked_lm.trainable_variables
                         + next_sentence.trainable_variables)
            optimizer.apply(tape.gradient(loss, variables), variables)
            return loss
        return lambda: float(train_step())


class ThisProjectXla(ThisProject):
    """This project with XLA on for every call (forward pass and training step)."""

    name = "this project, XLA"
    jit_compile = True


class ThisProjectNoXla(ThisProject):
    """This project with XLA off for every call: TensorFlow's graph and its oneDNN kernels."""

    name = "this project, no XLA"
    jit_compile = False


CONTENDERS = {"this_project": ThisProject, "transformers": Transformers, "keras_hub": KerasHub,
              "this_project_xla": ThisProjectXla, "this_project_no_xla": ThisProjectNoXla}
