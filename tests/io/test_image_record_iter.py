"""ImageRecordIter against MXNet 1.9.1's batches and augmentation statistics on the same
.rec (tests/fixtures/mxnet/recordio, made by tools/make_mxnet_recordio_fixtures.py)."""
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

import raymod as rm
from raymod.io import image_aug

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mxnet" / "recordio"
EXPECTED = np.load(FIXTURES / "iter.npz")
META = json.loads((FIXTURES / "iter.json").read_text())
REC, IDX = str(FIXTURES / "images.rec"), str(FIXTURES / "images.idx")
HEIGHT, WIDTH = 20, 24


def image_iter(**kwargs):
    args = dict(path_imgrec=REC, path_imgidx=IDX, batch_size=50, preprocess_threads=1)
    args.update(kwargs)
    return rm.io.ImageRecordIter(**args)


def epoch(it):
    batches = list(it)
    return (np.concatenate([b.data[0] for b in batches]),
            np.concatenate([b.label[0] for b in batches]), [b.pad for b in batches])


@pytest.mark.parametrize("name", sorted(META["plain"]))
def test_without_random_augmentation_batches_are_mxnets_within_one(name):
    data, label, pads = epoch(image_iter(**META["plain"][name]["args"]))
    expected = EXPECTED[f"{name}_data"].astype(np.float32)
    assert data.shape[1:] == expected.shape[1:] and data.dtype == np.float32
    # one pixel value, scaled like the pixels when the arguments normalise them
    args = META["plain"][name]["args"]
    step = args.get("scale", 1.0) / min(args.get(f"std_{c}", 1.0) for c in "rgb")
    assert np.abs(data[:len(expected)] - expected).max() <= step * 1.0001
    np.testing.assert_array_equal(label, EXPECTED[f"{name}_label"])
    assert pads == META["plain"][name]["pads"]


def test_round_batch_continues_the_next_epoch_after_the_filler():
    it = image_iter(batch_size=48, data_shape=(3, 8, 8))
    first, second = epoch(it), (it.reset(), epoch(it))[1]
    assert first[2] == [0, 0, 0, 0, 40] and second[2] == [0, 0, 0, 32]  # MXNet's pads
    labels = np.arange(200) % 10
    np.testing.assert_array_equal(first[1], np.concatenate([labels, labels[:40]]))
    np.testing.assert_array_equal(second[1], np.concatenate([labels[40:], labels[:32]]))


AUGMENTED = dict(data_shape=(3, 16, 16), rand_crop=True, rand_mirror=True,
                 max_random_scale=1.3, max_rotate_angle=10, random_l=50, random_s=40,
                 random_h=10, max_shear_ratio=0.2, max_random_illumination=3, fill_value=0)


def test_the_same_seed_gives_the_same_batches_whatever_the_threads():
    a = epoch(image_iter(seed_aug=3, **AUGMENTED))[0]
    b = epoch(image_iter(seed_aug=3, preprocess_threads=4, **AUGMENTED))[0]
    c = epoch(image_iter(seed_aug=4, **AUGMENTED))[0]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    it = image_iter(seed_aug=3, **AUGMENTED)
    first = epoch(it)[0]
    it.reset()
    assert not np.array_equal(first, epoch(it)[0])  # a new epoch draws anew


def test_mirror_rate_matches_mxnets():
    full = epoch(image_iter(data_shape=(3, HEIGHT, WIDTH)))[0]
    it = image_iter(data_shape=(3, HEIGHT, WIDTH), rand_mirror=True, seed=1)
    flips = []
    for _ in range(4):
        data = epoch(it)[0]
        flips.extend(np.array_equal(d, f[:, :, ::-1]) for d, f in zip(data, full))
        it.reset()
    stats = META["stats"]
    assert len(flips) == stats["mirror_samples"] == 800
    # both are Bernoulli(1/2) rates over 800 draws: 4 standard errors of their difference
    assert abs(np.mean(flips) - stats["mirror_rate"]) < 4 * np.sqrt(2 * 0.25 / 800)


def test_random_crop_offsets_match_mxnets():
    full = epoch(image_iter(data_shape=(3, HEIGHT, WIDTH)))[0]
    it = image_iter(data_shape=(3, 16, 16), rand_crop=True, seed=2)
    offsets = []
    for _ in range(4):
        for d, f in zip(epoch(it)[0], full):
            hits = [(y, x) for y in range(HEIGHT - 15) for x in range(WIDTH - 15)
                    if np.array_equal(d, f[:, y:y + 16, x:x + 16])]
            assert len(hits) == 1
            offsets.append(hits[0])
        it.reset()
    ours, theirs = np.array(offsets), np.array(META["stats"]["crop_offsets"])
    for axis, span in ((0, HEIGHT - 16), (1, WIDTH - 16)):
        # both uniform over 0..span: the same support and means within 4 standard errors
        assert set(ours[:, axis]) == set(theirs[:, axis]) == set(range(span + 1))
        se = np.sqrt(((span + 1) ** 2 - 1) / 12 * 2 / len(ours))
        assert abs(ours[:, axis].mean() - theirs[:, axis].mean()) < 4 * se


