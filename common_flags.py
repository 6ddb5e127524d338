"""Flags that every training script shares, and turning them into a strategy and an optimizer.

Script-layer code: the scripts and this module are the only readers of absl FLAGS.
"""
from __future__ import annotations

import functools

from absl import flags, logging
import keras
import tensorflow as tf

from data import tokenization
from modeling import checkpoints
from modeling.config import BertConfig
from running.batching import Batching
from tasks.runner import ROLES, roles_of
from training.distribution import get_strategy
from training.optimizer import create_optimizer
from training.precision import needs_loss_scaling, set_dtype_policy
from training.fine_tuning import FineTuningRun, warmup_steps
from training.periodic_evaluation import EvaluationPlan
from training.trainer import TrainingConfig

FLAGS = flags.FLAGS


def define_model_flags(init_checkpoint_help: str, max_seq_length: int = 128,
                       max_seq_length_help: str = "Longest sequence after WordPiece "
                       "tokenization; longer ones are truncated, shorter ones padded.",
                       do_lower_case: bool = True,
                       do_lower_case_help: str = "Lower-case the input (uncased models).",
                       output_dir_help: str = "Where checkpoints, results and predictions go."):
    """The flags naming the model and the run's folder, as the original scripts spell them."""
    define_model_file_flags()
    flags.DEFINE_string("output_dir", None, output_dir_help)
    flags.DEFINE_string("init_checkpoint", None, init_checkpoint_help)
    flags.DEFINE_bool("do_lower_case", do_lower_case, do_lower_case_help)
    flags.DEFINE_integer("max_seq_length", max_seq_length, max_seq_length_help)


def define_model_file_flags(vocab_file: bool = True) -> None:
    """--bert_config_file (and --vocab_file): given, or those of the --init_checkpoint model."""
    flags.DEFINE_string("bert_config_file", None, "The bert_config.json of the model. Default: the "
                        "config of the model --init_checkpoint names (any format).")
    if vocab_file:
        flags.DEFINE_string("vocab_file", None, "The vocab.txt the model was trained with. "
                            "Default: the vocabulary of the model --init_checkpoint names.")


@functools.lru_cache(maxsize=1)
def _model_files(init_checkpoint: str, bert_config_file: str | None,
                 vocab_file: str | None) -> checkpoints.LoadedModel:
    return checkpoints.read_model(init_checkpoint, bert_config_file=bert_config_file,
                                  vocab_file=vocab_file)


def _from_init_checkpoint(flag: str) -> checkpoints.LoadedModel:
    """The model --init_checkpoint names, to take what `flag` was not given from (the files
    that were given stand in for those beside it: a fine-tuned folder has no vocab.txt)."""
    if not FLAGS["init_checkpoint"].value:
        raise ValueError(f"{flag} is needed: no --init_checkpoint names a model to take it from")
    return _model_files(FLAGS.init_checkpoint, FLAGS.bert_config_file,
                        FLAGS["vocab_file"].value if "vocab_file" in FLAGS else None)


def config_from_flags() -> BertConfig:
    """The model's config: --bert_config_file, else that of the --init_checkpoint model."""
    if FLAGS.bert_config_file:
        return BertConfig.from_json_file(FLAGS.bert_config_file)
    config = _from_init_checkpoint("--bert_config_file").model.config
    logging.info("config of --init_checkpoint=%s: %s", FLAGS.init_checkpoint, config.to_dict())
    return config


def vocab_file_from_flags() -> str:
    """The model's vocab.txt: --vocab_file, else that of the --init_checkpoint model."""
    return FLAGS.vocab_file or _from_init_checkpoint("--vocab_file").vocab_file


def _config_source() -> str:
    return f"--bert_config_file={FLAGS.bert_config_file}" if FLAGS.bert_config_file else \
        f"the model of --init_checkpoint={FLAGS.init_checkpoint}"


def define_fine_tuning_flags(actions: dict[str, str], train_batch_size: int = 32,
                             learning_rate: float | None = 5e-5,
                             learning_rate_help: str = "Peak learning rate of Adam."):
    """The original's `--do_*` flags (`actions`: {"train": help, "eval": help, ...}), a batch size
    for each, the training schedule's flags and the training flags of `define_training_flags`."""
    for action, help_text in actions.items():
        flags.DEFINE_bool(f"do_{action}", False, help_text)
    batch_sizes = {"train": (train_batch_size, "Global batch size for training."),
                   "eval": (8, "Batch size for evaluation."),
                   "predict": (8, "Batch size for prediction.")}
    for action in actions:
        default, help_text = batch_sizes[action]
        flags.DEFINE_integer(f"{action}_batch_size", default, help_text)
    flags.DEFINE_float("learning_rate", learning_rate, learning_rate_help)
    flags.DEFINE_float("num_train_epochs", 3.0, "Epochs of training (may be fractional).")
    flags.DEFINE_float("warmup_proportion", 0.1,
                       "Share of the training steps with a linear warm-up.")
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "Steps between training checkpoints.")
    define_batching_flags(group_by_length=True)
    define_training_flags()
    define_evaluation_flags("dev")


