"""LibSVMIter's CSR batches, written out, against what MXNet 1.9.1's LibSVMIter makes of the
same text (the expected arrays and parts below were printed by MXNet 1.9.1)."""
import pickle

import numpy as np
import pytest

import raymod as rm
from raymod.io import libsvm_iter
from raymod.io.libsvm_iter import LibSVMRows, part_range
from raymod.sparse import CSRArray

# ten rows: label-only lines, blank lines, CRLF line ends, ascending columns
TEXT = ("0 1:0.5 4:2\n1\n2 0:1 2:1 3:1 5:1 6:1 7:1\n\n\n3 7:-1\r\n4 2:0.25 3:8\r\n"
        "5 0:1\n6 1:1 2:2 3:3 4:4 5:5 6:6 7:7\n7 6:0.5\n8\n9 0:9 7:9\n")

# MXNet 1.9.1, LibSVMIter(data_shape=(8,), batch_size=4): per epoch, each batch's
# pad, indptr, indices, data and label
MXNET_B4 = [
    [(0, [0, 2, 2, 8, 9], [1, 4, 0, 2, 3, 5, 6, 7, 7],
      [0.5, 2, 1, 1, 1, 1, 1, 1, -1], [0, 1, 2, 3]),
     (0, [0, 2, 3, 10, 11], [2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 6],
      [0.25, 8, 1, 1, 2, 3, 4, 5, 6, 7, 0.5], [4, 5, 6, 7]),
     (2, [0, 0, 2, 4, 4], [0, 7, 1, 4], [9, 9, 0.5, 2], [8, 9, 0, 1])],
    # the next epoch starts after the two rows that filled the last batch
    [(0, [0, 6, 7, 9, 10], [0, 2, 3, 5, 6, 7, 7, 2, 3, 0],
      [1, 1, 1, 1, 1, 1, -1, 0.25, 8, 1], [2, 3, 4, 5]),
     (0, [0, 7, 8, 8, 10], [1, 2, 3, 4, 5, 6, 7, 6, 0, 7],
      [1, 2, 3, 4, 5, 6, 7, 0.5, 9, 9], [6, 7, 8, 9])],
]

# MXNet 1.9.1's num_parts/part_index on TEXT: the labels (= row numbers) each part reads
MXNET_PARTS = {
    3: [[0, 1, 2], [3, 4, 5, 6], [7, 8, 9]],
    5: [[0, 1, 2], [3], [4, 5, 6], [], [7, 8, 9]],
    9: [[0, 1, 2], [], [3], [4], [5, 6], [], [], [7, 8, 9], []],
}


def dense_rows(text, width):
    """The file's rows, written out independently of the iterator: (labels, dense rows)."""
    labels, rows = [], []
    for line in text.splitlines():
        if line.split():
            label, *pairs = line.split()
            row = np.zeros(width, np.float32)
            for pair in pairs:
                col, value = pair.split(":")
                row[int(col)] = float(value)
            labels.append(float(label))
            rows.append(row)
    return np.array(labels, np.float32), np.array(rows)


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "data.t"
    p.write_bytes(TEXT.encode())
    return str(p)


def test_batches_are_mxnets_csr_arrays(path):
    it = rm.io.LibSVMIter(data_libsvm=path, data_shape=(8,), batch_size=4)
    labels, rows = dense_rows(TEXT, 8)
    for epoch, want in enumerate(MXNET_B4):
        got = list(it)
        assert len(got) == len(want)
        for batch, (pad, indptr, indices, data, label) in zip(got, want):
            csr = batch.data[0]
            assert isinstance(csr, CSRArray) and csr.stype == "csr" and csr.shape == (4, 8)
            csr.check_format()
            assert batch.pad == pad
            assert csr.indptr.tolist() == indptr and csr.indices.tolist() == indices
            np.testing.assert_array_equal(csr.data, np.float32(data))
            assert csr.data.dtype == np.float32 and csr.indices.dtype == np.int64
            np.testing.assert_array_equal(batch.label[0], np.float32(label))
            # the same rows as the file's lines, entry by entry
            np.testing.assert_array_equal(csr.todense(), rows[batch.index])
            np.testing.assert_array_equal(batch.label[0], labels[batch.index])
        it.reset()


