"""The two image backends (raymod.io._cv): OpenCV, as MXNet, and Pillow with numpy where
cv2 is missing. Both run the whole ImageRecordIter pipeline; what each gives is checked
against MXNet's batches (tests/fixtures/mxnet/recordio) and against the other.

Bounds, in pixel values (0-255), and why they are not zero:
- decoding, crops, mirrors, pad, normalisation, the HLS round trip: equal.
- bilinear resize: within 1 (OpenCV rounds 11-bit fixed-point weights, numpy works in
  float32; OpenCV's result is MXNet's, equal on the fixture).
- bilinear affine warp: within 1 (OpenCV puts sample points on a 1/32-pixel grid and
  rounds; Pillow samples exactly and truncates); a resize then a warp: within 2.
- warp followed by the HLS jitter: a hue step of 2 degrees moves a saturated pixel by up to
  ~8 values and a near-grey pixel's hue may swing further, so the one-value differences of
  the warp grow: the mean stays under 1 and 99 % of values within 8.
"""
import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import raymod as rm
from raymod import recordio
from raymod.io import _cv, image_aug

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mxnet" / "recordio"
EXPECTED = np.load(FIXTURES / "iter.npz")
META = json.loads((FIXTURES / "iter.json").read_text())
REC, IDX = str(FIXTURES / "images.rec"), str(FIXTURES / "images.idx")

try:
    import cv2
except ImportError:
    cv2 = None
needs_cv2 = pytest.mark.skipif(cv2 is None, reason="needs opencv-python-headless")
BACKENDS = [pytest.param("opencv", marks=needs_cv2), "pillow"]


@pytest.fixture
def backend(request):
    """Switch to ``request.param``'s backend for one test, then back."""
    before = _cv.backend()
    yield _cv.use(request.param)
    _cv.use(before)


@pytest.fixture
def restore_backend():
    """Put the backend back after the test (request it before monkeypatch: it then runs
    after monkeypatch has put cv2 back)."""
    before = _cv.backend()
    yield
    _cv.use(before)


def epoch(backend, threads=1, **kwargs):
    """One epoch of ImageRecordIter over the fixture under ``backend``: data and labels."""
    _cv.use(backend)
    args = dict(path_imgrec=REC, path_imgidx=IDX, batch_size=50, preprocess_threads=threads)
    it = rm.io.ImageRecordIter(**{**args, **kwargs})
    batches = list(it)
    return (np.concatenate([b.data[0] for b in batches]),
            np.concatenate([b.label[0] for b in batches]))


CROP_MIRROR = dict(data_shape=(3, 16, 16), rand_crop=True, rand_mirror=True, mean_r=123.68,
                   mean_g=116.28, mean_b=103.53, std_r=58.395, std_g=57.12, std_b=57.375,
                   max_random_contrast=0.3, max_random_illumination=5, seed_aug=11)
GEOMETRY = dict(data_shape=(3, 16, 18), resize=22, rand_crop=True, rand_mirror=True,
                max_random_scale=1.3, min_random_scale=0.9, max_rotate_angle=15,
                max_shear_ratio=0.2, max_aspect_ratio=0.2, fill_value=40, seed_aug=12)
HEAVY = dict(GEOMETRY, random_h=10, random_s=20, random_l=20, seed_aug=13)
PADDED = dict(data_shape=(3, 20, 22), pad=3, fill_value=200, rand_crop=True, rotate=10,
              seed_aug=14)


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
@pytest.mark.parametrize("name", sorted(META["plain"]))
def test_unaugmented_batches_are_mxnets(backend, name):
    data, label = epoch(backend, **META["plain"][name]["args"])
    expected = EXPECTED[f"{name}_data"].astype(np.float32)
    args = META["plain"][name]["args"]
    step = args.get("scale", 1.0) / min(args.get(f"std_{c}", 1.0) for c in "rgb")
    diff = np.abs(data[:len(expected)] - expected)
    # the JPEG decode is exact in both; only the bilinear resize of the Pillow backend rounds
    # differently from OpenCV's
    assert diff.max() <= (step * 1.0001 if name == "resize" and backend == "pillow" else 0)
    np.testing.assert_array_equal(label, EXPECTED[f"{name}_label"])


@needs_cv2
def test_the_backends_agree_on_augmented_batches(restore_backend):
    def compare(kwargs):
        (a, la), (b, lb) = epoch("opencv", **kwargs), epoch("pillow", **kwargs)
        np.testing.assert_array_equal(la, lb)
        std = min(kwargs.get(f"std_{c}", 1.0) for c in "rgb")
        return np.abs(a - b) * std  # in pixel values

    # the same draws (crops, mirrors, contrast, illumination) and the same pixels
    assert compare(CROP_MIRROR).max() == 0
    assert compare(PADDED).max() <= 1 + 1e-4  # the warp rounds differently
    assert compare(GEOMETRY).max() <= 2 + 1e-4  # the resize, then the warp
    heavy = compare(HEAVY)
    assert heavy.mean() < 1 and np.percentile(heavy, 99) <= 8


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_threads_give_the_same_pixels(backend):
    one = epoch(backend, threads=1, **HEAVY)[0]
    np.testing.assert_array_equal(epoch(backend, threads=3, **HEAVY)[0], one)
    assert not np.array_equal(epoch(backend, **dict(HEAVY, seed_aug=99))[0], one)
    with pytest.raises(ValueError, match="smaller than data_shape"):  # raised in a thread
        epoch(backend, threads=3, data_shape=(3, 28, 28))


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_every_augmentation_runs(backend):
    for inter in (0, 1, 2, 3, 4, 9, 10):
        data, _ = epoch(backend, data_shape=(3, 12, 12), random_resized_crop=True,
                        min_random_area=0.3, max_aspect_ratio=0.5, rotate=30, pad=1,
                        inter_method=inter, brightness=0.2, contrast=0.2, saturation=0.2,
                        pca_noise=0.1, random_h=20, random_l=10, resize=14)
        assert data.shape == (200, 3, 12, 12) and np.isfinite(data).all()
    gray, _ = epoch(backend, data_shape=(1, 14, 14), max_rotate_angle=20, pad=2,
                    max_crop_size=16, min_crop_size=12, inter_method=2)
    assert gray.shape == (200, 1, 14, 14)


