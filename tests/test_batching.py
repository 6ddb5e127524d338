"""How examples become batches: every row once per epoch, replicas splitting the same shuffle,
prediction in order, and host-gathered batches padded to their own width."""
import numpy as np
import tensorflow as tf

from training.batching import ArrayExamples, HostExamples


def _arrays(num_examples: int = 10) -> dict[str, np.ndarray]:
    rows = np.arange(num_examples, dtype=np.int32)
    return {"input_ids": np.stack([rows, rows + 100], axis=1), "label_ids": rows}


def _take(dataset: tf.data.Dataset, count: int) -> list[dict[str, np.ndarray]]:
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(count)]


def test_each_epoch_holds_every_row_once_and_rows_stay_whole():
    dataset = ArrayExamples(_arrays()).training_dataset_fn(5, seed=3)(
        tf.distribute.InputContext())
    batches = _take(dataset, 4)
    for epoch in (batches[:2], batches[2:]):
        labels = np.concatenate([batch["label_ids"] for batch in epoch])
        assert sorted(labels) == list(range(10))
    for batch in batches:
        np.testing.assert_array_equal(batch["input_ids"][:, 0], batch["label_ids"])
        np.testing.assert_array_equal(batch["input_ids"][:, 1], batch["label_ids"] + 100)
    epochs = [np.concatenate([b["label_ids"] for b in batches[i:i + 2]]) for i in (0, 2)]
    assert list(epochs[0]) != list(epochs[1]), "each epoch is shuffled anew"


def test_two_input_pipelines_split_the_global_batches_of_one():
    examples = ArrayExamples(_arrays(12))
    one = _take(examples.training_dataset_fn(4, seed=1)(tf.distribute.InputContext()), 3)
    halves = [_take(examples.training_dataset_fn(4, seed=1)(
        tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i,
                                   num_replicas_in_sync=2)), 3) for i in (0, 1)]
    for step in range(3):
        together = np.concatenate([halves[0][step]["label_ids"], halves[1][step]["label_ids"]])
        assert sorted(together) == sorted(one[step]["label_ids"])


def test_prediction_batches_every_row_in_order_and_selected_keys_only():
    examples = ArrayExamples(_arrays(7), keys=("input_ids",))
    batches = _take(examples.prediction_dataset(3), 10)
    assert [len(batch["input_ids"]) for batch in batches] == [3, 3, 1]
    assert all(set(batch) == {"input_ids"} for batch in batches)
    np.testing.assert_array_equal(np.concatenate([b["input_ids"] for b in batches])[:, 0],
                                  np.arange(7))


def test_host_examples_pad_each_batch_to_its_own_width():
    lengths = [1, 3, 2, 2]

    def batch_fn(rows):
        width = max(lengths[row] for row in rows)
        values = np.zeros((len(rows), width), np.float32)
        for i, row in enumerate(rows):
            values[i, :lengths[row]] = row + 1
        return {"values": values}

    examples = HostExamples(4, batch_fn, {"values": (np.float32, (None,))})
    batches = _take(examples.prediction_dataset(2), 5)
    assert [batch["values"].shape for batch in batches] == [(2, 3), (2, 2)]
    np.testing.assert_array_equal(batches[0]["values"], [[1, 0, 0], [2, 2, 2]])
    assert examples.prediction_dataset(2).element_spec["values"].shape.as_list() == [None, None]