def test_descriptors_say_csr(path, tmp_path):
    it = rm.io.LibSVMIter(data_libsvm=path, data_shape=(8,), batch_size=4, data_name="x",
                          label_name="y")
    (data,), (label,) = it.provide_data, it.provide_label
    assert (data.name, data.shape, data.stype) == ("x", (4, 8), "csr")
    assert (label.name, label.shape) == ("y", (4,))
    assert getattr(label, "stype", "default") == "default"
    assert dict(it.provide_data) == {"x": (4, 8)}  # still a (name, shape) tuple


def test_mxnet_docs_example_with_a_label_file(tmp_path):
    """MXNet's own example (iter_libsvm.cc, test_io.py): labels from a file are csr too."""
    (tmp_path / "d.t").write_text("1.0 0:0.5 2:1.2\n-2.0\n-3.0 0:0.6 1:2.4 2:1.2\n4 2:-1.2\n")
    (tmp_path / "l.t").write_text("1.0\n-2.0 0:0.125\n-3.0 2:1.2\n4 1:1.0 2:-1.2\n")
    it = rm.io.LibSVMIter(data_libsvm=str(tmp_path / "d.t"), label_libsvm=str(tmp_path / "l.t"),
                          data_shape=(3,), label_shape=(3,), batch_size=3)
    assert it.provide_label[0].shape == (3, 3) and it.provide_label[0].stype == "csr"
    first, second = list(it)
    f32 = np.float32
    np.testing.assert_array_equal(first.data[0].todense(),
                                  f32([[0.5, 0, 1.2], [0, 0, 0], [0.6, 2.4, 1.2]]))
    label = first.label[0]
    assert isinstance(label, CSRArray) and label.shape == (3, 3)
    assert label.indptr.tolist() == [0, 0, 1, 2] and label.indices.tolist() == [0, 2]
    np.testing.assert_array_equal(label.data, f32([0.125, 1.2]))
    np.testing.assert_array_equal(second.data[0].todense(),
                                  f32([[0, 0, -1.2], [0.5, 0, 1.2], [0, 0, 0]]))
    np.testing.assert_array_equal(second.label[0].todense(),
                                  f32([[0, 1, -1.2], [0, 0, 0], [0.125, 0, 0]]))
    assert second.pad == 2
    # without a label file: the lines' leading numbers, dense
    it = rm.io.LibSVMIter(data_libsvm=str(tmp_path / "d.t"), data_shape=(3,), batch_size=3)
    np.testing.assert_array_equal(it.next().label[0], f32([1, -2, -3]))


def test_round_batch_false_pads_with_the_previous_batch(path):
    it = rm.io.LibSVMIter(data_libsvm=path, data_shape=(8,), batch_size=4, round_batch=False)
    _, rows = dense_rows(TEXT, 8)
    batches = list(it)
    assert [b.pad for b in batches] == [0, 0, 2]
    assert batches[-1].index.tolist() == [8, 9, 6, 7]
    np.testing.assert_array_equal(batches[-1].data[0].todense(), rows[[8, 9, 6, 7]])
    it.reset()
    assert [b.index.tolist()[0] for b in it] == [0, 4, 8]  # no wrap: every epoch from row 0


@pytest.mark.parametrize("num_parts", sorted(MXNET_PARTS))
def test_parts_are_mxnets_byte_ranges(path, num_parts):
    _, rows = dense_rows(TEXT, 8)
    seen = []
    for k, want in enumerate(MXNET_PARTS[num_parts]):
        if not want:
            with pytest.raises(ValueError, match=f"part {k} of {num_parts}.*holds no lines"):
                rm.io.LibSVMIter(data_libsvm=path, data_shape=(8,), num_parts=num_parts,
                                 part_index=k)
            continue
        it = rm.io.LibSVMIter(data_libsvm=path, data_shape=(8,), batch_size=len(want),
                              num_parts=num_parts, part_index=k)
        batch = it.next()
        assert batch.label[0].tolist() == want
        np.testing.assert_array_equal(batch.data[0].todense(), rows[want])
        seen += want
    assert seen == list(range(10))


