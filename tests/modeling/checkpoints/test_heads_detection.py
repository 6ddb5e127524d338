import json

import pytest

from modeling.checkpoints import SPEC_FILE, UnsupportedCheckpointError, write_model_spec
from modeling.checkpoints.model_specs import (HEAD_NAMES, ModelSpec, build_model, detect_model_spec,
                                              model_spec, read_model_spec)
from modeling.checkpoints.names import tf1_name_map
from modeling.config import BertConfig
from tests.support.modeling_fixtures import tiny_dir


def _config():
    return BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=16, max_position_embeddings=16, type_vocab_size=2)


def _spec(head):
    return ModelSpec(head, 4 if head in ("classifier", "token_classifier") else None)


def _original_shapes(fixtures_dir):
    variables = json.loads((tiny_dir(fixtures_dir) / "variables.json").read_text())
    return {key: {name: tuple(shape) for name, shape in rows} for key, rows in variables.items()}


def test_heads_of_the_original_checkpoints(fixtures_dir):
    shapes = _original_shapes(fixtures_dir)
    assert detect_model_spec(shapes["bert_model.ckpt"]) == ModelSpec("pretraining")
    assert detect_model_spec(shapes["classifier/model.ckpt"]) == ModelSpec("classifier", 3)
    assert detect_model_spec(shapes["squad/model.ckpt"]) == ModelSpec("squad")
    encoder_only = {n: s for n, s in shapes["squad/model.ckpt"].items() if n.startswith("bert/")}
    assert detect_model_spec(encoder_only) == ModelSpec("encoder")


def test_optimizer_state_is_not_a_head(fixtures_dir):
    shapes = dict(_original_shapes(fixtures_dir)["squad/model.ckpt"])
    shapes.update({"global_step": (), "cls/squad/output_weights/adam_m": (2, 128),
                   "bert/pooler/dense/kernel/adam_v": (128, 128)})
    assert detect_model_spec(shapes) == ModelSpec("squad")


@pytest.mark.parametrize("head", HEAD_NAMES)
def test_every_model_is_detected_from_its_own_variables(head):
    model = build_model(_config(), _spec(head))
    assert model_spec(model) == _spec(head)
    shapes = {name: tuple(v.shape) for name, v in tf1_name_map(model).items()}
    assert detect_model_spec(shapes) == _spec(head)


def test_unknown_variables_are_named():
    shapes = {name: tuple(v.shape)
              for name, v in tf1_name_map(build_model(_config(), _spec("squad"))).items()}
    with pytest.raises(UnsupportedCheckpointError, match="cls/ner/output_weights"):
        detect_model_spec({**shapes, "cls/ner/output_weights": (5, 8)})
    with pytest.raises(UnsupportedCheckpointError, match="bert/encoder/layer_0/adapter/kernel"):
        detect_model_spec({**shapes, "bert/encoder/layer_0/adapter/kernel": (8, 8)})


def test_two_heads_and_incomplete_heads_are_refused():
    shapes = {name: tuple(v.shape)
              for name, v in tf1_name_map(build_model(_config(), _spec("squad"))).items()}
    with pytest.raises(UnsupportedCheckpointError, match="more than one head: classifier, squad"):
        detect_model_spec({**shapes, "output_weights": (3, 8), "output_bias": (3,)})
    del shapes["cls/squad/output_bias"]
    with pytest.raises(UnsupportedCheckpointError, match="missing cls/squad/output_bias"):
        detect_model_spec(shapes)


def test_spec_checks_its_label_count():
    with pytest.raises(ValueError, match="needs num_labels"):
        ModelSpec("classifier")
    with pytest.raises(ValueError, match="takes no num_labels"):
        ModelSpec("squad", 2)
    with pytest.raises(ValueError, match="unknown head 'ner'"):
        ModelSpec("ner")
    assert ModelSpec.from_dict(ModelSpec("token_classifier", 9).to_dict()) == ModelSpec(
        "token_classifier", 9)


def test_model_spec_file_has_one_schema_and_is_read_back(tmp_path):
    write_model_spec(str(tmp_path), ModelSpec("classifier", 3))
    assert json.loads((tmp_path / SPEC_FILE).read_text()) == {"head": "classifier",
                                                              "num_labels": 3}
    assert read_model_spec(str(tmp_path)) == (ModelSpec("classifier", 3), None, None, None)
    write_model_spec(str(tmp_path), ModelSpec("squad"), do_lower_case=False)
    assert json.loads((tmp_path / SPEC_FILE).read_text()) == {
        "head": "squad", "num_labels": None, "do_lower_case": False}
    assert read_model_spec(str(tmp_path)) == (ModelSpec("squad"), False, None, None)
    # The label names by id, one per label of the head.
    write_model_spec(str(tmp_path), ModelSpec("classifier", 2), labels=["0", "1"])
    assert json.loads((tmp_path / SPEC_FILE).read_text())["labels"] == ["0", "1"]
    assert read_model_spec(str(tmp_path)).labels == ("0", "1")
    with pytest.raises(ValueError, match="3 label names for a head of 2 labels"):
        write_model_spec(str(tmp_path), ModelSpec("classifier", 2), labels=["a", "b", "c"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [SPEC_FILE]
    assert read_model_spec(str(tmp_path / "absent")) is None


def test_the_masked_lm_alone_is_its_own_head_and_half_a_next_sentence_head_is_refused():
    shapes = {name: tuple(v.shape)
              for name, v in tf1_name_map(build_model(_config(), _spec("pretraining"))).items()}
    assert detect_model_spec(shapes) == ModelSpec("pretraining")
    masked_lm_only = {k: v for k, v in shapes.items() if not k.startswith("cls/seq_relationship")}
    assert detect_model_spec(masked_lm_only) == ModelSpec("masked_lm")
    del shapes["cls/seq_relationship/output_bias"]
    with pytest.raises(UnsupportedCheckpointError,
                       match="the pretraining head is incomplete; missing "
                             "cls/seq_relationship/output_bias"):
        detect_model_spec(shapes)
