import json
import logging

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from data.tokenization import FullTokenizer
from modeling.checkpoints import (CheckpointMismatchError, LoadedModel, ModelSpec,
                                  UnsupportedCheckpointError, build_model, load_checkpoint,
                                  read_model, write_model)
from modeling.checkpoints.formats import HF
from modeling.checkpoints.hf.checkpoint import read_hf_checkpoint
from modeling.checkpoints.hf.config import ARCHITECTURES
from modeling.checkpoints.hf.names import hf_rows, to_hf_arrays
from modeling.checkpoints.names import tf1_name_map
from modeling.checkpoints.tf1.checkpoint import assign_tf1_values, load_tf1_checkpoint
from modeling.config import BertConfig
from modeling.models.encoder import BertEncoder
from tests.support.dependencies import require
from tests.support.hf_reference import gather_positions, load_hf_model, log_softmax, run_hf
from tests.support.modeling_fixtures import golden, tiny_config, tiny_dir

ORIGINAL_PREFIXES = {"pretraining": "bert_model.ckpt", "classifier": "classifier/model.ckpt",
                     "squad": "squad/model.ckpt"}
POOLER = {"bert.pooler.dense.weight", "bert.pooler.dense.bias"}
SMALL = dict(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=32, max_position_embeddings=24, type_vocab_size=2)


def _original(fixtures_dir, uncased_vocab, head) -> LoadedModel:
    if head == "encoder":
        model = BertEncoder(tiny_config(fixtures_dir))
        load_tf1_checkpoint(model, str(tiny_dir(fixtures_dir) / "bert_model.ckpt"))
        return LoadedModel(model, ModelSpec("encoder"), str(uncased_vocab), True)
    return read_model(str(tiny_dir(fixtures_dir) / ORIGINAL_PREFIXES[head]), "tf1",
                      str(tiny_dir(fixtures_dir) / "bert_config.json"), str(uncased_vocab))


def _write_vocab(path, size):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += [f"w{i}" for i in range(size - len(tokens))]
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")