def test_parts_cover_every_row_once(tmp_path):
    """Lines of very different lengths: every line in exactly one part, in file order."""
    rng = np.random.default_rng(5)
    lines = [" ".join([str(i)] + [f"{c}:1" for c in sorted(rng.choice(50, rng.integers(0, 30),
                                                                        replace=False))])
             for i in range(61)]
    (tmp_path / "f.t").write_text("\n".join(lines) + "\n")
    size = (tmp_path / "f.t").stat().st_size
    for num_parts in (1, 2, 3, 7, 16):
        got, ends = [], 0
        for k in range(num_parts):
            begin, end = part_range(str(tmp_path / "f.t"), k, num_parts)
            assert begin == ends  # the parts' byte ranges tile the file
            ends = end
            if begin < end:
                got += LibSVMRows(str(tmp_path / "f.t"), 50, "data_libsvm", k,
                                  num_parts).labels.tolist()
        assert ends == size and got == list(range(61))


def test_label_file_follows_the_data_rows_of_a_part(tmp_path):
    (tmp_path / "d.t").write_text("".join(f"{i} 0:{i}\n" for i in range(8)))
    (tmp_path / "l.t").write_text("".join(f"0 {i % 3}:{i}.125" + (" 3:1" if i < 3 else "")
                                          + "\n" for i in range(8)))
    for k in range(2):
        it = rm.io.LibSVMIter(data_libsvm=str(tmp_path / "d.t"), label_libsvm=str(tmp_path / "l.t"),
                              data_shape=(1,), label_shape=(4,), batch_size=1, num_parts=2,
                              part_index=k)
        for batch in it:
            row = int(batch.data[0].todense()[0, 0])
            np.testing.assert_array_equal(batch.label[0].todense()[0, row % 3], row + 0.125)


def test_unsorted_columns_comments_and_dmlc_extensions(tmp_path):
    (tmp_path / "f.t").write_text("# header\n1 2:1 0:3 # trailing\n2:0.5 1:1\n3 qid:7 2:2\n")
    it = rm.io.LibSVMIter(data_libsvm=str(tmp_path / "f.t"), data_shape=(3,), batch_size=3)
    batch = it.next()
    csr = batch.data[0]
    assert csr.indices.tolist() == [0, 2, 1, 2]  # sorted within the row, as csr requires
    csr.check_format()
    np.testing.assert_array_equal(csr.todense(), np.float32([[3, 0, 1], [0, 1, 0], [0, 0, 2]]))
    np.testing.assert_array_equal(batch.label[0], np.float32([1, 2, 3]))


