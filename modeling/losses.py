"""The losses of the original code, as functions of logits and labels.

Each loss takes an optional global normaliser: under `tf.distribute`, a replica passes the
all-reduced count so that the replicas' losses sum to the loss of the global batch (the gradients of
the replicas are summed), which makes a distributed step compute what one device computes.
"""
import tensorflow as tf


def per_example_cross_entropy(logits: tf.Tensor, label_ids: tf.Tensor) -> tf.Tensor:
    """-log softmax(logits)[label], as the original's one-hot formula.

    Args:
        logits: float32 [..., K].
        label_ids: int [...] in [0, K).

    Returns:
        float32 [...].
    """
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    one_hot = tf.one_hot(label_ids, depth=tf.shape(logits)[-1], dtype=tf.float32)
    return -tf.reduce_sum(log_probs * one_hot, axis=-1)


def masked_lm_loss(logits: tf.Tensor, masked_lm_ids: tf.Tensor, masked_lm_weights: tf.Tensor,
                   weight_sum: tf.Tensor | None = None) -> tf.Tensor:
    """sum(w * nll) / (sum(w) + 1e-5) over the masked slots (padding slots have weight 0).

    Args:
        logits: float32 [B, P, V].
        masked_lm_ids: int [B, P] original token ids.
        masked_lm_weights: float32 [B, P], 1.0 for real predictions and 0.0 for padding.
        weight_sum: the global sum of `masked_lm_weights` when the batch is split across replicas.
    """
    weights = tf.cast(masked_lm_weights, tf.float32)
    numerator = tf.reduce_sum(weights * per_example_cross_entropy(logits, masked_lm_ids))
    denominator = tf.reduce_sum(weights) if weight_sum is None else weight_sum
    return numerator / (denominator + 1e-5)


def mean_cross_entropy(logits: tf.Tensor, label_ids: tf.Tensor,
                       global_batch_size: int | tf.Tensor | None = None) -> tf.Tensor:
    """Mean cross-entropy over the batch: next-sentence, classifier and multiple-choice losses.

    Args:
        logits: float32 [B, K].
        label_ids: int [B].
        global_batch_size: the number of examples over all replicas, when the batch is split.
    """
    losses = per_example_cross_entropy(logits, label_ids)
    return _mean(losses, global_batch_size)


def weighted_cross_entropy(logits: tf.Tensor, label_ids: tf.Tensor, class_weights: tf.Tensor,
                           global_batch_size: int | tf.Tensor | None = None) -> tf.Tensor:
    """Cross-entropy with each example weighted by its class's weight, summed over the batch and
    divided by the number of examples (Keras' sample weights).

    Args:
        logits: float32 [B, K].
        label_ids: int [B].
        class_weights: float32 [K].
    """
    weights = tf.gather(tf.cast(class_weights, tf.float32), label_ids)
    return _mean(weights * per_example_cross_entropy(logits, label_ids), global_batch_size)


def per_example_binary_cross_entropy(logits: tf.Tensor, labels: tf.Tensor,
                                     positive_weights: tf.Tensor | None = None,
                                     negative_weights: tf.Tensor | None = None) -> tf.Tensor:
    """Multi-label loss of each example: the mean over labels of each label's sigmoid
    cross-entropy, -[y log s(x) + (1 - y) log(1 - s(x))] (as PyTorch's BCEWithLogitsLoss).

    Args:
        logits: float32 [..., K].
        labels: float [..., K], 1.0 where the example has the label, 0.0 elsewhere.
        positive_weights, negative_weights: float32 [K] weights of each label's two terms
            (None: 1.0).

    Returns:
        float32 [...].
    """
    labels = tf.cast(labels, tf.float32)
    positive = labels * tf.math.softplus(-logits)          # -log s(x)
    negative = (1.0 - labels) * tf.math.softplus(logits)   # -log(1 - s(x))
    if positive_weights is not None:
        positive *= tf.cast(positive_weights, tf.float32)
    if negative_weights is not None:
        negative *= tf.cast(negative_weights, tf.float32)
    return tf.reduce_mean(positive + negative, axis=-1)


