"""mx.recordio, mx.image and mx.io's RecordIO / CSV / LibSVM iterators through the
compatibility layer: NDArray batches, MXNet's getdata/getlabel and its error type."""
from pathlib import Path

import numpy as np
import pytest

import raymod.compat.mxnet as mx

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mxnet" / "recordio"


def test_recordio_is_raymods():
    import raymod
    assert mx.recordio is raymod.recordio
    rec = mx.recordio.MXIndexedRecordIO(str(FIXTURES / "images.idx"),
                                        str(FIXTURES / "images.rec"), "r")
    header, img = mx.recordio.unpack_img(rec.read_idx(0))
    assert img.shape == (20, 24, 3) and header.label == 0


def test_native_iterators_hand_out_ndarrays():
    it = mx.io.ImageRecordIter(path_imgrec=str(FIXTURES / "images.rec"), data_shape=(3, 16, 16),
                               batch_size=20, rand_mirror=True, prefetch_buffer=1, ctx="cpu")
    batch = it.next()
    assert isinstance(batch.data[0], mx.nd.NDArray) and batch.data[0].asnumpy().shape == \
        (20, 3, 16, 16)
    assert it.getdata().shape == (20, 3, 16, 16) and it.getlabel().shape == (20,)
    csv = mx.io.CSVIter(data_csv=str(FIXTURES / "table.csv"), data_shape=(6,), batch_size=5)
    assert csv.next().data[0].asnumpy().shape == (5, 6)
    svm = mx.io.LibSVMIter(data_libsvm=str(FIXTURES / "sparse.libsvm"), data_shape=(9,),
                           batch_size=4)
    svm.next()
    data = svm.getdata()
    data.check_format(True)
    assert data.asnumpy().shape == (4, 9)


def test_bad_files_raise_mxnet_error(tmp_path):
    (tmp_path / "bad.t").write_text("1 -1:0.5\n")
    with pytest.raises(mx.MXNetError, match="column index -1"):
        mx.io.LibSVMIter(data_libsvm=str(tmp_path / "bad.t"), data_shape=(3,), batch_size=1)
    with pytest.raises(mx.MXNetError, match="smaller than data_shape"):
        mx.io.ImageRecordIter(path_imgrec=str(FIXTURES / "images.rec"), data_shape=(3, 28, 28),
                              batch_size=5).next().data


def test_image_iter_and_helpers():
    it = mx.image.ImageIter(batch_size=4, data_shape=(3, 16, 16),
                            path_imgrec=str(FIXTURES / "images.rec"), rand_mirror=True)
    assert isinstance(it.next().data[0], mx.nd.NDArray)
    img = mx.image.imdecode(mx.recordio.unpack(
        mx.recordio.MXRecordIO(str(FIXTURES / "images.rec"), "r").read())[1])
    assert isinstance(img, mx.nd.NDArray) and img.shape == (20, 24, 3)
    assert mx.image.resize_short(img, 10).shape == (10, 12, 3)
    assert np.asarray(mx.image.center_crop(img, (8, 8))[0]).shape == (8, 8, 3)
