"""The name table between the original TF1 checkpoints and this project's Keras variables.

Data, not code: each row pairs an original variable name with the Keras variable path. `{i}` stands
for the Transformer layer index. `tf1_name_map(model)` applies the table to a model and checks that
every model variable is mapped exactly once.
"""
import re

import keras

from modeling.checkpoints.errors import NameTableError

ENCODER_TABLE = (
    ("bert/embeddings/word_embeddings", "embeddings/word_embeddings"),
    ("bert/embeddings/token_type_embeddings", "embeddings/token_type_embeddings"),
    ("bert/embeddings/position_embeddings", "embeddings/position_embeddings"),
    ("bert/embeddings/LayerNorm/gamma", "embeddings/layer_norm/gamma"),
    ("bert/embeddings/LayerNorm/beta", "embeddings/layer_norm/beta"),
    ("bert/encoder/layer_{i}/attention/self/query/kernel", "layer_{i}/attention/query/kernel"),
    ("bert/encoder/layer_{i}/attention/self/query/bias", "layer_{i}/attention/query/bias"),
    ("bert/encoder/layer_{i}/attention/self/key/kernel", "layer_{i}/attention/key/kernel"),
    ("bert/encoder/layer_{i}/attention/self/key/bias", "layer_{i}/attention/key/bias"),
    ("bert/encoder/layer_{i}/attention/self/value/kernel", "layer_{i}/attention/value/kernel"),
    ("bert/encoder/layer_{i}/attention/self/value/bias", "layer_{i}/attention/value/bias"),
    ("bert/encoder/layer_{i}/attention/output/dense/kernel", "layer_{i}/attention_output/kernel"),
    ("bert/encoder/layer_{i}/attention/output/dense/bias", "layer_{i}/attention_output/bias"),
    ("bert/encoder/layer_{i}/attention/output/LayerNorm/gamma",
     "layer_{i}/attention_layer_norm/gamma"),
    ("bert/encoder/layer_{i}/attention/output/LayerNorm/beta",
     "layer_{i}/attention_layer_norm/beta"),
    ("bert/encoder/layer_{i}/intermediate/dense/kernel", "layer_{i}/intermediate/kernel"),
    ("bert/encoder/layer_{i}/intermediate/dense/bias", "layer_{i}/intermediate/bias"),
    ("bert/encoder/layer_{i}/output/dense/kernel", "layer_{i}/output/kernel"),
    ("bert/encoder/layer_{i}/output/dense/bias", "layer_{i}/output/bias"),
    ("bert/encoder/layer_{i}/output/LayerNorm/gamma", "layer_{i}/output_layer_norm/gamma"),
    ("bert/encoder/layer_{i}/output/LayerNorm/beta", "layer_{i}/output_layer_norm/beta"),
    ("bert/pooler/dense/kernel", "pooler/dense/kernel"),
    ("bert/pooler/dense/bias", "pooler/dense/bias"),
)

HEAD_TABLE = (
    # Pretraining heads.
    ("cls/predictions/transform/dense/kernel", "masked_lm/transform/kernel"),
    ("cls/predictions/transform/dense/bias", "masked_lm/transform/bias"),
    ("cls/predictions/transform/LayerNorm/gamma", "masked_lm/layer_norm/gamma"),
    ("cls/predictions/transform/LayerNorm/beta", "masked_lm/layer_norm/beta"),
    ("cls/predictions/output_bias", "masked_lm/output_bias"),
    ("cls/seq_relationship/output_weights", "next_sentence/output_weights"),
    ("cls/seq_relationship/output_bias", "next_sentence/output_bias"),
    # run_classifier.py head, at the root scope as the original writes it.
    ("output_weights", "classifier/output_weights"),
    ("output_bias", "classifier/output_bias"),
    # run_squad.py head.
    ("cls/squad/output_weights", "squad/output_weights"),
    ("cls/squad/output_bias", "squad/output_bias"),
    # Heads the original lacks (SWAG, CoNLL-2003), named in its style.
    ("cls/multiple_choice/output_weights", "multiple_choice/output_weights"),
    ("cls/token_classifier/output_weights", "token_classifier/output_weights"),
    ("cls/token_classifier/output_bias", "token_classifier/output_bias"),
)

# Names a training run adds next to the weights; never model variables.
_OPTIMIZER_STATE = re.compile(
    r"(/adam_[mv]$|^global_step$|/(Adam|Adam_1|Momentum|RMSProp|Adagrad|LAMB|lamb_[mv])(/|$)"
    r"|_CHECKPOINTABLE_OBJECT_GRAPH|^_)")


def is_optimizer_state(name: str) -> bool:
    """True for the optimizer slots and step counters a training checkpoint carries."""
    return bool(_OPTIMIZER_STATE.search(name))


def _keras_to_tf1_patterns():
    rows = ENCODER_TABLE + HEAD_TABLE
    return [(re.compile("^" + re.escape(k).replace(r"\{i\}", r"(\d+)") + "$"), t) for t, k in rows]


_PATTERNS = _keras_to_tf1_patterns()


def tf1_name(keras_path: str) -> str:
    """The original checkpoint name of a Keras variable path.

    Raises:
        NameTableError: the table has no row for the path.
    """
    for pattern, template in _PATTERNS:
        match = pattern.match(keras_path)
        if match:
            return template.replace("{i}", match.group(1)) if match.groups() else template
    raise NameTableError(f"no checkpoint name for the variable {keras_path!r}")


def tf1_name_map(model: keras.Model) -> dict[str, keras.Variable]:
    """{original name: variable} for every variable of a built model, each mapped exactly once.

    Raises:
        NameTableError: a variable the table lacks, or two variables on one name.
    """
    mapping: dict[str, keras.Variable] = {}
    for variable in model.weights:
        name = tf1_name(variable.path)
        if name in mapping:
            raise NameTableError(f"variables {mapping[name].path!r} and {variable.path!r} both map to "
                             f"the checkpoint name {name!r}")
        mapping[name] = variable
    return mapping