def mean_binary_cross_entropy(logits: tf.Tensor, labels: tf.Tensor,
                              global_batch_size: int | tf.Tensor | None = None,
                              positive_weights: tf.Tensor | None = None,
                              negative_weights: tf.Tensor | None = None) -> tf.Tensor:
    """`per_example_binary_cross_entropy`, averaged over the batch: logits [B, K], labels
    [B, K]."""
    return _mean(per_example_binary_cross_entropy(logits, labels, positive_weights,
                                                  negative_weights), global_batch_size)


def mean_squared_error(predictions: tf.Tensor, labels: tf.Tensor,
                       global_batch_size: int | tf.Tensor | None = None) -> tf.Tensor:
    """Mean squared error for regression tasks (STS-B); predictions float32 [B, 1] or [B]."""
    predictions = tf.reshape(predictions, [-1])
    return _mean(tf.square(predictions - tf.cast(labels, tf.float32)), global_batch_size)


def span_loss(start_logits: tf.Tensor, end_logits: tf.Tensor, start_positions: tf.Tensor,
              end_positions: tf.Tensor,
              global_batch_size: int | tf.Tensor | None = None) -> tf.Tensor:
    """The original SQuAD loss: the mean of the start and end cross-entropies over positions.

    Args:
        start_logits, end_logits: float32 [B, T].
        start_positions, end_positions: int [B] token indices (0 = [CLS] when unanswerable).
    """
    start = mean_cross_entropy(start_logits, start_positions, global_batch_size)
    end = mean_cross_entropy(end_logits, end_positions, global_batch_size)
    return (start + end) / 2.0


def _mean(values: tf.Tensor, global_batch_size) -> tf.Tensor:
    if global_batch_size is None:
        return tf.reduce_mean(values)
    return tf.reduce_sum(values) / tf.cast(global_batch_size, values.dtype)


def token_cross_entropy(logits: tf.Tensor, label_ids: tf.Tensor,
                        label_count: tf.Tensor | None = None) -> tf.Tensor:
    """Mean cross-entropy over the labelled tokens of a tagging task; label -1 means ignored.

    Args:
        logits: float32 [B, T, K].
        label_ids: int [B, T], -1 for tokens that carry no label (sub-word pieces, context, padding).
        label_count: the global number of labelled tokens when the batch is split across replicas.
    """
    return weighted_mean(per_example_cross_entropy(logits, tf.maximum(label_ids, 0)),
                         label_ids >= 0, label_count)


def weighted_mean(values: tf.Tensor, weights: tf.Tensor,
                  count: int | tf.Tensor | None = None) -> tf.Tensor:
    """sum(weights * values) / count, count the sum of `weights` (or the global one given), at
    least 1: 0 where nothing counts."""
    weights = tf.cast(weights, tf.float32)
    count = tf.reduce_sum(weights) if count is None else tf.cast(count, tf.float32)
    return tf.reduce_sum(values * weights) / tf.maximum(count, 1.0)


# Distillation (Hinton et al. 2015; Turc et al. 2019): the student learns the teacher's outputs.
# Problem types of a classifier, as its soft targets differ.
SINGLE_LABEL, MULTI_LABEL, REGRESSION = "single_label", "multi_label", "regression"
# The additive mask of a padding position's span logit: its softmax weight is 0 (as attention's).
_PADDING_LOGIT = -10000.0


def soft_cross_entropy(logits: tf.Tensor, teacher_logits: tf.Tensor,
                       temperature: float = 1.0) -> tf.Tensor:
    """T^2 * -sum_k softmax(teacher / T)_k * log softmax(student / T)_k.

    The teacher's distribution softened by the temperature T is the target; T^2 keeps the
    gradients' scale as T changes (Hinton et al. 2015, section 2). The teacher gets no gradient.

    Args:
        logits, teacher_logits: float [..., K].

    Returns:
        float32 [...].
    """
    targets = tf.nn.softmax(tf.stop_gradient(tf.cast(teacher_logits, tf.float32)) / temperature)
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32) / temperature)
    return -temperature ** 2 * tf.reduce_sum(targets * log_probs, axis=-1)