def define_evaluation_flags(dev: str, epochs: bool = True) -> None:
    """Scoring `dev` during training, the best model kept in output_dir/best, early stopping
    (`epochs`: also at the end of each epoch)."""
    flags.DEFINE_integer("eval_every_steps", None, f"Score {dev} every N training steps "
                         "(eval_results_step_N.txt, train_log.jsonl, TensorBoard's eval/) and "
                         "keep the best model in output_dir/best, in the original's format.")
    if epochs:
        flags.DEFINE_bool("eval_every_epoch", False, f"Score {dev} at the end of each epoch "
                          "(eval_results_epoch_N.txt) and keep the best model in "
                          "output_dir/best.")
    flags.DEFINE_integer("early_stopping_patience", None, "Stop training after this many "
                         f"scorings of {dev} in a row without improvement (with "
                         "--eval_every_steps or --eval_every_epoch); output_dir/best keeps the "
                         "best.")
    flags.DEFINE_string("metric_for_best", None, "The result of eval_results.txt the best model "
                        "is chosen by (highest wins; lowest for a loss or an error such as "
                        "eval_loss, eval_mse). Default: the task's main metric.")


def evaluation_plan_from_flags(default_metric: str = "") -> EvaluationPlan:
    """The scoring during training of --eval_every_steps, --eval_every_epoch,
    --early_stopping_patience and --metric_for_best, checked."""
    plan = EvaluationPlan(every_steps=FLAGS.eval_every_steps,
                          every_epoch="eval_every_epoch" in FLAGS and FLAGS.eval_every_epoch,
                          metric=FLAGS.metric_for_best or default_metric,
                          patience=FLAGS.early_stopping_patience)
    plan.check()
    if plan.enabled and not FLAGS.do_train:
        raise ValueError("--eval_every_steps and --eval_every_epoch score while training: they "
                         "need --do_train")
    return plan


def define_batching_flags(group_by_length: bool) -> None:
    """How batches are padded (and, with `group_by_length`, grouped in training)."""
    flags.DEFINE_bool("pad_to_max_length", False,
                      "Pad every batch to --max_seq_length, the original's fixed shapes. Default: "
                      "each batch is padded to its own longest sequence (rounded up to "
                      "--pad_to_multiple_of), which gives the same outputs with less work; "
                      "evaluation and prediction run examples of similar lengths together and "
                      "write their outputs in the input's order. TPUs always use fixed shapes.")
    flags.DEFINE_integer("pad_to_multiple_of", 1,
                         "Round each batch's padded length up to a multiple of this (1: to the "
                         "longest sequence itself, the fastest on CPUs, "
                         "bench/speed/padding_multiple.py; GPUs' tensor cores favour 8).")
    if group_by_length:
        flags.DEFINE_bool("group_by_length", False,
                          "Put training examples of similar lengths in the same batch, as "
                          "transformers' group_by_length: the shuffled examples are sorted by "
                          "length in groups of 50 batches. This changes which examples share a "
                          "batch, and so the training run, though not which examples each "
                          "epoch sees. It saves little time where padding is not computed "
                          "(CPUs, GPUs without XLA), and with the original's optimizer it can make "
                          "short runs erratic: take --optimizer=adamw_bias_corrected with it "
                          "(docs/fine-tuning.md).")


def batching_from_flags() -> Batching:
    """The `Batching` of --pad_to_max_length, --pad_to_multiple_of and --group_by_length."""
    if FLAGS.pad_to_multiple_of < 1:
        raise ValueError(f"--pad_to_multiple_of={FLAGS.pad_to_multiple_of} must be positive")
    on_tpu = "distribution_strategy" in FLAGS and FLAGS.distribution_strategy == "tpu"
    return Batching(pad_to_max_length=FLAGS.pad_to_max_length or on_tpu,
                    multiple=FLAGS.pad_to_multiple_of,
                    group_by_length="group_by_length" in FLAGS and FLAGS.group_by_length)


def check_fine_tuning_flags(config) -> None:
    """At least one `--do_*`, a --max_seq_length the model takes, positive batch sizes."""
    actions = [name for name in ("do_train", "do_eval", "do_predict") if name in FLAGS]
    check_one_action(*actions)
    check_max_seq_length(config)
    for name in (f"{action[3:]}_batch_size" for action in actions):
        if FLAGS[name].value < 1:
            raise ValueError(f"--{name}={FLAGS[name].value} must be positive")


