"""What the intermediate distillation losses read: the hidden states and attention
distributions of paired layers of a student in training and of its frozen teacher.

`LayerPairs` says which of the student's layers is compared with which of the teacher's.
`DistillationStudent` wraps a task model: its outputs are the task model's, and the student's
hidden states at the hidden-state loss's layers, projected to the teacher's width where the two
differ (TinyBERT's learned W_h, Jiao et al. 2020, eq. 7; used in training only, not saved with the
student), and its attention distributions at the attention loss's layers (MiniLM's, Wang et al.
2020). `teacher_intermediates` gives the teacher's at the layers paired with them. The losses are
`modeling.losses.hidden_state_loss` and `attention_distribution_loss`.
"""
from __future__ import annotations

import dataclasses

import keras
import tensorflow as tf

from modeling.layers.attention import attention_mask_from_input_mask
from modeling.layers.initializers import weight_initializer
from modeling.models.encoder import INPUT_MASK

HIDDEN_STATES = "hidden_states"
ATTENTION_PROBABILITIES = "attention_probabilities"


@dataclasses.dataclass(frozen=True)
class LayerPairs:
    """(student, teacher) pairs of layers the intermediate losses compare.

    Attributes:
        hidden: hidden states: 0 is the embeddings' output, i the output of layer i - 1 (the
            numbering of Hugging Face's `hidden_states`).
        attention: attention distributions of layers numbered from 0 (`layer_i`).
    """

    hidden: tuple[tuple[int, int], ...] = ()
    attention: tuple[tuple[int, int], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.hidden or self.attention)


def hidden_states(encoder_outputs: dict) -> list[tf.Tensor]:
    """The embeddings' output and every layer's, float [B, T, H] each (`LayerPairs.hidden`)."""
    return [encoder_outputs["embedding_output"], *encoder_outputs["encoder_outputs"]]


def attention_probabilities(encoder: keras.Model, encoder_outputs: dict, layers,
                            input_mask: tf.Tensor) -> list[tf.Tensor]:
    """The attention distributions of `layers` of `encoder`, float32 [B, N, T, T] each, from
    the inputs of those layers in its outputs."""
    states = hidden_states(encoder_outputs)
    attention_mask = attention_mask_from_input_mask(input_mask)
    return [encoder.get_layer(f"layer_{layer}").attention.probabilities(states[layer],
                                                                        attention_mask)
            for layer in layers]


class DistillationStudent(keras.Model):
    """A task model in training, with what the intermediate losses read of it.

    Args:
        student: the task model (`modeling.task_models`), saved alone after training.
        pairs: the layers compared.
        teacher_hidden_size: the teacher's H; a student of another width is projected to it.
    """

    def __init__(self, student: keras.Model, pairs: LayerPairs, teacher_hidden_size: int,
                 **kwargs):
        super().__init__(**{"name": "distillation_student", **kwargs})
        self.student = student
        # The student's encoder and head under a task model's names as well: a training
        # checkpoint (`model/encoder/...`, `model/head/...`) then restores into the student
        # alone, as a task script without --do_train reads the newest one of an output folder.
        self.encoder, self.head = student.encoder, student.head
        self.pairs = pairs
        self.projection = None
        width = student.config.hidden_size
        if pairs.hidden and width != teacher_hidden_size:
            self.projection = keras.layers.Dense(
                teacher_hidden_size, use_bias=False, name="hidden_projection",
                kernel_initializer=weight_initializer(student.config.initializer_range))
            self.projection.build((None, width))

    @property
    def config(self):
        return self.student.config

    def build(self, input_shape=None):
        """Nothing of its own to build: the projection is built at construction, the student
        as a task model builds itself."""
        del input_shape

    def call(self, inputs, training=None):
        encoder_outputs = self.student.encode(inputs, training)
        outputs = dict(self.student.outputs_of(encoder_outputs, training))
        states = hidden_states(encoder_outputs)
        hidden = [states[layer] for layer, _ in self.pairs.hidden]
        outputs[HIDDEN_STATES] = [self.projection(state) for state in hidden] \
            if self.projection is not None else hidden
        outputs[ATTENTION_PROBABILITIES] = attention_probabilities(
            self.student.encoder, encoder_outputs, [layer for layer, _ in self.pairs.attention],
            inputs[INPUT_MASK])
        return outputs


def student_of(model: keras.Model) -> keras.Model:
    """The task model of a `DistillationStudent`, or `model` itself."""
    return model.student if isinstance(model, DistillationStudent) else model


def teacher_intermediates(teacher: keras.Model, inputs: dict, pairs: LayerPairs) -> dict:
    """The teacher's hidden states and attention distributions at the layers `pairs` give it
    (`DistillationStudent`'s keys), computed without dropout."""
    encoder_outputs = teacher.encode(inputs, training=False)
    states = hidden_states(encoder_outputs)
    return {HIDDEN_STATES: [states[layer] for _, layer in pairs.hidden],
            ATTENTION_PROBABILITIES: attention_probabilities(
                teacher.encoder, encoder_outputs, [layer for _, layer in pairs.attention],
                inputs[INPUT_MASK])}