def test_chunks_and_the_line_by_line_path_agree(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    lines = [" ".join([str(i % 3)] + [f"{c}:{rng.normal():.4g}"
                                       for c in sorted(rng.choice(40, 4, replace=False))])
             for i in range(300)]
    (tmp_path / "f.t").write_text("\n".join(lines) + "\n")
    whole = LibSVMRows(str(tmp_path / "f.t"), 40, "data_libsvm")
    monkeypatch.setattr(libsvm_iter, "CHUNK_BYTES", 64)  # many chunks
    chunked = LibSVMRows(str(tmp_path / "f.t"), 40, "data_libsvm")
    # leading blanks send every chunk to the line-by-line parser
    (tmp_path / "g.t").write_text("\n".join("  " + line for line in lines) + "\n")
    slow = LibSVMRows(str(tmp_path / "g.t"), 40, "data_libsvm")
    for other in (chunked, slow):
        np.testing.assert_array_equal(other.labels, whole.labels)
        for name in ("indptr", "indices", "data"):
            np.testing.assert_array_equal(getattr(other.csr, name), getattr(whole.csr, name))
    labels, rows = dense_rows("\n".join(lines), 40)
    np.testing.assert_array_equal(whole.csr.todense(), rows)
    np.testing.assert_array_equal(whole.labels, labels)


def test_a_wide_batch_stays_csr(tmp_path):
    width, batch_size = 1_000_001, 8192
    (tmp_path / "w.t").write_text("".join(f"1 {i * 97 % width}:1 1000000:2\n"
                                          for i in range(batch_size + 5)))
    it = rm.io.LibSVMIter(data_libsvm=str(tmp_path / "w.t"), data_shape=(width,),
                          batch_size=batch_size)
    assert it.provide_data[0].shape == (batch_size, width)
    for batch in it:
        csr = batch.data[0]
        assert isinstance(csr, CSRArray) and csr.shape == (batch_size, width)
        assert csr.nnz == 2 * batch_size
        with pytest.raises(TypeError, match="does not convert to a dense array"):
            np.asarray(csr)
    assert batch.pad == batch_size - 5


def test_rows_by_id_and_pickled_table(path):
    it = rm.io.LibSVMIter(data_libsvm=path, data_shape=(8,), batch_size=4)
    _, rows = dense_rows(TEXT, 8)
    ids = np.array([9, 0, 9, 3])
    (data,), (label,) = it.take(ids)
    np.testing.assert_array_equal(data.todense(), rows[ids])
    np.testing.assert_array_equal(label, np.float32(ids))
    table = pickle.loads(pickle.dumps(it._table))
    np.testing.assert_array_equal(table.take(ids)[0][0].todense(), rows[ids])


def test_errors_name_the_file_and_line(tmp_path):
    def make(text, **kwargs):
        (tmp_path / "bad.t").write_bytes(text.encode())
        return rm.io.LibSVMIter(data_libsvm=str(tmp_path / "bad.t"), **{"data_shape": (3,),
                                                                         **kwargs})

    # line numbers count blank lines, comment lines and CRLF ends as lines
    with pytest.raises(ValueError, match=r"data_libsvm .*bad.t:4: column index 3 is outside "
                                         r"\[0, 3\) \(the shape given\)"):
        make("1 0:1\r\n\r\n# note\r\n2 1:1 3:0.5\r\n")
    with pytest.raises(ValueError, match=r"bad.t:2: column index -1 is outside \[0, 3\)"):
        make("1 0:1\n-3.0 -1:0.6 1:2.4\n")
    with pytest.raises(ValueError, match=r"bad.t:3: expected 'label index:value \.\.\.', "
                                         r"got '2 1'"):
        make("1 0:1\n\n2 1\n")
    with pytest.raises(ValueError, match=r"bad.t:1: expected .* got '1 0:x'"):
        make("1 0:x\n")
    with pytest.raises(ValueError, match=r"bad.t:2: column index 1 appears more than once"):
        make("1 0:1\n2 1:1 1:2\n")
    # a line of a later part is named by its line number in the file
    with pytest.raises(ValueError, match=r"bad.t:6: column index 9 is outside"):
        make("1 0:1\n" * 5 + "2 9:1\n", num_parts=2, part_index=1)
    with pytest.raises(ValueError, match="holds no lines"):
        make("\n\n")
    with pytest.raises(FileNotFoundError, match="data_libsvm: no such file"):
        rm.io.LibSVMIter(data_libsvm=str(tmp_path / "missing.t"), data_shape=(3,))


def test_argument_errors(path, tmp_path):
    with pytest.raises(ValueError, match="data_shape must have one dimension"):
        rm.io.LibSVMIter(data_libsvm=path, data_shape=(2, 4))
    with pytest.raises(ValueError, match=r"label_shape must be \(n,\) with n > 1"):
        rm.io.LibSVMIter(data_libsvm=path, data_shape=(8,), label_libsvm=path)
    with pytest.raises(ValueError, match="needs a label_libsvm file"):
        rm.io.LibSVMIter(data_libsvm=path, data_shape=(8,), label_shape=(3,))
    with pytest.raises(ValueError, match="part_index must lie in"):
        rm.io.LibSVMIter(data_libsvm=path, data_shape=(8,), num_parts=2, part_index=2)
    (tmp_path / "l.t").write_text("0 0:1\n")
    with pytest.raises(ValueError, match="label_libsvm has 1 lines, data_libsvm 10"):
        rm.io.LibSVMIter(data_libsvm=path, data_shape=(8,), label_libsvm=str(tmp_path / "l.t"),
                         label_shape=(2,))
    with pytest.raises(TypeError, match="unexpected arguments"):
        rm.io.LibSVMIter(data_libsvm=path, data_shape=(8,), shuffle=True)