def tokenizer_from_flags(config) -> tokenization.FullTokenizer:
    """The tokenizer of --vocab_file and --do_lower_case, checked against the model: a token id
    past the embedding table would fail inside a step (or embed as zeros on GPUs)."""
    if "init_checkpoint" in FLAGS:
        tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
    vocab_file = vocab_file_from_flags()
    tokenizer = tokenization.FullTokenizer(vocab_file, FLAGS.do_lower_case)
    size = max(tokenizer.vocab.values(), default=-1) + 1
    if size > config.vocab_size:
        raise ValueError(f"--vocab_file={vocab_file} has {size} tokens, more than the "
                         f"model's vocab_size={config.vocab_size} ({_config_source()}): is it "
                         "the model's own vocab.txt?")
    return tokenizer


def define_training_flags():
    """Defines the flags that replace the original's TPU-era ones."""
    flags.DEFINE_enum("distribution_strategy", "one_device",
                      ["one_device", "mirrored", "multi_worker_mirrored", "tpu"],
                      "tf.distribute strategy; multi_worker_mirrored reads TF_CONFIG.")
    flags.DEFINE_string("tpu", None, "TPU name or grpc:// address for --distribution_strategy=tpu.")
    flags.DEFINE_enum("dtype", "float32", ["float32", "mixed_bfloat16", "mixed_float16"],
                      "Compute precision; mixed_float16 uses dynamic loss scaling.")
    flags.DEFINE_bool("use_xla", None, "Compile the training step's forward and backward pass "
                      "with XLA; --nouse_xla never. Default: on GPUs and TPUs, off on "
                      "CPUs (running/xla_choice.py).")
    flags.DEFINE_enum("optimizer", "adamw", ["adamw", "adamw_bias_corrected", "lamb"],
                      "adamw: the original's AdamWeightDecay, exactly (no bias correction); "
                      "adamw_bias_corrected: Adam with bias correction and decoupled weight decay, "
                      "as Model Garden's and transformers' AdamW (steadier fine-tuning on small "
                      "sets); lamb: layer-wise adaptive, for large batches. All three clip to "
                      "global norm 1.0 and decay no LayerNorm or bias variable.")
    flags.DEFINE_float("adam_epsilon", 1e-6, "The optimizer's epsilon, added to sqrt(v) of the "
                       "second moment (1e-6: the original's and Model Garden's; PyTorch's AdamW "
                       "and transformers default to 1e-8).")
    flags.DEFINE_enum("learning_rate_decay", "original", ["original", "from_peak"],
                      "original: the rate falls linearly from --learning_rate at step 0 to 0 at "
                      "the last step, warm-up replacing its start, so that warm-up ends below "
                      "the peak (the original's); from_peak: it falls from --learning_rate at "
                      "the end of warm-up (transformers' linear schedule).")
    flags.DEFINE_integer("gradient_accumulation_steps", 1,
                         "Micro-batches per optimizer step; the batch size flags stay global.")
    flags.DEFINE_integer("seed", 12345, "Random seed of initialisation, dropout and shuffling.")
    flags.DEFINE_bool("learning_rate_of_next_step", False, "Give update t the learning rate of "
                      "step t+1, as runs of the original code did (its step increment and update "
                      "are not ordered); default: the rate of step t, as the schedule is written.")
    flags.DEFINE_integer("log_steps", None, "Steps between progress lines and TensorBoard "
                         "summaries (default: 100 for pretraining; a tenth of the run, at most "
                         "100, for fine-tuning). Every step goes to output_dir/train_log.jsonl.")


def check_one_action(*names: str) -> None:
    """At least one of the `--do_*` flags `names` must be set."""
    if not any(FLAGS[name].value for name in names):
        listed = [f"--{name}" for name in names]
        raise ValueError(f"At least one of {', '.join(listed[:-1])} or {listed[-1]} must be set")


def setup_from_flags() -> tf.distribute.Strategy:
    """Seeds every generator, sets the dtype policy and returns the strategy."""
    if not FLAGS.adam_epsilon > 0:  # 0 divides by zero for a weight whose gradients are all 0
        raise ValueError(f"--adam_epsilon={FLAGS.adam_epsilon} must be positive")
    keras.utils.set_random_seed(FLAGS.seed)
    set_dtype_policy(FLAGS.dtype)
    strategy = get_strategy(FLAGS.distribution_strategy, FLAGS.tpu)
    logging.info("strategy %s with %d replicas, dtype %s", type(strategy).__name__,
                 strategy.num_replicas_in_sync, FLAGS.dtype)
    return strategy


