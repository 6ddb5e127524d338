"""The model FLOPs of real tokens, against a hand computation and the encoder's own variables."""
import pytest

from bench.profile.useful_flops import (BERT_BASE, MINILM_L6_H384, EncoderSize, TokenCounts,
                                        forward_flops, training_flops, utilisation)


def test_training_flops_of_two_sequences_by_hand():
    size = EncoderSize(num_hidden_layers=2, hidden_size=4, intermediate_size=8)
    # One layer: Q, K, V, output 4 x (16 + 4) = 80; feed-forward 4 x 8 + 8 + 8 x 4 + 4 = 76;
    # two LayerNorms 16: 172 parameters, 344 for two layers.
    assert size.layer_parameters == 172
    assert size.non_embedding_parameters == 344
    counts = TokenCounts.from_lengths([3, 5])
    assert counts == TokenCounts(sequences=2, tokens=8, tokens_squared=9 + 25)
    # 6 x 344 x 8 tokens, plus 3 x 2 layers x 4 x H=4 x (3^2 + 5^2).
    assert training_flops(size, counts.tokens, counts.tokens_squared) == \
        6 * 344 * 8 + 3 * 2 * 4 * 4 * 34 == 19776
    assert forward_flops(size, counts.tokens, counts.tokens_squared) == 19776 / 3


def test_the_known_models_sizes():
    # all-MiniLM-L6-v2: 22.7M parameters, 11.7M of them in its embeddings (30522 + 512 + 2 rows
    # of 384, and a LayerNorm).
    assert MINILM_L6_H384.non_embedding_parameters == 6 * 1_774_464
    assert 22.5e6 < MINILM_L6_H384.non_embedding_parameters + (30522 + 512 + 2 + 2) * 384 < 23e6
    # BERT-Base: 85M in its layers.
    assert 85e6 < BERT_BASE.non_embedding_parameters < 85.2e6


def test_layer_parameters_are_the_encoder_layers_variables():
    from modeling.config import BertConfig
    from modeling.models.encoder import BertEncoder
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=24)
    encoder = BertEncoder(config)
    layers = sum(v.numpy().size for v in encoder.trainable_variables
                 if v.path.startswith("layer_"))
    assert layers == EncoderSize(2, 16, 24).non_embedding_parameters


def test_scaled_counts_and_utilisation():
    counts = TokenCounts(sequences=100, tokens=5000, tokens_squared=300_000)
    assert counts.scaled(96) == pytest.approx((4800.0, 288_000.0))
    # 2e11 FLOPs in 2 s at a 200 GFLOP/s peak: half.
    assert utilisation(2e11, 2.0, 200.0) == pytest.approx(0.5)
