"""ArrowIter: tables, Parquet, CSV and dataset directories, by batch and by row range."""
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from raymod.io import ArrowIter, NDArrayIter
from raymod.io.arrow_iter import column_to_numpy


def _fsl(values: np.ndarray) -> pa.Array:
    """A (nested) fixed-size-list array holding ``values`` (n, d1, d2, ...)."""
    arr = pa.array(values.reshape(-1))
    for size in reversed(values.shape[1:]):
        arr = pa.FixedSizeListArray.from_arrays(arr, size)
    return arr


def _table(n=50):
    img = np.arange(n * 2 * 3, dtype=np.float32).reshape(n, 2, 3)
    vec = np.arange(n * 4, dtype=np.float64).reshape(n, 4) * -1
    label = np.arange(n, dtype=np.int64) % 7
    table = pa.table({"img": _fsl(img), "vec": _fsl(vec), "x": pa.array(np.arange(n) * 0.5),
                      "label": label})
    return table, img, vec, label


def test_table_batches_and_descs():
    table, img, vec, label = _table()
    it = ArrowIter(table, "img", "label", batch_size=16)
    assert it.provide_data[0].name == "data" and it.provide_data[0].shape == (16, 2, 3)
    assert it.provide_data[0].dtype == np.float32
    assert it.provide_label[0].name == "softmax_label" and it.provide_label[0].shape == (16,)
    batches = list(it)
    assert len(batches) == 4 and batches[-1].pad == 14
    np.testing.assert_array_equal(batches[0].data[0], img[:16])
    np.testing.assert_array_equal(batches[-1].data[0], np.concatenate([img[48:], img[:14]]))
    np.testing.assert_array_equal(batches[-1].label[0], np.concatenate([label[48:], label[:14]]))


def test_fixed_size_list_is_zero_copy_view_of_arrow_buffer():
    table, img, _, _ = _table()
    it = ArrowIter(table, ["img", "vec"], batch_size=10)
    assert [d.name for d in it.provide_data] == ["img", "vec"]   # several columns keep names
    (a, v), _ = it.take(np.arange(10, 20))
    child = table.column("img").chunk(0).flatten().flatten()
    expected_addr = child.buffers()[1].address + 10 * 6 * 4
    assert a.__array_interface__["data"][0] == expected_addr       # no copy: Arrow's buffer
    assert np.shares_memory(a, child.to_numpy())
    assert not a.flags.writeable
    np.testing.assert_array_equal(a, img[10:20])
    assert v.shape == (10, 4)


def test_column_to_numpy_handles_slices_chunks_and_tensor_type():
    _, img, _, _ = _table(8)
    arr = _fsl(img)
    np.testing.assert_array_equal(column_to_numpy(arr.slice(3, 4)), img[3:7])
    chunked = pa.chunked_array([arr.slice(0, 5), arr.slice(5)])
    np.testing.assert_array_equal(column_to_numpy(chunked), img)     # combined (one copy)
    tensor = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.float32(), [2, 3]),
                                            _fsl(img.reshape(8, 6)))
    np.testing.assert_array_equal(column_to_numpy(tensor), img)
    with pytest.raises(ValueError, match="null"):
        column_to_numpy(pa.array([1.0, None]), "x")


def test_parquet_file_by_batch_and_by_row_range(tmp_path):
    table, img, vec, label = _table()
    path = tmp_path / "train.parquet"
    pq.write_table(table, path, row_group_size=20)
    it = ArrowIter(str(path), ["img"], "label", batch_size=8, shuffle=True, seed=4,
                   last_batch_handle="discard")
    assert it.num_rows == 50 and it._arrays is None                # lazy: nothing read yet
    batches = list(it)
    assert len(batches) == 6
    for b in batches:
        np.testing.assert_array_equal(b.data[0], img[b.index])
        np.testing.assert_array_equal(b.label[0], label[b.index])
    np.testing.assert_array_equal(np.concatenate([b.index for b in batches]), it.idx[:48])
    rows = np.array([49, 3, 3, 17])
    (d,), (lab,) = it.take(rows)
    np.testing.assert_array_equal(d, img[rows])
    np.testing.assert_array_equal(lab, label[rows])
    (r1,), _ = it.take(np.arange(0, 5))
    (r2,), _ = it.take(np.arange(5, 9))
    assert np.shares_memory(r1, it._arrays["img"]) and np.shares_memory(r2, it._arrays["img"])