def soft_classifier_loss(logits: tf.Tensor, teacher_logits: tf.Tensor, temperature: float,
                         problem: str = SINGLE_LABEL) -> tf.Tensor:
    """The soft loss of each example of a classifier, float32 [B] of logits [B, K]:
    `soft_cross_entropy` (single-label); T^2 * each label's sigmoid cross-entropy against
    sigmoid(teacher / T), averaged over labels (multi-label); the squared difference of the two
    predictions, without temperature (regression, K = 1)."""
    teacher_logits = tf.stop_gradient(tf.cast(teacher_logits, tf.float32))
    if problem == REGRESSION:
        return tf.reduce_sum(tf.square(tf.cast(logits, tf.float32) - teacher_logits), axis=-1)
    if problem == MULTI_LABEL:
        return temperature ** 2 * per_example_binary_cross_entropy(
            tf.cast(logits, tf.float32) / temperature, tf.sigmoid(teacher_logits / temperature))
    return soft_cross_entropy(logits, teacher_logits, temperature)


def _hard_classifier_loss(logits: tf.Tensor, labels: tf.Tensor, problem: str) -> tf.Tensor:
    if problem == REGRESSION:
        return tf.square(tf.reshape(logits, [-1]) - tf.cast(labels, tf.float32))
    if problem == MULTI_LABEL:
        return per_example_binary_cross_entropy(logits, labels)
    return per_example_cross_entropy(logits, labels)


def distillation_mix(soft: tf.Tensor, hard: tf.Tensor, alpha: float) -> tf.Tensor:
    """alpha * soft + (1 - alpha) * hard: alpha 1 learns the teacher alone, 0 the labels."""
    return alpha * soft + (1.0 - alpha) * hard


def classifier_distillation_loss(logits: tf.Tensor, teacher_logits: tf.Tensor,
                                 labels: tf.Tensor, temperature: float, alpha: float,
                                 problem: str = SINGLE_LABEL, labelled: tf.Tensor | None = None,
                                 global_batch_size=None, labelled_count=None) -> tf.Tensor:
    """`distillation_mix` of the mean `soft_classifier_loss` over the batch and the mean task
    loss (cross-entropy, sigmoid cross-entropy or squared error) over its labelled rows.

    Args:
        logits, teacher_logits: float32 [B, K].
        labels: the task's labels (int [B], or float [B, K] multi-label, float [B] regression).
        labelled: [B], 1 for rows with a label, 0 for the teacher's alone (transfer data);
            None: all.
        global_batch_size, labelled_count: the rows, and labelled rows, of all replicas.
    """
    ones = tf.ones(tf.shape(logits)[:1], tf.float32)
    soft = weighted_mean(soft_classifier_loss(logits, teacher_logits, temperature, problem),
                         ones, global_batch_size)
    hard = weighted_mean(_hard_classifier_loss(logits, labels, problem),
                         ones if labelled is None else labelled, labelled_count)
    return distillation_mix(soft, hard, alpha)


def token_distillation_loss(logits: tf.Tensor, teacher_logits: tf.Tensor,
                            label_ids: tf.Tensor, temperature: float, alpha: float,
                            labelled: tf.Tensor | None = None, token_count=None,
                            labelled_token_count=None) -> tf.Tensor:
    """A tagger's: the mean `soft_cross_entropy` over the tokens with a label id (>= 0; -1
    marks the tokens no word's tag sits on) and the mean cross-entropy over those of labelled
    rows, mixed by alpha.

    Args:
        logits, teacher_logits: float32 [B, T, K].
        label_ids: int [B, T], -1 where no tag sits.
        labelled: [B], 0 for rows without tags (transfer data); None: all.
        token_count, labelled_token_count: the tokens with a label id, and those of labelled
            rows, of all replicas.
    """
    tagged = label_ids >= 0
    soft = weighted_mean(soft_cross_entropy(logits, teacher_logits, temperature), tagged,
                         token_count)
    if labelled is not None:
        label_ids = tf.where(tf.cast(labelled, tf.bool)[:, None], label_ids, -1)
    hard = token_cross_entropy(logits, label_ids, labelled_token_count)
    return distillation_mix(soft, hard, alpha)


