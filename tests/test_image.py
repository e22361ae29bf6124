"""rm.image: ImageIter over a .rec, a .lst and an in-memory list, and its augmenters."""
import pickle
from pathlib import Path

import numpy as np
import pytest

import raymod as rm
from raymod import recordio

FIXTURES = Path(__file__).parent / "fixtures" / "mxnet" / "recordio"
REC, IDX = str(FIXTURES / "images.rec"), str(FIXTURES / "images.idx")
MXNET_FULL = np.load(FIXTURES / "iter.npz")["full_data"]  # MXNet's decode of the first 100


def test_record_file_images_are_mxnets_decode():
    for idx in (IDX, None):
        it = rm.image.ImageIter(batch_size=25, data_shape=(3, 20, 24), path_imgrec=REC,
                                path_imgidx=idx)
        batches = [it.next() for _ in range(4)]
        data = np.concatenate([b.data[0] for b in batches])
        np.testing.assert_array_equal(data, MXNET_FULL.astype(np.float32))
        np.testing.assert_array_equal(np.concatenate([b.label[0] for b in batches]),
                                      np.arange(100) % 10)


def test_a_list_and_a_root_folder(tmp_path):
    rec = recordio.MXIndexedRecordIO(IDX, REC, "r")
    imglist = []
    for key in range(30):
        header, payload = recordio.unpack(rec.read_idx(key))
        (tmp_path / f"{key}.jpg").write_bytes(payload)
        imglist.append([header.label, f"{key}.jpg"])
    lst = tmp_path / "x.lst"
    lst.write_text("".join(f"{i}\t{lab:f}\t{p}\n" for i, (lab, p) in enumerate(imglist)))
    for kwargs in (dict(imglist=imglist), dict(path_imglist=str(lst))):
        it = rm.image.ImageIter(batch_size=8, data_shape=(3, 16, 16), path_root=str(tmp_path),
                                last_batch_handle="discard", **kwargs)
        batches = list(it)
        assert len(batches) == 3
        # the centre 16x16 of each image, as MXNet's ImageRecordIter centre crop gives it
        centre = np.load(FIXTURES / "iter.npz")["center_data"][:24].astype(np.float32)
        np.testing.assert_array_equal(np.concatenate([b.data[0] for b in batches]), centre)


def test_augmenters_shapes_and_normalisation():
    rm.random.seed(3)
    augs = rm.image.CreateAugmenter((3, 12, 12), resize=14, rand_crop=True, rand_mirror=True,
                                    mean=True, std=True, brightness=0.1, contrast=0.1,
                                    saturation=0.1, pca_noise=0.1)
    names = [type(a).__name__ for a in augs]
    assert names == ["ResizeAug", "RandomCropAug", "HorizontalFlipAug", "CastAug",
                     "ColorJitterAug", "LightingAug", "ColorNormalizeAug"]
    it = rm.image.ImageIter(batch_size=10, data_shape=(3, 12, 12), path_imgrec=REC,
                            aug_list=augs, shuffle=True)
    batch = it.next()
    assert batch.data[0].shape == (10, 3, 12, 12) and abs(batch.data[0].mean()) < 2
    reader = pickle.loads(pickle.dumps(it.reader()))
    assert reader.take(np.arange(3))[0][0].shape == (3, 3, 12, 12)
    with pytest.raises(ValueError, match="hue and rand_gray"):
        rm.image.CreateAugmenter((3, 8, 8), hue=0.1)
    with pytest.raises(ValueError, match="needs path_imgrec, path_imglist or imglist"):
        rm.image.ImageIter(batch_size=2, data_shape=(3, 8, 8))
