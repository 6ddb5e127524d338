"""TF-Hub / Kaggle BERT encoder SavedModels, read as data.

A TF-Hub BERT encoder (`bert_en_uncased_L-12_H-768_A-12`, the small BERTs) is Model Garden's
`BertEncoder` exported by `official/nlp/tools/export_tfhub_lib.py`: its variables by their Keras
names (the rows of `modeling.checkpoints.model_garden.names`), its config in `keras_metadata.pb`,
the tokenizer's casing in a `do_lower_case` variable and, exported `with_mlm`, a masked-LM head
under an `mlm` object over the same encoder.

A SavedModel is a program: `tf.saved_model.load` restores its functions and runs the initializers
of its resources, so an untrusted SavedModel is untrusted code. It is never loaded here: the
object graph of `saved_model.pb` says which object holds which variable and names them, the
checkpoint `variables/variables` holds their values, and `keras_metadata.pb` is parsed as the
protobuf message it is. Nothing the SavedModel holds runs.
"""
from __future__ import annotations

import dataclasses
import json
import os

from google.protobuf import message
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import (saved_model_pb2, saved_object_graph_pb2,
                                      trackable_object_graph_pb2)
from tensorflow.python.keras.protobuf import saved_metadata_pb2

from modeling.checkpoints.errors import CorruptCheckpointError, UnsupportedCheckpointError
from modeling.checkpoints.model_garden.checkpoint import OBJECT_GRAPH_KEY, check_activation
from modeling.checkpoints.model_garden.config import KERAS_ACTIVATIONS, bert_config_from_keras
from modeling.checkpoints.model_garden.names import (HUB_MASKED_LM_NAMES, encoder_rows,
                                                     to_original)
from modeling.checkpoints.tf1.checkpoint import (assign_tf1_values, open_checkpoint,
                                                 readable_checkpoint)
from modeling.config import BertConfig

SAVED_MODEL_FILE = "saved_model.pb"
KERAS_METADATA_FILE = "keras_metadata.pb"
VARIABLES_PREFIX = os.path.join("variables", "variables")
# Children of the SavedModel's root: the masked-LM model, the tokenizer's casing.
MASKED_LM_OBJECT, LOWER_CASE_OBJECT = "mlm", "do_lower_case"
# The name of the casing variable where the root does not name it.
LOWER_CASE_VARIABLE = "Variable"


def is_tf_hub_folder(path: str) -> bool:
    """True for a SavedModel folder (a TF-Hub encoder is one)."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, SAVED_MODEL_FILE))


@dataclasses.dataclass(frozen=True)
class SavedObjects:
    """A SavedModel's objects as data: its object graph and the checkpoint of its variables."""

    prefix: str
    graph: saved_object_graph_pb2.SavedObjectGraph
    reader: tf.train.CheckpointReader
    # The checkpoint key of the value of every variable (by node id) that the checkpoint holds.
    keys: dict[int, str]

    def child(self, node_id: int, name: str) -> int | None:
        """The node id of an object's child `name`; None if it has none."""
        return next((child.node_id for child in self.graph.nodes[node_id].children
                     if child.local_name == name), None)

    def variables(self, node_id: int, skip: tuple[str, ...] = ()) -> dict[int, str]:
        """{node id: name} of an object's variables that have a value: its `variables` list, as
        Keras saves a layer, else every variable reachable through its children but `skip`."""
        listed = self.child(node_id, "variables")
        if listed is not None:
            ids = [child.node_id for child in self.graph.nodes[listed].children]
        else:
            ids, stack = {node_id}, [node_id]
            while stack:
                for child in self.graph.nodes[stack.pop()].children:
                    if child.local_name not in skip and child.node_id not in ids:
                        ids.add(child.node_id)
                        stack.append(child.node_id)
        return {i: self.graph.nodes[i].variable.name.split(":")[0] for i in sorted(ids)
                if i in self.keys}

    def value(self, node_id: int) -> np.ndarray:
        """The value of a variable, from the checkpoint."""
        with readable_checkpoint(self.prefix):
            return self.reader.get_tensor(self.keys[node_id])