def test_parts_split_like_mxnet_and_cover_every_record_once():
    labels = []
    for part in range(3):
        it = image_iter(data_shape=(3, 8, 8), batch_size=10, part_index=part, num_parts=3)
        assert it.num_rows == [67, 67, 66][part]  # MXNet's counts with an index
        labels.append(it.offsets)
    assert np.array_equal(np.concatenate(labels), np.sort(np.concatenate(labels)))
    assert len(set(np.concatenate(labels))) == 200
    no_index = [rm.io.ImageRecordIter(path_imgrec=REC, data_shape=(3, 8, 8), batch_size=10,
                                      part_index=p, num_parts=3).offsets for p in range(3)]
    np.testing.assert_array_equal(np.concatenate(no_index), np.concatenate(labels))


def test_a_pickled_reader_decodes_the_same_draws():
    it = image_iter(seed_aug=9, **AUGMENTED)
    it.reset()  # epoch 1: draws 200..399
    batch = it.next()
    assert batch.index.min() >= 200
    reader = pickle.loads(pickle.dumps(it.reader()))
    data, label = reader.take(batch.index)
    np.testing.assert_array_equal(data[0], batch.data[0])
    np.testing.assert_array_equal(label[0], batch.label[0])


def test_multi_label_records_and_every_augmentation_run():
    it = rm.io.ImageRecordIter(
        path_imgrec=str(FIXTURES / "multilabel.rec"), data_shape=(3, 12, 12), batch_size=4,
        label_width=3, random_resized_crop=True, min_random_area=0.3, max_aspect_ratio=0.5,
        brightness=0.2, contrast=0.2, saturation=0.2, pca_noise=0.1, pad=1,
        inter_method=10, rotate=30, max_crop_size=-1, mean_r=100, std_g=2)
    data, label, _ = epoch(it)
    assert data.shape == (12, 3, 12, 12) and label.shape == (12, 3)
    expected = json.loads((FIXTURES / "records.json").read_text())["multilabel"]
    np.testing.assert_allclose(label, np.float32([e["label"] for e in expected]))


def test_hls_round_trip_is_the_identity_within_one():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
    hls = image_aug.rgb_to_hls(img)
    assert hls[..., 0].max() < 180 and hls[..., 1:].max() <= 255 + 1e-3
    back = image_aug.hls_to_rgb(hls)
    assert np.abs(back.astype(int) - img).max() <= 1


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="unexpected arguments \\['rand_crap'\\]"):
        image_iter(data_shape=(3, 8, 8), rand_crap=True)
    with pytest.raises(ValueError, match="data_shape must be"):
        image_iter(data_shape=(5, 28, 28))
    with pytest.raises(ValueError, match="smaller than data_shape"):
        image_iter(data_shape=(3, 28, 28)).next().data
    with pytest.raises(ValueError, match="part_index must lie"):
        image_iter(data_shape=(3, 8, 8), part_index=2, num_parts=2)


def test_path_imglist_labels_replace_the_records(tmp_path):
    lst = tmp_path / "images.lst"
    lst.write_text("".join(f"{i}\t{(i * 7) % 10:f}\t{(i * 3) % 5:f}\timg{i}.jpg\n"
                           for i in range(200)))
    it = image_iter(data_shape=(3, 8, 8), path_imglist=str(lst), label_width=2)
    _, label, _ = epoch(it)
    ids = np.arange(200)
    np.testing.assert_array_equal(label, np.stack([(ids * 7) % 10, (ids * 3) % 5], axis=1))
    lst.write_text("0\t1.0\timg0.jpg\n")
    with pytest.raises(KeyError, match="record id 1 is not in path_imglist"):
        image_iter(data_shape=(3, 8, 8), path_imglist=str(lst)).next().data


def test_mean_img_is_made_when_missing_then_subtracted(tmp_path):
    path = str(tmp_path / "mean.bin")
    it = image_iter(data_shape=(3, 16, 16), mean_img=path)
    full = EXPECTED["center_data"].astype(np.float32)  # MXNet's centre crops, first 100
    plain = epoch(image_iter(data_shape=(3, 16, 16)))[0]
    np.testing.assert_array_equal(plain[:100], full)
    mean = plain.mean(axis=0)
    np.testing.assert_allclose(rm.nd.load(path)["mean_img"], mean, rtol=1e-5)
    np.testing.assert_allclose(epoch(it)[0], plain - mean, atol=1e-3)
