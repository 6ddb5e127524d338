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
    weights = tf.cast(label_ids >= 0, tf.float32)
    losses = per_example_cross_entropy(logits, tf.maximum(label_ids, 0))
    count = tf.reduce_sum(weights) if label_count is None else tf.cast(label_count, tf.float32)
    return tf.reduce_sum(losses * weights) / tf.maximum(count, 1.0)
