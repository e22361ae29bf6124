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


def dense(array):
    """A batch array as numpy: LibSVMIter's CSR batches (MXNet's CSRNDArray) made dense."""
    return array.todense() if hasattr(array, "todense") else array


@pytest.mark.parametrize("case", sorted(CASES))
def test_two_epochs_match_mxnet(case):
    it = CASES[case]()
    for epoch in range(2):
        batches = list(it)
        key = f"{case}_e{epoch}"
        assert [b.pad for b in batches] == PADS[key]
        if case.startswith("libsvm"):  # MXNet's LibSVMIter hands out csr data
            assert all(b.data[0].stype == "csr" for b in batches)
        np.testing.assert_array_equal(np.stack([dense(b.data[0]) for b in batches]),
                                      EXPECTED[key + "_data"])
        np.testing.assert_array_equal(np.stack([dense(b.label[0]) for b in batches]),
                                      EXPECTED[key + "_label"])
        assert it.provide_data[0].shape == EXPECTED[key + "_data"].shape[1:]
        assert it.provide_label[0].shape == EXPECTED[key + "_label"].shape[1:]
        it.reset()


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
    # batches are CSR: a width no dense batch could have is fine (was a MemoryError)
    (tmp_path / "w.t").write_text("1 0:1\n2 1099511627775:0.5\n")
    wide = rm.io.LibSVMIter(data_libsvm=str(tmp_path / "w.t"), data_shape=(2**40,))
    assert wide.next().data[0].shape == (1, 2**40)
    with pytest.raises(ValueError, match="batch_size 9 needs more rows"):
        list(rm.io.CSVIter(data_csv=str(tmp_path / "d.csv"), data_shape=(3,), batch_size=9))