def _parse(proto, data: bytes, source: str):
    """`proto` parsed from `data`; CorruptCheckpointError, naming `source`, if it cannot be."""
    try:
        proto.ParseFromString(data)
    except message.DecodeError as error:
        raise CorruptCheckpointError(f"{source} cannot be read: {error}") from None
    return proto


def read_saved_objects(folder: str) -> SavedObjects:
    """The object graph of a SavedModel and the checkpoint of its variables, read as data.

    Raises:
        CorruptCheckpointError: `saved_model.pb` or the variables cannot be read.
        UnsupportedCheckpointError: it has no object graph (a TF1 SavedModel) or no variables.
    """
    path = os.path.join(folder, SAVED_MODEL_FILE)
    with open(path, "rb") as f:
        saved_model = _parse(saved_model_pb2.SavedModel(), f.read(), path)
    if not saved_model.meta_graphs or not saved_model.meta_graphs[0].HasField("object_graph_def"):
        raise UnsupportedCheckpointError(
            f"{path}: a TF1 SavedModel (no object graph), not a TF2 BERT encoder")
    graph = saved_model.meta_graphs[0].object_graph_def
    prefix = os.path.join(folder, VARIABLES_PREFIX)
    if not os.path.isfile(prefix + ".index"):
        raise UnsupportedCheckpointError(f"{folder}: no {VARIABLES_PREFIX}.index: no variables")
    reader = open_checkpoint(prefix)
    if not reader.has_tensor(OBJECT_GRAPH_KEY):
        raise UnsupportedCheckpointError(f"{prefix}: a name-based checkpoint, no object graph")
    with readable_checkpoint(prefix):
        checkpoint = _parse(trackable_object_graph_pb2.TrackableObjectGraph(),
                            reader.get_tensor(OBJECT_GRAPH_KEY), prefix)
    keys = {node_id: key for node_id, key in _checkpoint_keys(graph, checkpoint).items()
            if graph.nodes[node_id].WhichOneof("kind") == "variable" and reader.has_tensor(key)}
    return SavedObjects(prefix, graph, reader, keys)


def _checkpoint_keys(graph: saved_object_graph_pb2.SavedObjectGraph,
                     checkpoint: trackable_object_graph_pb2.TrackableObjectGraph
                     ) -> dict[int, str]:
    """{node id in `graph`: checkpoint key of its value}, the object graph and the checkpoint's
    matched child by child from the root, as restoring a SavedModel matches them."""
    keys, seen, stack = {}, {0}, [(0, 0)]
    while stack:
        node_id, checkpoint_id = stack.pop()
        for attribute in checkpoint.nodes[checkpoint_id].attributes:
            if attribute.name == "VARIABLE_VALUE":
                keys[node_id] = attribute.checkpoint_key
        checkpoint_children = {child.local_name: child.node_id
                               for child in checkpoint.nodes[checkpoint_id].children}
        for child in graph.nodes[node_id].children:
            if child.local_name in checkpoint_children and child.node_id not in seen:
                seen.add(child.node_id)
                stack.append((child.node_id, checkpoint_children[child.local_name]))
    return keys


