import json

import pytest

from modeling.config import BertConfig

ORIGINAL_DEFAULTS = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                         intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.1,
                         attention_probs_dropout_prob=0.1, max_position_embeddings=512,
                         type_vocab_size=16, initializer_range=0.02)


def test_missing_keys_take_the_original_defaults():
    config = BertConfig.from_dict({"vocab_size": 99})
    for key, value in ORIGINAL_DEFAULTS.items():
        assert getattr(config, key) == value


def test_vocab_size_is_required():
    with pytest.raises(ValueError, match="vocab_size"):
        BertConfig.from_dict({"hidden_size": 128, "num_attention_heads": 2})


def test_wrong_type_names_the_key():
    with pytest.raises(ValueError, match="hidden_size"):
        BertConfig.from_dict({"vocab_size": 10, "hidden_size": "768"})
    with pytest.raises(ValueError, match="num_hidden_layers"):
        BertConfig.from_dict({"vocab_size": 10, "num_hidden_layers": True})


def test_unknown_activation_is_an_error():
    with pytest.raises(ValueError, match="swish"):
        BertConfig.from_dict({"vocab_size": 10, "hidden_act": "swish"})


def test_release_extra_keys_round_trip_and_unknown_keys_warn(tmp_path, caplog):
    values = {"vocab_size": 119547, "directionality": "bidi", "pooler_fc_size": 768,
              "pooler_num_attention_heads": 12, "pooler_num_fc_layers": 3,
              "pooler_size_per_head": 128, "pooler_type": "first_token_transform",
              "made_up_key": 1}
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(values))
    config = BertConfig.from_json_file(path)
    assert "made_up_key" in caplog.text
    assert "directionality" not in caplog.text
    config.to_json_file(tmp_path / "out.json")
    written = json.loads((tmp_path / "out.json").read_text())
    assert written["directionality"] == "bidi" and "made_up_key" not in written
    assert BertConfig.from_json_file(tmp_path / "out.json") == config


def test_fixture_config_reads(fixtures_dir):
    config = BertConfig.from_json_file(fixtures_dir / "original/tiny/bert_config.json")
    assert (config.hidden_size, config.num_hidden_layers, config.type_vocab_size) == (128, 2, 2)
