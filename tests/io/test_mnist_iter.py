"""rm.io.MNISTIter against arrays written out here in MNIST's idx format."""
import os
import struct

import numpy as np
import pytest

import raymod as rm


def _write(folder, images, labels):
    img, lab = os.path.join(folder, "img"), os.path.join(folder, "lab")
    with open(img, "wb") as f:
        f.write(struct.pack(">IIII", 0x0803, *images.shape) + images.tobytes())
    with open(lab, "wb") as f:
        f.write(struct.pack(">II", 0x0801, len(labels)) + labels.tobytes())
    return img, lab


@pytest.fixture
def files(tmp_path):
    images = (np.arange(25 * 28 * 28) % 256).astype(np.uint8).reshape(25, 28, 28)
    labels = (np.arange(25) % 10).astype(np.uint8)
    return images, labels, _write(str(tmp_path), images, labels)


def test_flat_batches_in_file_order_scaled_by_1_over_256_last_partial_dropped(files):
    images, labels, (img, lab) = files
    it = rm.io.MNISTIter(image=img, label=lab, batch_size=4, shuffle=False, flat=True,
                         silent=True)
    assert [(d.name, d.shape) for d in it.provide_data] == [("data", (4, 784))]
    assert [(d.name, d.shape) for d in it.provide_label] == [("softmax_label", (4,))]
    batches = list(it)
    assert len(batches) == 6  # 25 rows: the 25th does not fill a batch
    for k, b in enumerate(batches):
        rows = slice(4 * k, 4 * k + 4)
        assert b.data[0].dtype == np.float32 and b.pad == 0
        np.testing.assert_array_equal(b.data[0], images[rows].reshape(4, 784) / 256.0)
        np.testing.assert_array_equal(b.label[0], labels[rows].astype(np.float32))


def test_shuffle_once_with_seed_and_reset_keeps_order(files):
    images, labels, (img, lab) = files
    it = rm.io.MNISTIter(image=img, label=lab, batch_size=5, shuffle=True, seed=3,
                         silent=True)
    order = np.random.RandomState(3).permutation(25)
    first = [b.label[0].copy() for b in it]
    np.testing.assert_array_equal(np.concatenate(first), labels[order].astype(np.float32))
    it.reset()
    assert it.iter_next()  # getdata/getlabel: one array each, as MXNet's C++ iterators
    np.testing.assert_array_equal(it.getlabel(), first[0])
    assert it.getdata().shape == (5, 1, 28, 28)
    it.reset()
    b = next(it)
    assert b.data[0].shape == (5, 1, 28, 28)
    np.testing.assert_array_equal(b.label[0], first[0])
    np.testing.assert_array_equal(b.data[0][:, 0], images[order[:5]] / 256.0)


def test_parts_are_contiguous_slices(files):
    _, labels, (img, lab) = files
    it = rm.io.MNISTIter(image=img, label=lab, batch_size=4, shuffle=False, flat=True,
                         silent=True, num_parts=2, part_index=1)
    got = np.concatenate([b.label[0] for b in it])
    np.testing.assert_array_equal(got, labels[12:24].astype(np.float32))  # rows 12..24, 3 batches


def test_prints_what_it_loaded_unless_silent(files, capsys):
    _, _, (img, lab) = files
    rm.io.MNISTIter(image=img, label=lab, batch_size=4, flat=True)
    assert "MNISTIter: load 25 images, shuffle=1" in capsys.readouterr().err


def test_bad_input_names_the_argument(files, tmp_path):
    images, _, (img, lab) = files
    with pytest.raises(FileNotFoundError, match="image file"):
        rm.io.MNISTIter(image=str(tmp_path / "nope"), label=lab)
    with pytest.raises(ValueError, match="part_index"):
        rm.io.MNISTIter(image=img, label=lab, num_parts=2, part_index=2)
    with pytest.raises(ValueError, match="1 dimension"):
        rm.io.MNISTIter(image=img, label=img)
    (tmp_path / "short").mkdir()
    short, _ = _write(str(tmp_path / "short"), images[:3], np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="holds 3 images but"):
        rm.io.MNISTIter(image=short, label=lab)
    with pytest.raises(TypeError, match="unexpected argument"):
        rm.io.MNISTIter(image=img, label=lab, mean_img="x")
