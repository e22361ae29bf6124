"""Sparse rows from Arrow list columns (ids, values): CSRArray batches of ArrowIter and
RayDatasetIter, equal to the rows' own ids and values across batch and block boundaries."""
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raymod.io import ArrowIter
from raymod.io.arrow_iter import lists_to_csr
from raymod.sparse import CSRArray

WIDTH = 50


def sparse_table(n=23, seed=0):
    """``n`` rows of ids (ascending, unique), float32 values, some empty rows, a row id."""
    rng = np.random.default_rng(seed)
    ids, values = [], []
    for i in range(n):
        k = 0 if i % 5 == 3 else int(rng.integers(1, 7))
        ids.append(sorted(rng.choice(WIDTH, k, replace=False).tolist()))
        values.append(rng.normal(size=k).astype(np.float32).tolist())
    table = pa.table({"ids": pa.array(ids, pa.list_(pa.int32())),
                      "vals": pa.array(values, pa.list_(pa.float32())),
                      "row": pa.array(np.arange(n))})
    return table, ids, values


def dense(ids, values, rows):
    """The expected dense rows, written out from the Python lists."""
    out = np.zeros((len(rows), WIDTH), np.float32)
    for i, r in enumerate(rows):
        for c, v in zip(ids[r], values[r]):
            out[i, c] += v
    return out


def check_csr(csr, ids, values, rows):
    """``csr`` holds exactly rows ``rows`` of the lists, entry by entry."""
    assert isinstance(csr, CSRArray) and csr.shape == (len(rows), WIDTH)
    csr.check_format()
    for i, r in enumerate(rows):
        lo, hi = csr.indptr[i], csr.indptr[i + 1]
        assert csr.indices[lo:hi].tolist() == ids[r]
        np.testing.assert_array_equal(csr.data[lo:hi], np.float32(values[r]))
    np.testing.assert_array_equal(csr.todense(), dense(ids, values, rows))


def test_ids_and_values_make_csr_batches():
    table, ids, values = sparse_table()
    it = ArrowIter(table, "ids", "row", batch_size=5, sparse={"ids": ("vals", WIDTH)})
    (desc,) = it.provide_data
    assert (desc.name, desc.shape, desc.stype, np.dtype(desc.dtype)) == \
        ("data", (5, WIDTH), "csr", np.float32)
    assert getattr(it.provide_label[0], "stype", "default") == "default"
    for _ in range(2):
        batches = list(it)
        assert [b.pad for b in batches] == [0, 0, 0, 0, 2]
        for b in batches:
            check_csr(b.data[0], ids, values, b.label[0].tolist())
        it.reset()
    # the last batch wraps around to the first rows
    assert batches[-1].label[0].tolist() == [20, 21, 22, 0, 1]


def test_shuffled_parquet_across_row_groups(tmp_path):
    table, ids, values = sparse_table(41, seed=1)
    pq.write_table(table, tmp_path / "s.parquet", row_group_size=7)  # several chunks
    it = ArrowIter(tmp_path / "s.parquet", "ids", "row", batch_size=8, shuffle=True, seed=3,
                   sparse={"ids": ("vals", WIDTH)}, last_batch_handle="roll_over")
    for _ in range(3):
        for b in it:
            check_csr(b.data[0], ids, values, b.label[0].tolist())
        it.reset()
    rows = np.array([40, 0, 0, 13, 7])  # any order, repeats
    (csr,), (row,) = it.take(rows)
    check_csr(csr, ids, values, rows.tolist())
    (csr,), _ = it.take(np.arange(30, 38))  # a contiguous range: a slice
    check_csr(csr, ids, values, list(range(30, 38)))


