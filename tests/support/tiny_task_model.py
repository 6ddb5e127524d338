"""A tiny random BERT in the original format, its vocabulary covering the generated task files."""
import pathlib

import keras

from modeling.checkpoints import save_tf1_checkpoint
from modeling.config import BertConfig
from modeling.models.encoder import BertEncoder
from synthetic import swag_ner


def write_tiny_model(folder: pathlib.Path, seed: int = 0) -> dict[str, pathlib.Path]:
    """Writes `vocab.txt`, `bert_config.json` (2 layers, hidden 32) and `bert_model.ckpt`.

    Returns:
        The paths keyed `vocab_file`, `bert_config_file` and `init_checkpoint`.
    """
    folder.mkdir(parents=True, exist_ok=True)
    vocab = swag_ner.vocabulary()
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                        type_vocab_size=2)
    config.to_json_file(folder / "bert_config.json")
    keras.utils.set_random_seed(seed)
    save_tf1_checkpoint(BertEncoder(config), str(folder / "bert_model.ckpt"))
    return {"vocab_file": folder / "vocab.txt", "bert_config_file": folder / "bert_config.json",
            "init_checkpoint": folder / "bert_model.ckpt"}


def flag_args(values: dict) -> list[str]:
    """`--name=value` arguments; True becomes `--name`, False `--noname`."""
    args = []
    for name, value in values.items():
        if value is True:
            args.append(f"--{name}")
        elif value is False:
            args.append(f"--no{name}")
        else:
            args.append(f"--{name}={value}")
    return args