def _inputs(batch=3, length=12, vocab_size=50, seed=0):
    rng = np.random.default_rng(seed)
    input_mask = np.ones([batch, length], np.int32)
    input_mask[1, length - 4:] = 0
    input_mask[2, length // 2:] = 0
    return {"input_ids": rng.integers(0, vocab_size, [batch, length]).astype(np.int32) * input_mask,
            "input_mask": input_mask,
            "segment_ids": (np.arange(length)[None, :] >= length // 3).astype(np.int32)
            * input_mask,
            "masked_lm_positions": rng.integers(0, length // 2, [batch, 4]).astype(np.int32)}


# Outputs with one value per token ([B, T] or [B, T, ...]), besides the [B, T, K] token logits.
PER_TOKEN = ("sequence_output", "start_logits", "end_logits")


def _hf_outputs(head, hf):
    """The transformers outputs that correspond to this project's outputs, by name."""
    if head == "pretraining":
        return {"sequence_output": hf["hidden_states"][-1],
                "next_sentence_logits": hf["seq_relationship_logits"]}
    if head == "masked_lm":
        return {"sequence_output": hf["hidden_states"][-1]}
    if head == "encoder":
        return {"sequence_output": hf["last_hidden_state"], "pooled_output": hf["pooler_output"]}
    if head == "squad":
        return {"start_logits": hf["start_logits"], "end_logits": hf["end_logits"]}
    return {"logits": hf["logits"]}


def _check_against_project(loaded, hf, inputs):
    keys = ["input_ids", "input_mask", "segment_ids"]
    with_masked_lm = loaded.spec.head in ("pretraining", "masked_lm")
    keys += ["masked_lm_positions"] if with_masked_lm else []
    ours = dict(loaded.model({k: np.asarray(inputs[k]) for k in keys}, training=False))
    if with_masked_lm:  # the pretrainer's outputs are its heads'; the sequence output its encoder's
        ours.update(loaded.model.encoder({k: np.asarray(inputs[k]) for k in keys[:3]},
                                         training=False))
    real = np.asarray(inputs["input_mask"]) != 0
    for key, value in _hf_outputs(loaded.spec.head, hf).items():
        value, our_value = np.asarray(value), ours[key].numpy()
        if key in PER_TOKEN or our_value.ndim == 3:
            # At real tokens: the packed encoder computes nothing at padding.
            value, our_value = value[real], our_value[real]
        np.testing.assert_allclose(our_value, value, atol=1e-5, rtol=0, err_msg=key)
    if with_masked_lm:
        vocab_size = loaded.model.config.vocab_size
        np.testing.assert_allclose(
            log_softmax(ours["masked_lm_logits"].numpy().reshape(-1, vocab_size)),
            log_softmax(gather_positions(hf.get("prediction_logits", hf.get("logits")),
                                         inputs["masked_lm_positions"])),  # BertForMaskedLM's
            atol=1e-4, rtol=0)


def _check_against_original(head, hf, expected):
    if head == "pretraining":
        positions = expected["inputs/masked_lm_positions"]
        masked_lm_logits = gather_positions(hf["prediction_logits"], positions)
        np.testing.assert_allclose(log_softmax(masked_lm_logits), expected["masked_lm_log_probs"],
                                   atol=1e-4, rtol=0)
        np.testing.assert_allclose(log_softmax(hf["seq_relationship_logits"]),
                                   expected["next_sentence_log_probs"], atol=1e-5, rtol=0)
    elif head == "encoder":
        np.testing.assert_allclose(hf["pooler_output"], expected["pooled_output"], atol=1e-5)
        np.testing.assert_allclose(np.stack(hf["hidden_states"][1:]),
                                   expected["all_encoder_layers"], atol=1e-5, rtol=0)
        np.testing.assert_allclose(hf["hidden_states"][0], expected["embedding_output"], atol=1e-5)
    elif head == "classifier":
        np.testing.assert_allclose(hf["logits"], expected["classifier_logits"], atol=1e-5, rtol=0)
    else:
        np.testing.assert_allclose(hf["start_logits"], expected["squad_start_logits"], atol=1e-5)
        np.testing.assert_allclose(hf["end_logits"], expected["squad_end_logits"], atol=1e-5)
    np.testing.assert_allclose(hf["hidden_states"][-1], expected["sequence_output"], atol=1e-5,
                               rtol=0)


@pytest.mark.parametrize("head", ["encoder", "pretraining", "classifier", "squad"])
def test_original_checkpoints_run_in_transformers_as_in_the_original(
        head, fixtures_dir, uncased_vocab, tmp_path):
    loaded = _original(fixtures_dir, uncased_vocab, head)
    write_model(loaded, HF, str(tmp_path / "hf"), do_lower_case=True)
    model, info = load_hf_model(ARCHITECTURES[head], tmp_path / "hf")
    assert not info["missing_keys"] and not info["mismatched_keys"]
    # BertForQuestionAnswering has no pooler: the only weights it may leave unused.
    assert set(info["unexpected_keys"]) <= (POOLER if head == "squad" else set())
    # transformers writes back the same parameters under the same names, bit for bit.
    model.save_pretrained(str(tmp_path / "resaved"))
    ours = load_file(str(tmp_path / "hf" / "model.safetensors"))
    theirs = load_file(str(tmp_path / "resaved" / "model.safetensors"))
    assert sorted(ours) == sorted(set(theirs) | (POOLER if head == "squad" else set()))
    for name, value in theirs.items():
        np.testing.assert_array_equal(ours[name], value, err_msg=name)
    for length in (16, 64):
        expected = golden(fixtures_dir, length)
        inputs = {k: expected["inputs/" + k] for k in
                  ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")}
        hf = run_hf(model, inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"])
        _check_against_original(head, hf, expected)
        _check_against_project(loaded, hf, inputs)


def _random_hf_folder(folder, class_name, hidden_act, **config):
    """A transformers model with every parameter random (none zero or one), saved by it."""
    torch, transformers = require("torch"), require("transformers")
    torch.manual_seed(0)
    model = getattr(transformers, class_name)(
        transformers.BertConfig(**SMALL, hidden_act=hidden_act, **config))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.5)
    model.save_pretrained(str(folder))
    _write_vocab(folder / "vocab.txt", SMALL["vocab_size"])


@pytest.mark.parametrize("class_name, hf_act, our_act, written_act", [
    ("BertForPreTraining", "gelu", "gelu_exact", "gelu"),
    ("BertForMaskedLM", "gelu_new", "gelu", "gelu_new"),
    ("BertForSequenceClassification", "gelu_new", "gelu", "gelu_new"),
    ("BertForQuestionAnswering", "gelu_pytorch_tanh", "gelu", "gelu_new"),
    ("BertForTokenClassification", "relu", "relu", "relu"),
    ("BertModel", "gelu", "gelu_exact", "gelu"),
])
def test_transformers_models_come_in_and_go_out_with_their_activation(
        class_name, hf_act, our_act, written_act, tmp_path, caplog):
    extra = {"num_labels": 5} if "Classification" in class_name else {}
    _random_hf_folder(tmp_path / "in", class_name, hf_act, **extra)
    with caplog.at_level(logging.WARNING):
        loaded = read_model(str(tmp_path / "in"))
    assert loaded.model.config.hidden_act == our_act
    if class_name in ("BertForQuestionAnswering", "BertForMaskedLM"):
        assert "has no pooler" in caplog.text
    inputs = _inputs()
    hf = run_hf(load_hf_model(class_name, tmp_path / "in")[0], inputs["input_ids"],
                inputs["input_mask"], inputs["segment_ids"])
    _check_against_project(loaded, hf, inputs)
    # The other GELU would have been caught: it moves the outputs by far more than 1e-5.
    other = {"gelu": "gelu_exact", "gelu_exact": "gelu"}.get(our_act)
    if other:
        wrong = build_model(BertConfig.from_dict({**loaded.model.config.to_dict(),
                                                  "hidden_act": other}), loaded.spec)
        assign_tf1_values(wrong, {n: v.numpy() for n, v in tf1_name_map(loaded.model).items()},
                          "test")
        with pytest.raises(AssertionError):
            _check_against_project(LoadedModel(wrong, loaded.spec, "", True), hf, inputs)
    write_model(loaded, HF, str(tmp_path / "out"), do_lower_case=True)
    assert json.loads((tmp_path / "out" / "config.json").read_text())["hidden_act"] == written_act
    again = run_hf(load_hf_model(class_name, tmp_path / "out")[0], inputs["input_ids"],
                   inputs["input_mask"], inputs["segment_ids"])
    _check_against_project(loaded, again, inputs)


def _project_state(head="pretraining", **overrides):
    """A random project model and its Hugging Face state dict (numpy only)."""
    spec = ModelSpec(head, 3 if head == "classifier" else None)
    model = build_model(BertConfig(**{**SMALL, **overrides}), spec)
    values = {name: variable.numpy() for name, variable in tf1_name_map(model).items()}
    return model, to_hf_arrays(values, ARCHITECTURES[head], SMALL["num_hidden_layers"])


def _write_folder(folder, state, config=None, architectures=("BertForPreTraining",)):
    folder.mkdir()
    save_file(state, str(folder / "model.safetensors"))
    hf_config = {"model_type": "bert", "architectures": list(architectures), **SMALL}
    (folder / "config.json").write_text(json.dumps({**hf_config, **(config or {})}))


def test_older_files_legacy_names_tied_copies_and_buffers(tmp_path):
    model, state = _project_state()
    legacy = {name.replace("LayerNorm.weight", "LayerNorm.gamma")
              .replace("LayerNorm.bias", "LayerNorm.beta"): value for name, value in state.items()}
    legacy["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"]
    legacy["cls.predictions.decoder.bias"] = state["cls.predictions.bias"]
    legacy["bert.embeddings.position_ids"] = np.arange(24, dtype=np.int64)[None]
    _write_folder(tmp_path / "legacy", legacy)
    checkpoint = read_hf_checkpoint(str(tmp_path / "legacy"))
    assert checkpoint.spec == ModelSpec("pretraining")
    assert checkpoint.config.hidden_act == "gelu_exact"  # Hugging Face's default "gelu" is erf
    for name, variable in tf1_name_map(model).items():
        np.testing.assert_array_equal(checkpoint.values[name], variable.numpy())
    legacy["cls.predictions.decoder.bias"] = legacy["cls.predictions.decoder.bias"] + 1.0
    _write_folder(tmp_path / "untied", legacy)
    with pytest.raises(UnsupportedCheckpointError, match="cls.predictions.decoder.bias differs"):
        read_hf_checkpoint(str(tmp_path / "untied"))


@pytest.mark.parametrize("config, architectures, extra, message", [
    ({"model_type": "roberta"}, ("RobertaForMaskedLM",), {}, "model_type 'roberta'.*is not BERT"),
    ({"layer_norm_eps": 1e-5}, ("BertModel",), {}, "layer_norm_eps=1e-05"),
    ({"position_embedding_type": "relative_key"}, ("BertModel",), {}, "relative_key"),
    ({"hidden_act": "silu"}, ("BertModel",), {}, "hidden_act 'silu'"),
    ({}, ("BertModel",), {"adapter.weight": np.ones([2, 2], np.float32)},
     "no place in this project's model.*adapter.weight"),
    ({}, ("BertForMultipleChoice",), {"classifier.weight": np.ones([1, 16], np.float32)},
     "classifier` weights with architectures \\['BertForMultipleChoice'\\]"),
])
def test_unsupported_folders_are_refused_with_what_was_found(config, architectures, extra,
                                                              message, tmp_path):
    _, state = _project_state("encoder")
    _write_folder(tmp_path / "in", {**state, **extra}, config, architectures)
    with pytest.raises(UnsupportedCheckpointError, match=message):
        read_hf_checkpoint(str(tmp_path / "in"))


def test_load_checkpoint_reads_hugging_face_folders(tmp_path):
    model, state = _project_state("classifier", hidden_act="gelu_exact")
    _write_folder(tmp_path / "hf", state, {"hidden_act": "gelu"},
                  ("BertForSequenceClassification",))
    encoder = BertEncoder(BertConfig(**SMALL, hidden_act="gelu_exact"))
    assert load_checkpoint(encoder, str(tmp_path / "hf")) == HF
    for ours, theirs in zip(encoder.weights, model.encoder.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    tanh_encoder = BertEncoder(BertConfig(**SMALL, hidden_act="gelu"))
    with pytest.raises(CheckpointMismatchError, match="hidden_act='gelu_exact'"):
        load_checkpoint(tanh_encoder, str(tmp_path / "hf"))


def test_every_hugging_face_row_is_a_distinct_parameter():
    for head, architecture in ARCHITECTURES.items():
        model = build_model(BertConfig(**SMALL), ModelSpec(head, 2 if "class" in head else None))
        rows = hf_rows(architecture, SMALL["num_hidden_layers"])
        assert sorted(tf1 for tf1, _, _ in rows) == sorted(tf1_name_map(model))
        assert len({hf for _, hf, _ in rows}) == len(rows)


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_written_tokenizer_matches_the_original_tokenizer(do_lower_case, fixtures_dir,
                                                          uncased_vocab, tmp_path):
    transformers = require("transformers")
    write_model(_original(fixtures_dir, uncased_vocab, "encoder"), HF, str(tmp_path / "hf"),
                do_lower_case)
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    ours = FullTokenizer(str(uncased_vocab), do_lower_case=do_lower_case)
    texts = ["Hello, World! It's 3.14 o'clock.", "Naïve café — résumé", "中文字符 and 日本語",
             "unaffable unbelievably", "stays? e-mail@example.com"]
    for text in texts:
        expected = ours.convert_tokens_to_ids(["[CLS]"] + ours.tokenize(text) + ["[SEP]"])
        assert hf_tokenizer(text)["input_ids"] == expected, text
    assert load_file(str(tmp_path / "hf" / "model.safetensors"))
