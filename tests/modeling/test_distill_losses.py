"""The distillation losses of `modeling/losses.py` against values computed by hand."""
import numpy as np
import pytest
import tensorflow as tf

from modeling import losses

LN3 = float(np.log(3.0))
# Student [2 ln 3, 0] and teacher [0, 2 ln 3] at T = 2: q = [3/4, 1/4], p = [1/4, 3/4], so
# T^2 * -sum p log q = 4 * -(1/4 ln 3/4 + 3/4 ln 1/4) = ln(4/3) + 3 ln 4 = ln(256 / 3).
STUDENT, TEACHER, AT_T2 = [2 * LN3, 0.0], [0.0, 2 * LN3], np.log(256.0 / 3.0)


def test_soft_cross_entropy_is_scaled_by_the_temperature_squared():
    result = losses.soft_cross_entropy(tf.constant([STUDENT, [0.0, 0.0]]),
                                       tf.constant([TEACHER, [5.0, -1.0]]), temperature=2.0)
    # A uniform student: -sum p log(1/2) = ln 2 whatever p, times T^2 = 4.
    np.testing.assert_allclose(result.numpy(), [AT_T2, 4 * np.log(2.0)], rtol=1e-6)
    at_one = losses.soft_cross_entropy(tf.constant([[0.0, 0.0]]), tf.constant([[0.0, LN3]]))
    np.testing.assert_allclose(at_one.numpy(), [np.log(2.0)], rtol=1e-6)


def test_the_teacher_gets_no_gradient():
    student, teacher = tf.Variable([STUDENT]), tf.Variable([TEACHER])
    with tf.GradientTape() as tape:
        loss = losses.soft_cross_entropy(student, teacher, 2.0)
    student_gradient, teacher_gradient = tape.gradient(loss, [student, teacher])
    assert teacher_gradient is None
    # d/dz of T^2 CE(p, softmax(z / T)) = T (q - p): 2 * ([3/4, 1/4] - [1/4, 3/4]).
    np.testing.assert_allclose(student_gradient.numpy(), [[1.0, -1.0]], rtol=1e-5)


def test_classifier_loss_mixes_soft_over_all_rows_and_hard_over_labelled_rows():
    # Row 0 labelled with class 1: softmax([2 ln 3, 0]) = [9/10, 1/10], nll ln 10.
    # Row 1 (transfer data) has no label: it counts in the soft mean only.
    logits, teacher = tf.constant([STUDENT, [0.0, 0.0]]), tf.constant([TEACHER, [1.0, 0.0]])
    result = losses.classifier_distillation_loss(
        logits, teacher, tf.constant([1, 0]), temperature=2.0, alpha=0.25,
        labelled=tf.constant([1.0, 0.0]))
    soft = (AT_T2 + 4 * np.log(2.0)) / 2
    np.testing.assert_allclose(result.numpy(), 0.25 * soft + 0.75 * np.log(10.0), rtol=1e-6)
    alone = losses.classifier_distillation_loss(logits, teacher, tf.constant([1, 0]), 2.0, 1.0)
    np.testing.assert_allclose(alone.numpy(), soft, rtol=1e-6)


def test_multi_label_and_regression_soft_losses():
    # Multi-label, T = 1: each label's binary cross-entropy against sigmoid(teacher), averaged.
    # sigmoid(0) = 1/2, so against a student at 0: ln 2 whatever the target.
    multi = losses.soft_classifier_loss(tf.constant([[0.0, 0.0]]), tf.constant([[3.0, -1.0]]),
                                        1.0, losses.MULTI_LABEL)
    np.testing.assert_allclose(multi.numpy(), [np.log(2.0)], rtol=1e-6)
    regression = losses.soft_classifier_loss(tf.constant([[1.5]]), tf.constant([[0.5]]), 3.0,
                                             losses.REGRESSION)
    np.testing.assert_allclose(regression.numpy(), [1.0], rtol=1e-6)


def test_token_loss_counts_only_tokens_with_a_label_id():
    # Tokens 0 and 2 carry tags; token 1 (-1, a word's later piece) counts nowhere.
    logits = tf.constant([[STUDENT, [9.0, -9.0], [0.0, 0.0]]])
    teacher = tf.constant([[TEACHER, [-9.0, 9.0], [0.0, LN3]]])
    result = losses.token_distillation_loss(logits, teacher, tf.constant([[1, -1, 0]]),
                                            temperature=2.0, alpha=0.5)
    soft = (AT_T2 + 4 * np.log(2.0)) / 2
    hard = (np.log(10.0) + np.log(2.0)) / 2
    np.testing.assert_allclose(result.numpy(), 0.5 * soft + 0.5 * hard, rtol=1e-6)


def test_span_loss_masks_padding_out_of_both_distributions():
    # Two real tokens and one of padding, whose logits are anything: they must not count.
    start = tf.constant([STUDENT + [50.0]])
    teacher = tf.constant([TEACHER + [-50.0]])
    result = losses.span_distillation_loss(
        start, start, teacher, teacher, tf.constant([1]), tf.constant([1]),
        tf.constant([[1, 1, 0]]), temperature=2.0, alpha=1.0)
    np.testing.assert_allclose(result.numpy(), AT_T2, rtol=1e-5)


def test_hidden_state_loss_is_the_mean_square_over_real_tokens():
    states = tf.constant([[[1.0, 1.0], [3.0, 3.0], [100.0, 100.0]]])
    teacher = tf.constant([[[0.0, 2.0], [0.0, 3.0], [0.0, 0.0]]])
    result = losses.hidden_state_loss(states, teacher, tf.constant([[1, 1, 0]]))
    # Token 0: (1 + 1) / 2 = 1; token 1: (9 + 0) / 2 = 4.5; mean 2.75.
    np.testing.assert_allclose(result.numpy(), 2.75, rtol=1e-6)


def test_attention_loss_is_the_teachers_kl_divergence():
    student = tf.constant([[[[0.25, 0.75], [0.5, 0.5]]]])      # [B=1, N=1, T=2, T=2]
    teacher = tf.constant([[[[0.5, 0.5], [0.5, 0.5]]]])
    result = losses.attention_distribution_loss(student, teacher, tf.constant([[1, 1]]))
    # Query 0: 1/2 ln 2 + 1/2 ln 2/3 = 1/2 ln 4/3; query 1: 0.
    np.testing.assert_allclose(result.numpy(), np.log(4.0 / 3.0) / 4, rtol=1e-6)
    padded = losses.attention_distribution_loss(student, teacher, tf.constant([[1, 0]]))
    np.testing.assert_allclose(padded.numpy(), np.log(4.0 / 3.0) / 2, rtol=1e-6)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_alpha_zero_is_the_task_loss_and_one_the_teachers(alpha):
    logits, teacher = tf.constant([STUDENT]), tf.constant([TEACHER])
    result = losses.classifier_distillation_loss(logits, teacher, tf.constant([1]), 2.0, alpha)
    np.testing.assert_allclose(result.numpy(), AT_T2 if alpha else np.log(10.0), rtol=1e-6)