def span_distillation_loss(start_logits: tf.Tensor, end_logits: tf.Tensor,
                           teacher_start_logits: tf.Tensor, teacher_end_logits: tf.Tensor,
                           start_positions: tf.Tensor, end_positions: tf.Tensor,
                           input_mask: tf.Tensor, temperature: float, alpha: float,
                           labelled: tf.Tensor | None = None, global_batch_size=None,
                           labelled_count=None) -> tf.Tensor:
    """A span model's: the mean over rows of the start's and end's `soft_cross_entropy` over
    the real tokens (padding masked out of both distributions), and the original span loss
    over labelled rows, mixed by alpha.

    Args:
        start_logits, end_logits, teacher_start_logits, teacher_end_logits: float32 [B, T].
        start_positions, end_positions: int [B].
        input_mask: int [B, T], 1 for real tokens.
        labelled: [B], 0 for rows without an answer span (transfer data); None: all.
    """
    real = tf.cast(input_mask, tf.bool)

    def soft(student, teacher):
        return soft_cross_entropy(tf.where(real, student, _PADDING_LOGIT),
                                  tf.where(real, tf.cast(teacher, tf.float32), _PADDING_LOGIT),
                                  temperature)
    ones = tf.ones(tf.shape(start_logits)[:1], tf.float32)
    soft_loss = weighted_mean((soft(start_logits, teacher_start_logits)
                               + soft(end_logits, teacher_end_logits)) / 2.0, ones,
                              global_batch_size)
    hard = (per_example_cross_entropy(start_logits, start_positions)
            + per_example_cross_entropy(end_logits, end_positions)) / 2.0
    hard_loss = weighted_mean(hard, ones if labelled is None else labelled, labelled_count)
    return distillation_mix(soft_loss, hard_loss, alpha)


def hidden_state_loss(hidden_states: tf.Tensor, teacher_hidden_states: tf.Tensor,
                      input_mask: tf.Tensor, token_count=None) -> tf.Tensor:
    """TinyBERT's intermediate loss (Jiao et al. 2020, eq. 7): the mean squared difference of
    the student's hidden states (projected to the teacher's width where it differs) and the
    teacher's, over the real tokens and the hidden units.

    Args:
        hidden_states, teacher_hidden_states: float [B, T, H].
        input_mask: int [B, T], 1 for real tokens.
        token_count: the real tokens of all replicas.
    """
    squares = tf.square(tf.cast(hidden_states, tf.float32)
                        - tf.stop_gradient(tf.cast(teacher_hidden_states, tf.float32)))
    return weighted_mean(tf.reduce_mean(squares, axis=-1), input_mask, token_count)


def attention_distribution_loss(probabilities: tf.Tensor, teacher_probabilities: tf.Tensor,
                                input_mask: tf.Tensor, token_count=None) -> tf.Tensor:
    """MiniLM's (Wang et al. 2020, eq. 4): KL(teacher || student) of the attention
    distribution of each head at each real query token, averaged over heads and those tokens.
    Where the two have different numbers of heads, each one's distributions averaged over its
    heads are compared.

    Args:
        probabilities, teacher_probabilities: float [B, N, T, T], each row a distribution over
            the keys (0 at padding).
        input_mask: int [B, T], 1 for real tokens.
        token_count: the real tokens of all replicas.
    """
    student = tf.cast(probabilities, tf.float32)
    teacher = tf.stop_gradient(tf.cast(teacher_probabilities, tf.float32))
    if student.shape[1] != teacher.shape[1]:
        student = tf.reduce_mean(student, axis=1, keepdims=True)
        teacher = tf.reduce_mean(teacher, axis=1, keepdims=True)
    divergence = tf.reduce_sum(tf.math.xlogy(teacher, teacher) - tf.math.xlogy(teacher, student),
                               axis=-1)                                        # [B, N, T]
    return weighted_mean(tf.reduce_mean(divergence, axis=1), input_mask, token_count)