@needs_cv2
def test_the_numpy_hls_conversion_gives_opencvs_bytes():
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (512, 512, 3), dtype=np.uint8)
    ours = np.rint(image_aug.rgb_to_hls(rgb)).astype(int)
    theirs = cv2.cvtColor(rgb, cv2.COLOR_RGB2HLS).astype(int)
    # exact where OpenCV's conversion runs with fused multiply-adds (x86-64 with FMA, as
    # numpy's emulation); elsewhere an exact tie may round the other way
    assert np.abs(ours - theirs).max() <= 1 and (ours != theirs).mean() < 2e-4
    hls = np.stack([rng.integers(0, 181, (512, 512)), rng.integers(0, 256, (512, 512)),
                    rng.integers(0, 256, (512, 512))], axis=-1).astype(np.uint8)
    np.testing.assert_array_equal(image_aug.hls_to_rgb(hls),
                                  cv2.cvtColor(hls, cv2.COLOR_HLS2RGB))


@needs_cv2
@pytest.mark.parametrize("fmt", [".png", ".jpg"])
def test_images_encoded_by_one_backend_decode_alike_in_the_other(fmt, restore_backend):
    rng = np.random.default_rng(1)
    bgr = rng.integers(0, 256, (13, 17, 3), dtype=np.uint8)
    encoded = {b: (_cv.use(b), recordio.pack_img((0, 1.0, 0, 0), bgr, 90, fmt))[1]
               for b in ("opencv", "pillow")}
    decoded = [(_cv.use(b), recordio.unpack_img(s, 1)[1])[1]
               for b in ("opencv", "pillow") for s in encoded.values()]
    for img in decoded:
        np.testing.assert_array_equal(img, decoded[0])  # libjpeg-turbo on both sides
        assert fmt == ".jpg" or np.array_equal(img, bgr)
    bgra = rng.integers(0, 256, (5, 6, 4), dtype=np.uint8)
    for b in ("opencv", "pillow"):
        _cv.use(b)
        np.testing.assert_array_equal(recordio.unpack_img(recordio.pack_img(
            (0, 1.0, 0, 0), bgra, img_fmt=".png"))[1], bgra)


@needs_cv2
def test_decoding_follows_opencvs_rules_in_both(restore_backend):
    from PIL import Image
    rng = np.random.default_rng(2)
    gray = rng.integers(0, 256, (9, 11), dtype=np.uint8)
    rgb = rng.integers(0, 256, (9, 11, 3), dtype=np.uint8)
    files = {}
    for name, img, mode, fmt in (("rgb.jpg", rgb, "RGB", "JPEG"), ("la.png", None, "LA", "PNG"),
                                 ("rgba.png", None, "RGBA", "PNG"), ("gray.png", gray, "L", "PNG")):
        if img is None:
            img = np.dstack([rgb, gray])[..., 2 if mode == "LA" else 0:]
        out = io.BytesIO()
        Image.fromarray(img, mode).save(out, fmt, quality=80)
        files[name] = out.getvalue()
    files["16bit.png"] = cv2.imencode(".png", gray.astype(np.uint16) * 257 + 9)[1].tobytes()
    for name, buf in files.items():
        for flag in (-1, 0, 1):
            got = []
            for b in ("opencv", "pillow"):
                _cv.use(b)
                got.append(recordio.decode_image(buf, flag, bgr=False))
            assert got[0].dtype == got[1].dtype == np.uint8 and got[0].shape == got[1].shape
            # a colour PNG read as gray: libpng's weights against Pillow's, within one
            bound = 1 if flag == 0 and name in ("la.png", "rgba.png") else 0
            assert np.abs(got[0].astype(int) - got[1]).max() <= bound, (name, flag)


@needs_cv2
def test_opencv_runs_one_thread_of_its_own(restore_backend):
    _cv.use("opencv")
    assert cv2.getNumThreads() == 1


def test_a_missing_cv2_falls_back_to_pillow(restore_backend, monkeypatch):
    monkeypatch.setitem(sys.modules, "cv2", None)  # import cv2 now raises ImportError
    monkeypatch.delenv(_cv.ENV, raising=False)
    assert _cv.use() == "pillow" and _cv.opencv() is None
    data, _ = epoch(_cv.backend(), **PADDED)
    assert data.shape == (200, 3, 20, 22)
    with pytest.raises(ImportError, match="opencv-python-headless"):
        _cv.use("opencv")
    monkeypatch.setenv(_cv.ENV, "opencv")
    with pytest.raises(ImportError, match="opencv-python-headless"):
        _cv.use()


def test_the_environment_variable_picks_the_backend(restore_backend, monkeypatch):
    monkeypatch.setenv(_cv.ENV, "pillow")
    assert _cv.use() == "pillow" and _cv.backend() == "pillow"
    monkeypatch.setenv(_cv.ENV, "magick")
    with pytest.raises(ValueError, match="RAYMOD_IMAGE_BACKEND must be one of"):
        _cv.use()
    with pytest.raises(ValueError, match="must be one of"):
        _cv.use("magick")
    if cv2 is not None:
        monkeypatch.setenv(_cv.ENV, "")
        assert _cv.use() == "opencv"