def read_tf_hub_values(folder: str, config: BertConfig | None = None
                       ) -> tuple[BertConfig, dict[str, np.ndarray], bool | None]:
    """(config, {original name: array}, do_lower_case) of a TF-Hub BERT encoder SavedModel, with
    its masked-LM head where it was exported with one (`export_tfhub_lib` `with_mlm`: an `mlm`
    object over the same encoder). Nothing of the SavedModel runs.

    Args:
        folder: the SavedModel.
        config: the model's config, used where the SavedModel has no `keras_metadata.pb` (older
            releases); the one in `keras_metadata.pb` comes first.

    Raises:
        UnsupportedCheckpointError: its config is missing or not representable, or variables
            are left over or missing (named).
        CorruptCheckpointError: its files cannot be read.
    """
    if os.path.isfile(os.path.join(folder, KERAS_METADATA_FILE)) or config is None:
        config = bert_config_from_keras(_saved_encoder_config(folder), folder)
    saved = read_saved_objects(folder)
    encoder = saved.variables(0, skip=(MASKED_LM_OBJECT,))
    lower_case = saved.child(0, LOWER_CASE_OBJECT)
    variables = {name: i for i, name in encoder.items() if i != lower_case}
    unnamed = variables.pop(LOWER_CASE_VARIABLE, None)
    lower_case = lower_case if lower_case in saved.keys else unnamed
    values, missing = {}, []
    for tf1, _, name, reshape in encoder_rows(config.num_hidden_layers):
        if name in variables:
            values[tf1] = to_original(saved.value(variables.pop(name)), reshape)
        else:
            missing.append(name)
    mlm = saved.child(0, MASKED_LM_OBJECT)
    # The masked-LM's own variables; its table is the encoder's word embeddings.
    head = {} if mlm is None else {name: i for i, name in saved.variables(mlm).items()
                                   if i not in encoder}
    if head:
        for tf1, saved_name in HUB_MASKED_LM_NAMES.items():
            name = next((n for n in head if n == saved_name or n.endswith("/" + saved_name)),
                        None)
            if name is None:
                missing.append(f"mlm {tf1}")
            else:
                values[tf1] = saved.value(head.pop(name))
        variables.update({f"mlm {name}": i for name, i in head.items()})
    if missing or variables:
        raise UnsupportedCheckpointError(
            f"{folder}: not a BERT encoder of its config: missing {', '.join(missing) or '-'}; "
            f"left over {', '.join(sorted(variables)) or '-'}")
    return config, values, None if lower_case is None else bool(saved.value(lower_case))


def _saved_encoder_config(folder: str) -> dict:
    """The Keras config of the `BertEncoder` in a SavedModel's `keras_metadata.pb`, after checking
    every LayerNorm epsilon and block of the model against what this project computes."""
    path = os.path.join(folder, KERAS_METADATA_FILE)
    if not os.path.isfile(path):
        raise UnsupportedCheckpointError(
            f"{folder}: no {KERAS_METADATA_FILE}, so its config cannot be read; pass "
            "--bert_config_file (the release's bert_config.json)")
    metadata = _keras_metadata(path)
    encoders = [m["config"] for m in metadata if m.get("class_name") in
                ("BertEncoder", "Text>BertEncoder") and "vocab_size" in m.get("config", {})]
    if not encoders:
        raise UnsupportedCheckpointError(f"{path}: holds no Model Garden BertEncoder")
    for m in metadata:
        config = m.get("config") or {}
        epsilon = config.get("epsilon", config.get("norm_epsilon"))
        if m.get("class_name") in ("LayerNormalization", "Text>TransformerEncoderBlock") \
                and epsilon is not None and epsilon != 1e-12:
            raise UnsupportedCheckpointError(
                f"{path}: {config.get('name')} has LayerNorm epsilon {epsilon}; this project "
                "computes 1e-12")
        if m.get("class_name") == "Text>TransformerEncoderBlock" and config.get("norm_first"):
            raise UnsupportedCheckpointError(f"{path}: {config.get('name')} is pre-LayerNorm")
        if m.get("class_name") == "Text>TransformerEncoderBlock" and config.get(
                "inner_activation") not in (None, *KERAS_ACTIVATIONS):
            raise UnsupportedCheckpointError(
                f"{path}: activation {config.get('inner_activation')!r} is not supported")
    return encoders[0]


def _keras_metadata(path: str) -> list[dict]:
    """The Keras metadata (a JSON object) of every node of a `keras_metadata.pb`."""
    with open(path, "rb") as f:
        metadata = _parse(saved_metadata_pb2.SavedMetadata(), f.read(), path)
    return [json.loads(node.metadata) for node in metadata.nodes if node.metadata]


def load_tf_hub_checkpoint(model, folder: str) -> list[str]:
    """Assigns a TF-Hub BERT encoder SavedModel to a built model, all or nothing; nothing of the
    SavedModel runs."""
    config, values, _ = read_tf_hub_values(folder, model.config)
    check_activation(config, model, folder)
    return assign_tf1_values(model, values, folder)
