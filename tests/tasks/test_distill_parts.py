"""The parts of a distillation run on tiny models, in-process: the student's layers taken from
the teacher (`modeling/checkpoints/layer_subset.py`), the teacher's outputs kept once
(`data/distillation/teacher_outputs.py`), the intermediate outputs
(`modeling/models/distillation.py`), the layers of the intermediate losses and the transfer file
(`tasks/distillation_models.py`, `tasks/distillation_data.py`)."""
import numpy as np
import pytest

from data.distillation.teacher_outputs import TeacherOutputs, fingerprint
from modeling import checkpoints
from modeling.config import BertConfig
from modeling.models.distillation import DistillationStudent, LayerPairs
from tasks import distillation_models
from tasks.distillation_data import read_transfer_file

CONFIG = BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=4, num_attention_heads=2,
                    intermediate_size=16, max_position_embeddings=16)


def _values(layer) -> list[np.ndarray]:
    return [weight.numpy() for weight in layer.weights]


def _same(first, second) -> bool:
    return all(np.array_equal(a, b) for a, b in zip(_values(first), _values(second)))


@pytest.fixture(scope="module")
def teacher():
    return checkpoints.build_model(CONFIG, checkpoints.ModelSpec("classifier", 3))


def test_student_layers_are_exactly_those_of_the_teacher(teacher):
    student = checkpoints.build_model(
        BertConfig(**{**CONFIG.__dict__, "num_hidden_layers": 2}),
        checkpoints.ModelSpec("classifier", 3))
    checkpoints.copy_layers(teacher, student, [1, 3])
    layer = teacher.encoder.get_layer
    assert _same(student.encoder.get_layer("layer_0"), layer("layer_1"))
    assert _same(student.encoder.get_layer("layer_1"), layer("layer_3"))
    assert not _same(student.encoder.get_layer("layer_0"), layer("layer_0"))
    # Everything outside the layers is the teacher's: embeddings, pooler, head.
    outside = [w.path for w in teacher.weights if "layer_" not in w.path]
    assert outside
    for path in outside:
        mine = next(w for w in student.weights if w.path == path)
        theirs = next(w for w in teacher.weights if w.path == path)
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy(), err_msg=path)


@pytest.mark.parametrize("layers,message", [
    ([0, 4], "layers 4 are not layers of"),
    ([1, 1], "a layer is named twice"),
    ([], "no layers given"),
])
def test_layers_outside_the_teacher_are_refused(layers, message):
    with pytest.raises(ValueError, match=message):
        checkpoints.check_layers(layers, 4)


def test_a_student_of_another_size_is_refused_by_name(teacher):
    student = checkpoints.build_model(
        BertConfig(**{**CONFIG.__dict__, "num_hidden_layers": 3}),
        checkpoints.ModelSpec("classifier", 3))
    with pytest.raises(checkpoints.CheckpointMismatchError, match="layer_2"):
        checkpoints.copy_layers(teacher, student, [0, 1])


def test_intermediate_outputs_project_a_narrower_student(teacher):
    narrow = BertConfig(**{**CONFIG.__dict__, "hidden_size": 4, "num_hidden_layers": 1,
                           "intermediate_size": 8})
    student = checkpoints.build_model(narrow, checkpoints.ModelSpec("classifier", 3))
    wrapped = DistillationStudent(student, LayerPairs(((0, 0), (1, 4)), ((0, 3),)), 8)
    inputs = {"input_ids": np.array([[2, 5, 6, 3, 0]]), "input_mask": np.array([[1, 1, 1, 1, 0]]),
              "segment_ids": np.zeros((1, 5), np.int64)}
    outputs = wrapped(inputs)
    assert [tuple(s.shape) for s in outputs["hidden_states"]] == [(1, 5, 8), (1, 5, 8)]
    probabilities = outputs["attention_probabilities"][0].numpy()       # [B, N, T, T]
    assert probabilities.shape == (1, 2, 5, 5)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, rtol=1e-5)
    assert np.all(probabilities[..., 4] < 1e-4)                         # padding: no weight
    # Trained: the student's variables and the projection, each once.
    assert len(wrapped.trainable_variables) == len(student.trainable_variables) + 1


