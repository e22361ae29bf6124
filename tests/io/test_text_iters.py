"""CSVIter and LibSVMIter against the batches MXNet 1.9.1 made of the same files
(tests/fixtures/mxnet/recordio/table.*, tools/make_mxnet_recordio_fixtures.py)."""
import json
from pathlib import Path

import numpy as np
import pytest

import raymod as rm

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mxnet" / "recordio"
EXPECTED = np.load(FIXTURES / "table.npz")
PADS = json.loads((FIXTURES / "table.json").read_text())
F = lambda name: str(FIXTURES / name)  # noqa: E731

CASES = {
    "csv_b5": lambda: rm.io.CSVIter(data_csv=F("table.csv"), data_shape=(6,),
                                    label_csv=F("table_label.csv"), label_shape=(2,),
                                    batch_size=5),
    "csv_b5_noround": lambda: rm.io.CSVIter(data_csv=F("table.csv"), data_shape=(2, 3),
                                            batch_size=5, round_batch=False),
    "csv_part1of2": lambda: rm.io.CSVIter(data_csv=F("table.csv"), data_shape=(6,),
                                          batch_size=4, part_index=1, num_parts=2),
    "libsvm_b4": lambda: rm.io.LibSVMIter(data_libsvm=F("sparse.libsvm"), data_shape=(9,),
                                          batch_size=4),
    "libsvm_labels_b5": lambda: rm.io.LibSVMIter(
        data_libsvm=F("sparse.libsvm"), data_shape=(9,), label_libsvm=F("sparse_label.libsvm"),
        label_shape=(3,), batch_size=5),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_two_epochs_match_mxnet(case):
    it = CASES[case]()
    for epoch in range(2):
        batches = list(it)
        key = f"{case}_e{epoch}"
        assert [b.pad for b in batches] == PADS[key]
        np.testing.assert_array_equal(np.stack([b.data[0] for b in batches]),
                                      EXPECTED[key + "_data"])
        np.testing.assert_array_equal(np.stack([b.label[0] for b in batches]),
                                      EXPECTED[key + "_label"])
        assert it.provide_data[0].shape == EXPECTED[key + "_data"].shape[1:]
        assert it.provide_label[0].shape == EXPECTED[key + "_label"].shape[1:]
        it.reset()


def test_libsvm_dense_rows_follow_the_file(tmp_path):
    """MXNet's own synthetic case: 0-based columns, empty lines of features."""
    (tmp_path / "d.t").write_text("1.0 0:0.5 2:1.2\n-2.0\n-3.0 0:0.6 1:2.4 2:1.2\n4 2:-1.2\n")
    (tmp_path / "l.t").write_text("1.0\n-2.0 0:0.125\n-3.0 2:1.2\n4 1:1.0 2:-1.2\n")
    it = rm.io.LibSVMIter(data_libsvm=str(tmp_path / "d.t"), label_libsvm=str(tmp_path / "l.t"),
                          data_shape=(3,), label_shape=(3,), batch_size=3)
    first, second = list(it)
    f32 = lambda rows: np.float32(rows)  # noqa: E731
    np.testing.assert_array_equal(first.data[0], f32([[0.5, 0, 1.2], [0, 0, 0], [0.6, 2.4, 1.2]]))
    np.testing.assert_array_equal(second.data[0], f32([[0, 0, -1.2], [0.5, 0, 1.2], [0, 0, 0]]))
    np.testing.assert_array_equal(second.label[0], f32([[0, 1, -1.2], [0, 0, 0], [0.125, 0, 0]]))
    assert second.pad == 2


@pytest.mark.parametrize("dtype,entry", [("int32", 200000001), ("int64", 2147483648),
                                         ("float32", 1)])
def test_csv_keeps_integer_types(tmp_path, dtype, entry):
    (tmp_path / "d.csv").write_text((",".join([str(entry)] * 4) + "\n") * 7)
    it = rm.io.CSVIter(data_csv=str(tmp_path / "d.csv"), data_shape=(2, 2), batch_size=3,
                       dtype=dtype)
    for batch in it:
        assert batch.data[0].dtype == np.dtype(dtype)
        assert (batch.data[0] == entry).all() and (batch.label[0] == 0).all()


def test_bad_input_is_named(tmp_path):
    (tmp_path / "d.csv").write_text("1,2,3\n4,5,6\n")
    with pytest.raises(ValueError, match="3 values a line; the shape given asks for 4"):
        rm.io.CSVIter(data_csv=str(tmp_path / "d.csv"), data_shape=(4,))
    with pytest.raises(ValueError, match="dtype must be one of"):
        rm.io.CSVIter(data_csv=str(tmp_path / "d.csv"), data_shape=(3,), dtype="float16")
    with pytest.raises(ValueError, match="data_shape must be"):
        rm.io.CSVIter(data_csv=str(tmp_path / "d.csv"), data_shape=(0,))
    (tmp_path / "s.t").write_text("1 0:1\n2 -1:0.5\n")
    with pytest.raises(ValueError, match=r"s.t:2: column index -1 is outside \[0, 3\)"):
        rm.io.LibSVMIter(data_libsvm=str(tmp_path / "s.t"), data_shape=(3,))
    with pytest.raises(MemoryError, match="dense batch of data needs"):
        rm.io.LibSVMIter(data_libsvm=str(tmp_path / "s.t"), data_shape=(2**40,))
    with pytest.raises(ValueError, match="batch_size 9 needs more rows"):
        list(rm.io.CSVIter(data_csv=str(tmp_path / "d.csv"), data_shape=(3,), batch_size=9))