def test_same_batches_as_ndarray_iter(tmp_path):
    table, img, _, label = _table()
    pq.write_table(table, tmp_path / "t.parquet")
    a = ArrowIter(tmp_path / "t.parquet", "img", "label", batch_size=12, shuffle=True, seed=9,
                  last_batch_handle="roll_over")
    b = NDArrayIter(img, label, batch_size=12, shuffle=True, seed=9, last_batch_handle="roll_over")
    for _ in range(3):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x.data[0], y.data[0])
            assert x.pad == y.pad
        a.reset(); b.reset()


def test_pickled_path_iter_reads_data_itself(tmp_path):
    table, img, _, _ = _table()
    pq.write_table(table, tmp_path / "t.parquet")
    it = ArrowIter(f"file://{tmp_path}/t.parquet", "img", batch_size=5)
    it.take(np.arange(3))
    blob = pickle.dumps(it)
    assert len(blob) < 5000                                      # rows not shipped
    other = pickle.loads(blob)
    np.testing.assert_array_equal(other.take(np.array([7, 8]))[0][0], img[7:9])


def test_csv_file_with_renames_and_dtype(tmp_path):
    n = 30
    feats = np.random.default_rng(0).normal(size=(n, 2))
    table = pa.table({"f0": feats[:, 0], "f1": feats[:, 1], "y": np.arange(n) % 3})
    pacsv.write_csv(table, tmp_path / "d.csv")
    it = ArrowIter(tmp_path / "d.csv", ["f0", "f1"], "y", batch_size=10,
                   data_name={"f0": "a"}, label_name="lab", dtype=np.float32)
    assert [d.name for d in it.provide_data] == ["a", "f1"]
    assert [d.name for d in it.provide_label] == ["lab"]
    assert all(d.dtype == np.float32 for d in it.provide_data + it.provide_label)
    batches = list(it)
    assert len(batches) == 3
    np.testing.assert_allclose(batches[1].data[1], feats[10:20, 1].astype(np.float32))
    np.testing.assert_array_equal(batches[2].label[0], np.arange(20, 30) % 3)


def test_dataset_directory(tmp_path):
    table, img, _, label = _table(40)
    root = tmp_path / "ds"
    root.mkdir()
    for k in range(4):   # file names sort in row order
        pq.write_table(table.slice(10 * k, 10), root / f"part-{k}.parquet")
    it = ArrowIter(str(root), "img", "label", batch_size=16)
    assert it.num_rows == 40
    got = np.concatenate([b.data[0][:16 - b.pad] for b in it])
    np.testing.assert_array_equal(got, img)
    np.testing.assert_array_equal(it.take(np.array([39, 0]))[1][0], label[[39, 0]])


def test_errors(tmp_path):
    table, *_ = _table(5)
    with pytest.raises(ValueError, match="available columns: img, vec, x, label"):
        ArrowIter(table, "image")
    with pytest.raises(ValueError, match="batch_size"):
        ArrowIter(table, "img", batch_size=-1)
    with pytest.raises(ValueError, match="empty"):
        ArrowIter(table.slice(0, 0), "img")
    with pytest.raises(ValueError, match="pad, discard, roll_over"):
        ArrowIter(table, "img", last_batch_handle="nope")
    with pytest.raises(FileNotFoundError):
        ArrowIter(tmp_path / "missing.parquet", "img")
    ragged = pa.table({"v": pa.array([[1.0], [2.0, 3.0]])})
    with pytest.raises(TypeError, match="variable-length"):
        ArrowIter(ragged, "v")