def check_max_seq_length(config) -> None:
    """--max_seq_length must fit [CLS] and [SEP] and the model's position embeddings."""
    try:
        config.check_max_seq_length(FLAGS.max_seq_length, "--max_seq_length")
    except ValueError as error:
        raise ValueError(f"{error} ({_config_source()})") from None


def check_batch_size(name: str, batch_size: int, strategy: tf.distribute.Strategy):
    """The global batch must split evenly over replicas and accumulated micro-batches."""
    parts = strategy.num_replicas_in_sync * FLAGS.gradient_accumulation_steps
    if batch_size % parts:
        raise ValueError(f"--{name}={batch_size} is not divisible by replicas x "
                         f"--gradient_accumulation_steps = {parts}")


def training_config_from_flags(num_train_steps: int,
                               default_log_steps: int | None = None) -> TrainingConfig:
    """The training loop's settings from the flags every training script has."""
    return TrainingConfig(
        num_train_steps=num_train_steps, output_dir=FLAGS.output_dir,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        log_steps=FLAGS.log_steps or default_log_steps,
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps, jit_compile=FLAGS.use_xla)


def create_optimizer_from_flags(learning_rate: float, num_train_steps: int,
                                num_warmup_steps: int) -> keras.optimizers.Optimizer:
    """The optimizer of --optimizer, loss-scaled under --dtype=mixed_float16."""
    return create_optimizer(learning_rate, num_train_steps, num_warmup_steps,
                            optimizer_type=FLAGS.optimizer, epsilon=FLAGS.adam_epsilon,
                            use_loss_scale=needs_loss_scaling(FLAGS.dtype),
                            learning_rate_step_offset=int(FLAGS.learning_rate_of_next_step),
                            decay_from_peak=FLAGS.learning_rate_decay == "from_peak")


def fine_tuning_optimizer(num_train_steps: int,
                          learning_rate: float | None = None) -> keras.optimizers.Optimizer:
    """The fine-tuning scripts' optimizer: --learning_rate (or `learning_rate`), warm-up over
    --warmup_proportion of `num_train_steps`, then linear decay to 0."""
    return create_optimizer_from_flags(
        learning_rate or FLAGS.learning_rate, num_train_steps,
        warmup_steps(num_train_steps, FLAGS.warmup_proportion))


def fine_tuning_run(strategy: tf.distribute.Strategy, learning_rate: float | None = None,
                    init_checkpoint: str | None = None, optimizer_fn=None,
                    default_log_steps: int | None = None) -> FineTuningRun:
    """The fine-tuning path's settings from the flags (`training.fine_tuning.FineTuningRun`).

    Args:
        strategy: from `setup_from_flags`.
        learning_rate: overrides --learning_rate (a task's own default).
        init_checkpoint: overrides --init_checkpoint (e.g. "" for a model with nothing
            pretrained to load or restore from).
        optimizer_fn: the optimizer for a run of N steps (default: `fine_tuning_optimizer`).
        default_log_steps: see `training_config_from_flags`.
    """
    if FLAGS.do_train:
        check_batch_size("train_batch_size", FLAGS.train_batch_size, strategy)
    return FineTuningRun(
        strategy=strategy, output_dir=FLAGS.output_dir,
        init_checkpoint=FLAGS.init_checkpoint if init_checkpoint is None else init_checkpoint,
        batch_size=FLAGS.train_batch_size, seed=FLAGS.seed,
        optimizer_fn=optimizer_fn or (lambda steps: fine_tuning_optimizer(steps, learning_rate)),
        config_fn=lambda steps: training_config_from_flags(steps, default_log_steps),
        num_train_epochs=FLAGS["num_train_epochs"].value if "num_train_epochs" in FLAGS else 1.0,
        is_chief=is_chief(strategy),
        vocab_file=vocab_file_from_flags() if FLAGS.do_train and "vocab_file" in FLAGS else None)


def roles_from_flags() -> list[str]:
    """What --do_train, --do_eval and --do_predict ask for (`tasks.runner.ROLES`)."""
    return roles_of(*(FLAGS[f"do_{role}"].value if f"do_{role}" in FLAGS else False
                      for role in ROLES))


def start_fine_tuning_run(**overrides) -> FineTuningRun:
    """Seeds, sets the dtype policy, builds the strategy (`setup_from_flags`) and returns the
    fine-tuning run of the flags (`fine_tuning_run`, with `overrides`)."""
    return fine_tuning_run(setup_from_flags(), **overrides)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True on the worker that writes final outputs (the only one outside multi-worker runs)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    return resolver.task_type in ("chief", None) or (
        resolver.task_type == "worker" and resolver.task_id == 0
        and "chief" not in resolver.cluster_spec().as_dict())