class _Counting:
    """The teacher's outputs of rows start..end-1 (row number + output index), counted."""

    def __init__(self):
        self.rows = []

    def __call__(self, start, end):
        self.rows.extend(range(start, end))
        rows = np.arange(start, end, dtype=np.float32)[:, None]
        return {"logits": rows + np.arange(3, dtype=np.float32)}


def _cache(folder, source="a"):
    return TeacherOutputs(str(folder), {"logits": (3,)}, 10, {"teacher": source}, shard_rows=4)


def test_outputs_are_computed_once_and_read_back(tmp_path):
    compute = _Counting()
    assert _cache(tmp_path).fill(compute) == 10
    assert compute.rows == list(range(10))
    again = _Counting()
    assert _cache(tmp_path).fill(again) == 0
    assert again.rows == []
    read = _cache(tmp_path).read()["logits"]
    np.testing.assert_array_equal(read, np.arange(10)[:, None] + np.arange(3))


def test_a_run_stopped_while_labelling_computes_only_the_missing_shards(tmp_path):
    _cache(tmp_path).fill(_Counting())
    cache = _cache(tmp_path)
    (tmp_path / cache.shard_path(1).split("/")[-1]).unlink()   # as a kill before shard 1
    compute = _Counting()
    assert cache.fill(compute) == 4
    assert compute.rows == [4, 5, 6, 7]
    assert cache.read()["logits"].shape == (10, 3)


def test_outputs_of_another_teacher_are_refused_not_mixed(tmp_path):
    _cache(tmp_path).fill(_Counting())
    with pytest.raises(ValueError, match="outputs of another teacher .* differs in source"):
        _cache(tmp_path, source="b").fill(_Counting())


def test_fingerprint_sees_values_and_names():
    one = fingerprint([("a", np.zeros(3))])
    assert one == fingerprint([("a", np.zeros(3))])
    assert one != fingerprint([("a", np.ones(3))])
    assert one != fingerprint([("b", np.zeros(3))])


class _Sized:
    def __init__(self, layers):
        self.config = BertConfig(**{**CONFIG.__dict__, "num_hidden_layers": layers})


def _pairs(hidden, attention=()):
    student, teacher = _Sized(2), _Sized(4)
    teacher.model = teacher
    return distillation_models.layer_pairs(hidden, attention, student, teacher)


def test_layer_pairs_read_from_zero_from_the_last_and_the_embeddings():
    pairs = _pairs(["embeddings:embeddings", "0:1", "-1:-1"], ["1:3", "0:-2"])
    # Hidden states are numbered as Hugging Face's: 0 the embeddings, i layer i - 1's output.
    assert pairs.hidden == ((0, 0), (1, 2), (2, 4))
    assert pairs.attention == ((1, 3), (0, 2))


@pytest.mark.parametrize("hidden,attention,message", [
    (["0"], [], "is not `student_layer:teacher_layer`"),
    (["2:0"], [], "layer 2 of a model of 2 layers"),
    (["0:x"], [], "'x' is not a layer number or embeddings"),
    ([], ["embeddings:0"], "'embeddings' is not a layer number$"),
])
def test_bad_layer_pairs_are_named(hidden, attention, message):
    with pytest.raises(ValueError, match=message):
        _pairs(hidden, attention)


def test_transfer_file_lines(tmp_path):
    path = tmp_path / "transfer.txt"
    path.write_text("a text\n\nfirst ||| second\n", encoding="utf-8")
    assert read_transfer_file(str(path), "classifier") == ["a text", "first ||| second"]
    with pytest.raises(ValueError, match="line 1"):
        read_transfer_file(str(path), "squad")
    path.write_text("\n \n", encoding="utf-8")
    with pytest.raises(ValueError, match="no lines of text"):
        read_transfer_file(str(path), "classifier")