def test_ids_alone_mean_ones_and_repeats_add_up():
    ids = [[3, 1, 3], [], None, [0, 49], [7]]
    table = pa.table({"words": pa.array(ids, pa.large_list(pa.int64())), "y": np.arange(5)})
    it = ArrowIter(table, "words", "y", batch_size=5, sparse={"words": WIDTH})
    assert np.dtype(it.provide_data[0].dtype) == np.float32
    csr = it.next().data[0]
    csr.check_format()
    assert csr.indptr.tolist() == [0, 2, 2, 2, 4, 5]
    assert csr.indices.tolist() == [1, 3, 0, 49, 7]
    np.testing.assert_array_equal(csr.data, np.float32([1, 2, 1, 1, 1]))
    # a dtype casts the values; (None, width) is the same as width
    it = ArrowIter(table, "words", batch_size=5, sparse={"words": (None, WIDTH)}, dtype="float64")
    assert it.next().data[0].dtype == np.float64


def test_unsorted_ids_and_a_sparse_label():
    table = pa.table({"x": pa.array([[4, 2, 9], [1]]), "v": pa.array([[1.0, 2.0, 3.0], [4.0]]),
                      "tags": pa.array([[2, 0], [1]])})
    it = ArrowIter(table, "x", "tags", batch_size=2, sparse={"x": ("v", 10), "tags": 3})
    batch = it.next()
    np.testing.assert_array_equal(batch.data[0].todense()[0, [2, 4, 9]], [2.0, 1.0, 3.0])
    assert batch.data[0].dtype == np.float64  # the values column's type
    np.testing.assert_array_equal(batch.label[0].todense(), np.float32([[1, 0, 1], [0, 1, 0]]))
    assert it.provide_label[0].stype == "csr" and it.provide_label[0].shape == (2, 3)


def test_lists_to_csr_on_a_sliced_array():
    table, ids, values = sparse_table(12)
    part = lists_to_csr(table.column("ids").chunk(0).slice(4, 6),
                        table.column("vals").chunk(0).slice(4, 6), WIDTH, np.float32, "ids")
    check_csr(part, ids, values, list(range(4, 10)))


def test_errors_name_the_column_and_row():
    table = pa.table({"ids": pa.array([[1], [2, 60]]), "vals": pa.array([[1.0], [1.0, 2.0]]),
                      "short": pa.array([[1.0], [1.0]]), "x": [1.0, 2.0]})
    with pytest.raises(ValueError, match=r"'ids': row 1 holds column id 60, outside \[0, 50\)"):
        ArrowIter(table, "ids", sparse={"ids": ("vals", WIDTH)}).next()
    with pytest.raises(ValueError, match="'ids': row 1 has 2 ids and 1 values"):
        ArrowIter(table, "ids", sparse={"ids": ("short", 100)}).next()
    with pytest.raises(TypeError, match="must be a list of integers"):
        ArrowIter(table, "vals", sparse={"vals": 5})
    with pytest.raises(TypeError, match="must be a list of numbers"):
        ArrowIter(table, "ids", sparse={"ids": ("x", 100)})
    with pytest.raises(ValueError, match="values column 'nope' not found"):
        ArrowIter(table, "ids", sparse={"ids": ("nope", 100)})
    with pytest.raises(ValueError, match="not one of the data or label columns"):
        ArrowIter(table, "x", sparse={"ids": 100})
    with pytest.raises(ValueError, match="width must be a positive int"):
        ArrowIter(table, "ids", sparse={"ids": ("vals", 0)})


@pytest.mark.ray
def test_ray_dataset_csr_across_blocks(ray_cluster):
    import ray.data
    import raymod as rm
    table, ids, values = sparse_table(31, seed=2)
    ds = ray.data.from_arrow(table).repartition(3).materialize()
    it = rm.io.RayDatasetIter(ds, "ids", "row", batch_size=8, shuffle=True, seed=1,
                              sparse={"ids": ("vals", WIDTH)})
    assert len(it.reader().refs) == 3
    assert it.provide_data[0].stype == "csr" and it.provide_data[0].shape == (8, WIDTH)
    for b in it:  # shuffled rows: gathered from several blocks
        check_csr(b.data[0], ids, values, np.asarray(b.label[0]).tolist())
    (csr,), (row,) = it.take(np.arange(it.num_rows))
    check_csr(csr, ids, values, row.tolist())
    (csr,), (row,) = it.take(np.arange(2, 6))  # inside the first block: a slice of it
    check_csr(csr, ids, values, row.tolist())
