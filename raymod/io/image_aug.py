"""MXNet's default image augmenter (``ImageRecordIter``'s arguments), on OpenCV (as MXNet's
C++ augmenter) or, without ``cv2``, on numpy and Pillow (the backend: :mod:`raymod.io._cv`).

One image goes through the steps MXNet's C++ augmenter takes, in its order: resize the
shorter edge, an affine warp (rotation, shear, scale, aspect ratio, size bounds), padding,
a crop (random-resized, random-size, random or centre), an HLS jitter, then the colour
jitters; :func:`normalize` mirrors it and subtracts the mean, divides by the std and scales,
giving the ``(C, H, W)`` float array of a batch. Every random draw comes from the
``numpy.random.Generator`` passed in, in a fixed order that does not depend on the backend,
so one seed gives one result (pixels of the two backends agree within rounding where their
kernels are the same, see ``tests/io/test_image_backends.py``).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import numpy as np

from . import _cv

# MXNet's inter_method codes
NEAREST, BILINEAR, CUBIC, AREA, LANCZOS, AUTO, RANDOM = 0, 1, 2, 3, 4, 9, 10
INTER_METHODS = (NEAREST, BILINEAR, CUBIC, AREA, LANCZOS, AUTO, RANDOM)


@dataclasses.dataclass(frozen=True)
class AugParams:
    """``ImageRecordIter``'s augmentation and normalisation arguments (MXNet's defaults)."""

    data_shape: tuple
    resize: int = -1
    rand_crop: bool = False
    random_resized_crop: bool = False
    max_rotate_angle: int = 0
    max_aspect_ratio: float = 0.0
    min_aspect_ratio: float | None = None
    max_shear_ratio: float = 0.0
    max_crop_size: int = -1
    min_crop_size: int = -1
    max_random_scale: float = 1.0
    min_random_scale: float = 1.0
    max_random_area: float = 1.0
    min_random_area: float = 1.0
    max_img_size: float = 1e10
    min_img_size: float = 0.0
    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    pca_noise: float = 0.0
    random_h: int = 0
    random_s: int = 0
    random_l: int = 0
    rotate: int = -1
    fill_value: int = 255
    inter_method: int = 1
    pad: int = 0
    mirror: bool = False
    rand_mirror: bool = False
    mean_r: float = 0.0
    mean_g: float = 0.0
    mean_b: float = 0.0
    mean_a: float = 0.0
    std_r: float = 1.0
    std_g: float = 1.0
    std_b: float = 1.0
    std_a: float = 1.0
    scale: float = 1.0
    max_random_contrast: float = 0.0
    max_random_illumination: float = 0.0

    def __post_init__(self) -> None:
        shape = tuple(int(d) for d in self.data_shape)
        if len(shape) != 3 or shape[0] not in (1, 3, 4) or min(shape) <= 0:
            raise ValueError(f"data_shape must be (channels, height, width) with 1, 3 or 4 "
                             f"channels; got {self.data_shape!r}")
        object.__setattr__(self, "data_shape", shape)
        if self.inter_method not in INTER_METHODS:
            raise ValueError(f"inter_method must be one of {INTER_METHODS}; got "
                             f"{self.inter_method!r}")
        if self.min_random_scale > self.max_random_scale:
            raise ValueError(f"min_random_scale {self.min_random_scale} exceeds "
                             f"max_random_scale {self.max_random_scale}")
        if self.min_random_area > self.max_random_area:
            raise ValueError(f"min_random_area {self.min_random_area} exceeds max_random_area "
                             f"{self.max_random_area}")
        if self.pad < 0:
            raise ValueError(f"pad must be >= 0; got {self.pad}")

    @property
    def aspect_range(self) -> tuple[float, float]:
        """The interval aspect ratios are drawn from."""
        if self.min_aspect_ratio is None:
            return 1.0 - self.max_aspect_ratio, 1.0 + self.max_aspect_ratio
        return self.min_aspect_ratio, self.max_aspect_ratio

    @property
    def plain_crop(self) -> bool:
        """Whether the crop step takes the data shape's window as it is (random or centre),
        with no resize."""
        return (not self.random_resized_crop and self.max_crop_size == -1
                and self.min_crop_size == -1)

    @functools.cached_property
    def warps(self) -> bool:
        """Whether the affine step runs (MXNet skips it when nothing asks for it)."""
        resized_crop = self.random_resized_crop
        return (self.max_rotate_angle > 0 or self.max_shear_ratio > 0 or self.rotate > 0
                or (not resized_crop and (self.max_random_scale != 1
                                          or self.min_random_scale != 1
                                          or self.aspect_range != (1.0, 1.0)))
                or self.max_img_size != 1e10 or self.min_img_size != 0)

    @property
    def channels(self) -> int:
        """Channels of the output (1: decode as grayscale)."""
        return self.data_shape[0]

    @functools.cached_property
    def _normalization(self) -> dict:
        means = [self.mean_r, self.mean_g, self.mean_b, self.mean_a]
        stds = [self.std_r, self.std_g, self.std_b, self.std_a]
        out = {}
        for c in range(1, 5):
            mean = np.float32(means[:c])[:, None, None]
            std = np.float32(stds[:c])[:, None, None]
            mult = np.float32(self.scale) / std
            out[c] = (mean, std, mult, bool((mult != 1).any()))
        return out

    def normalization(self, channels: int) -> tuple:
        """``(mean, std, scale / std, whether that differs from 1)`` for an image of
        ``channels`` channels, the arrays float32 of shape ``(channels, 1, 1)`` (made once:
        every image asks)."""
        return self._normalization[channels]


def pick_method(method: int, src_size: tuple, dst_size: tuple,
                rng: np.random.Generator) -> int:
    """The interpolation (0-4) an MXNet ``inter_method`` means for one resize (9: cubic to
    enlarge, area to shrink; 10: one drawn at random)."""
    if method == AUTO:
        return CUBIC if dst_size[0] * dst_size[1] > src_size[0] * src_size[1] else AREA
    if method == RANDOM:
        return int(rng.integers(0, 5))
    return method


def pillow_filter(method: int, src_size: tuple, dst_size: tuple, rng: np.random.Generator) -> int:
    """The Pillow resampling filter for an MXNet ``inter_method``."""
    from PIL import Image
    return {NEAREST: Image.NEAREST, BILINEAR: Image.BILINEAR, CUBIC: Image.BICUBIC,
            AREA: Image.BOX, LANCZOS: Image.LANCZOS}[pick_method(method, src_size, dst_size,
                                                                 rng)]


@functools.lru_cache(maxsize=None)
def _cv_flags(cv2: Any) -> tuple[dict, dict]:
    """MXNet's interpolation codes as OpenCV's flags for ``resize`` and for
    ``warpAffine`` (which has no area kernel: it takes bilinear for it, as for AUTO)."""
    resize = {NEAREST: cv2.INTER_NEAREST, BILINEAR: cv2.INTER_LINEAR,
              CUBIC: cv2.INTER_CUBIC, AREA: cv2.INTER_AREA, LANCZOS: cv2.INTER_LANCZOS4}
    warp = {code: resize.get(code, cv2.INTER_LINEAR) for code in INTER_METHODS}
    warp[AREA] = cv2.INTER_LINEAR
    return resize, warp


def _hwc(out: np.ndarray, like: np.ndarray) -> np.ndarray:
    """OpenCV's result with ``like``'s channel axis (OpenCV drops a single channel)."""
    return out if out.ndim == 3 else out[:, :, None]


def bilinear_resize(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """OpenCV's ``INTER_LINEAR`` resize of a uint8 ``(h, w, c)`` image: each output pixel
    samples the source at ``(i + 0.5) * scale - 0.5``, edges clamped (no anti-aliasing, so
    the result is OpenCV's to within a rounding step)."""

    def axis(n_out: int, n_in: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pos = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
        lo = np.floor(pos).astype(np.int64)
        frac = (pos - lo).astype(np.float32)
        frac[lo < 0] = 0
        lo = np.clip(lo, 0, n_in - 1)
        return lo, np.minimum(lo + 1, n_in - 1), frac

    y0, y1, fy = axis(height, img.shape[0])
    x0, x1, fx = axis(width, img.shape[1])
    f = img.astype(np.float32)
    rows = f[y0] * (1 - fy)[:, None, None] + f[y1] * fy[:, None, None]
    out = rows[:, x0] * (1 - fx)[:, None] + rows[:, x1] * fx[:, None]
    return np.clip(np.floor(out + 0.5), 0, 255).astype(np.uint8)


def resize(img: np.ndarray, height: int, width: int, method: int,
           rng: np.random.Generator) -> np.ndarray:
    """``img`` resized to ``(height, width)`` with MXNet's ``inter_method``: ``cv2.resize``,
    or without OpenCV :func:`bilinear_resize` for bilinear and Pillow for the others (whose
    kernels differ from OpenCV's: Pillow filters over the whole footprint when shrinking)."""
    if img.shape[:2] == (height, width):
        return img
    cv2 = _cv.opencv()
    if cv2 is not None:
        code = pick_method(method, img.shape[1::-1], (width, height), rng)
        flag = _cv_flags(cv2)[0][code]
        return _hwc(cv2.resize(img, (width, height), interpolation=flag), img)
    if method == BILINEAR:
        return bilinear_resize(img, height, width)
    flt = pillow_filter(method, img.shape[1::-1], (width, height), rng)
    return np.asarray(_pil(img).resize((width, height), flt)).reshape(
        (height, width, img.shape[2]))


def _pil(img: np.ndarray) -> Any:
    """A Pillow image of an ``(h, w, c)`` uint8 array."""
    from PIL import Image
    return Image.fromarray(img if img.shape[2] != 1 else img[:, :, 0])


def _uniform(rng: np.random.Generator, low: float, high: float) -> float:
    """``rng.uniform(low, high)``: the same draw and the same value (numpy computes
    ``low + (high - low) * random()``), at a third of the call's cost."""
    return low + (high - low) * rng.random() if high > low else float(low)


def _randint(rng: np.random.Generator, low: int, high: int) -> int:
    """An int in ``[low, high]``, both ends included."""
    return int(rng.integers(low, high + 1)) if high > low else int(low)


_WARP_BORDER = 3  # pixels: a bicubic kernel reaches 2 past the edge


def warp(img: np.ndarray, p: AugParams, rng: np.random.Generator,
         crop: bool = False) -> np.ndarray:
    """MXNet's affine step: shear, rotation, scale and aspect ratio about the centre, into
    an image of ``scale`` times the size (bounded by min/max_img_size), filled outside.
    With ``crop`` (for a plain crop, no pad between), also the crop step's window: only the
    pixels it keeps are computed.

    ``cv2.warpAffine`` with MXNet's matrix, or Pillow's affine transform of the same map."""
    shear = p.max_shear_ratio * (_uniform(rng, 0, 1) * 2 - 1)
    angle = _randint(rng, -p.max_rotate_angle, p.max_rotate_angle)
    if p.rotate > 0:
        angle = p.rotate
    a, b = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    scale = ratio = 1.0
    if not p.random_resized_crop:
        scale = _uniform(rng, p.min_random_scale, p.max_random_scale)
        ratio = _uniform(rng, *p.aspect_range)
    hs = 2 * scale / (1 + ratio)
    ws = ratio * hs
    h, w = img.shape[:2]
    # the new size before it is cut to whole pixels (MXNet centres on it)
    size_w = max(p.min_img_size, min(p.max_img_size, scale * w))
    size_h = max(p.min_img_size, min(p.max_img_size, scale * h))
    new_w, new_h = int(size_w), int(size_h)
    # MXNet's forward map (x, y) -> m (x, y) + t in OpenCV's pixel coordinates (pixel i
    # centred at i), taking (w, h) / 2 to the new centre; plain floats (numpy costs more)
    m00, m01 = hs * a - shear * b * ws, hs * b + shear * a * ws
    m10, m11 = -b * ws, a * ws
    tx, ty = (size_w - (m00 * w + m01 * h)) / 2, (size_h - (m10 * w + m11 * h)) / 2
    method = p.inter_method if p.inter_method != RANDOM else int(rng.integers(0, 5))
    if crop:  # the crop's draws, in their place: the window's corner (x0, y0) goes to (0, 0)
        y0, x0 = _plain_window(new_h, new_w, p, rng)
        tx, ty = tx - x0, ty - y0
        new_h, new_w = p.data_shape[1:]
    cv2 = _cv.opencv()
    if cv2 is not None:
        forward = np.array([[m00, m01, tx], [m10, m11, ty]], np.float32)  # MXNet's CV_32F
        out = cv2.warpAffine(img, forward, (new_w, new_h), flags=_cv_flags(cv2)[1][method],
                             borderMode=cv2.BORDER_CONSTANT, borderValue=(p.fill_value,) * 4)
        return _hwc(out, img)
    from PIL import Image
    # Pillow takes the inverse map, with pixel i centred at i + 0.5; it is given a frame of
    # fill_value, so that it blends the edge pixels with it where they are interpolated, as
    # OpenCV's constant border does (Pillow would repeat the edge)
    border = _WARP_BORDER
    framed = np.pad(img, ((border, border), (border, border), (0, 0)),
                    constant_values=p.fill_value)
    det = m00 * m11 - m01 * m10
    i00, i01, i10, i11 = m11 / det, -m01 / det, -m10 / det, m00 / det
    cx, cy = tx + 0.5, ty + 0.5
    coeffs = (i00, i01, 0.5 + border - (i00 * cx + i01 * cy),
              i10, i11, 0.5 + border - (i10 * cx + i11 * cy))
    fill = (p.fill_value,) * img.shape[2] if img.shape[2] > 1 else p.fill_value
    # Pillow warps with nearest, bilinear or bicubic only: the other methods map to these
    resample = {NEAREST: Image.NEAREST, CUBIC: Image.BICUBIC,
                LANCZOS: Image.BICUBIC}.get(method, Image.BILINEAR)
    out = _pil(framed).transform((new_w, new_h), Image.AFFINE, coeffs,
                                 resample=resample, fillcolor=fill)
    return np.asarray(out).reshape((new_h, new_w, img.shape[2]))


def crop(img: np.ndarray, p: AugParams, rng: np.random.Generator) -> np.ndarray:
    """MXNet's crop step, giving an image of the data shape's height and width."""
    _, out_h, out_w = p.data_shape
    h, w = img.shape[:2]
    if p.random_resized_crop:
        area = h * w
        lo, hi = p.aspect_range
        for _ in range(10):
            target = _uniform(rng, p.min_random_area, p.max_random_area) * area
            ratio = math.exp(_uniform(rng, math.log(lo), math.log(hi))) if lo > 0 else 1.0
            cw, ch = int(round(math.sqrt(target * ratio))), int(round(math.sqrt(target / ratio)))
            if 0 < cw <= w and 0 < ch <= h:
                y, x = _randint(rng, 0, h - ch), _randint(rng, 0, w - cw)
                return resize(img[y:y + ch, x:x + cw], out_h, out_w, p.inter_method, rng)
        side = min(h, w)  # no try fitted: the centre square
        y, x = (h - side) // 2, (w - side) // 2
        return resize(img[y:y + side, x:x + side], out_h, out_w, p.inter_method, rng)
    if p.max_crop_size != -1 or p.min_crop_size != -1:
        if not (p.min_crop_size <= p.max_crop_size <= min(h, w)):
            raise ValueError(f"min_crop_size {p.min_crop_size} <= max_crop_size "
                             f"{p.max_crop_size} <= the image's shorter edge {min(h, w)} "
                             "must hold")
        size = _randint(rng, p.min_crop_size, p.max_crop_size)
        y, x = _crop_origin(h - size, w - size, p.rand_crop, rng)
        return resize(img[y:y + size, x:x + size], out_h, out_w, p.inter_method, rng)
    if (h, w) == (out_h, out_w):
        return img
    y, x = _plain_window(h, w, p, rng)
    return img[y:y + out_h, x:x + out_w]


def _plain_window(h: int, w: int, p: AugParams, rng: np.random.Generator) -> tuple[int, int]:
    """Where the data shape's window starts in an ``h x w`` image: random or the centre."""
    _, out_h, out_w = p.data_shape
    if h < out_h or w < out_w:
        raise ValueError(f"the image ({h}x{w} after resize, warp and pad) is smaller than "
                         f"data_shape's {out_h}x{out_w}; set resize or a smaller data_shape")
    if (h, w) == (out_h, out_w):
        return 0, 0
    return _crop_origin(h - out_h, w - out_w, p.rand_crop, rng)


def _crop_origin(span_y: int, span_x: int, random: bool, rng: np.random.Generator) -> tuple:
    if random:
        return _randint(rng, 0, span_y), _randint(rng, 0, span_x)
    return span_y // 2, span_x // 2


_F32 = np.float32
# per sector of the hue circle (60 degrees each): where R, G and B take their value from
# (0 the top p2, 1 the bottom p1, 2 falling from p2 to p1, 3 rising from p1 to p2)
_HUE_SECTORS = np.array([[0, 3, 1], [2, 0, 1], [1, 0, 3], [1, 2, 0], [3, 1, 0], [0, 1, 2]])


def _fma(a: np.ndarray, b: np.ndarray, c: Any) -> np.ndarray:
    """``a * b + c`` rounded once to float32, as a fused multiply-add (the float32 product
    is exact in float64)."""
    return (a.astype(np.float64) * b + c).astype(_F32)


def rgb_to_hls(img: np.ndarray) -> np.ndarray:
    """OpenCV's 8-bit HLS of an RGB uint8 image, unrounded: H in [0, 180), L and S in
    [0, 255]. The float32 steps are the ones OpenCV's conversion takes, in its order and
    with its fused multiply-adds, so that rounding gives OpenCV's bytes (checked in
    ``tests/io/test_image_backends.py``)."""
    f = img.astype(_F32) * _F32(1 / 255)
    r, g, b = f[..., 0], f[..., 1], f[..., 2]
    # (elementwise over the three planes: a reduction along the last axis is far slower)
    vmax, vmin = np.maximum(np.maximum(r, g), b), np.minimum(np.minimum(r, g), b)
    diff, total = vmax - vmin, vmax + vmin
    light = total * _F32(0.5)
    with np.errstate(divide="ignore", invalid="ignore"):
        sat = diff / np.where(light < 0.5, total, _F32(2) - total)
        per_diff = _F32(60) / diff
        red = (g - b) * per_diff
        red = np.where(red < 0, _fma(g - b, per_diff, 360), red)
        hue = np.where(vmax == r, red, np.where(vmax == g, _fma(b - r, per_diff, 120),
                                                _fma(r - g, per_diff, 240)))
    grey = diff <= np.finfo(_F32).eps
    sat, hue = np.where(grey, _F32(0), sat), np.where(grey, _F32(0), hue)
    return np.stack([hue * _F32(0.5), light * _F32(255), sat * _F32(255)], axis=-1)


def hls_to_rgb(hls: np.ndarray) -> np.ndarray:
    """The inverse of :func:`rgb_to_hls` (H, L, S in OpenCV's 8-bit ranges) to uint8 RGB,
    with OpenCV's float32 steps (its bytes from whole-number H, L, S)."""
    light = hls[..., 1].astype(_F32) * _F32(1 / 255)
    s = hls[..., 2].astype(_F32) * _F32(1 / 255)
    top = np.where(light <= 0.5, light * (_F32(1) + s), _fma(-light, s, light + s))
    bottom = _F32(2) * light - top
    h = np.mod(hls[..., 0].astype(_F32) * _F32(6 / 180), _F32(6))
    sector = np.minimum(np.floor(h), 5).astype(np.intp)
    h = h - sector.astype(_F32)
    span = top - bottom
    table = np.stack([top, bottom, _fma(span, _F32(1) - h, bottom), _fma(span, h, bottom)],
                     axis=-1)
    rgb = np.take_along_axis(table, _HUE_SECTORS[sector], axis=-1)
    return np.clip(np.rint(rgb * _F32(255)), 0, 255).astype(np.uint8)


def hls_jitter(img: np.ndarray, p: AugParams, rng: np.random.Generator) -> np.ndarray:
    """Shift H, L and S by whole amounts drawn from ``[-random_x, random_x]`` (truncated as
    MXNet's C++ does), clamping to OpenCV's ranges: ``cv2.cvtColor`` to 8-bit HLS and back
    (as MXNet), or :func:`rgb_to_hls` / :func:`hls_to_rgb` without OpenCV."""
    shifts = [int(_uniform(rng, 0, 1) * v * 2 - v) for v in (p.random_h, p.random_s, p.random_l)]
    if img.shape[2] < 3:
        return img
    h, s, light = shifts
    cv2 = _cv.opencv()
    if cv2 is not None:
        # (h, l, s) + shifts as one affine map per pixel, which saturates at 0 and 255
        shift = np.array([[1, 0, 0, h], [0, 1, 0, light], [0, 0, 1, s]], np.float32)
        hls = cv2.transform(cv2.cvtColor(img[..., :3], cv2.COLOR_RGB2HLS), shift)
        if h > 0:
            np.minimum(hls[..., 0], 180, out=hls[..., 0])  # hue's top is 180
        rgb = cv2.cvtColor(hls, cv2.COLOR_HLS2RGB)
        if img.shape[2] == 3:
            return rgb
        out = img.copy()
        out[..., :3] = rgb
        return out
    hls = np.round(rgb_to_hls(img[..., :3]))
    hls[..., 0] = np.clip(hls[..., 0] + h, 0, 180)
    hls[..., 1] = np.clip(hls[..., 1] + light, 0, 255)
    hls[..., 2] = np.clip(hls[..., 2] + s, 0, 255)
    out = img.copy()
    out[..., :3] = hls_to_rgb(hls)
    return out


_GRAY = np.array([0.299, 0.587, 0.114], np.float32)
# ImageNet's RGB principal components, as MXNet's lighting noise uses
_EIGVAL = np.array([55.46, 4.794, 1.148], np.float32)
_EIGVEC = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140],
                    [-0.5836, -0.6948, 0.4203]], np.float32)


def color_jitter(img: np.ndarray, p: AugParams, rng: np.random.Generator) -> np.ndarray:
    """Brightness, contrast and saturation factors ``1 + U(-v, v)`` and PCA lighting noise
    (float output when any applies)."""
    if not (p.brightness or p.contrast or p.saturation or p.pca_noise) or img.shape[2] < 3:
        return img
    f = img.astype(np.float32)
    if p.brightness:
        f *= 1 + _uniform(rng, -p.brightness, p.brightness)
    if p.contrast:
        alpha = 1 + _uniform(rng, -p.contrast, p.contrast)
        f = f * alpha + (1 - alpha) * float((f[..., :3] @ _GRAY).mean())
    if p.saturation:
        alpha = 1 + _uniform(rng, -p.saturation, p.saturation)
        f[..., :3] = f[..., :3] * alpha + (1 - alpha) * (f[..., :3] @ _GRAY)[..., None]
    if p.pca_noise:
        alpha = rng.normal(0, p.pca_noise, size=3).astype(np.float32)
        f[..., :3] += _EIGVEC @ (alpha * _EIGVAL)
    return f


def augment(img: np.ndarray, p: AugParams, rng: np.random.Generator) -> np.ndarray:
    """Every geometric and colour step of MXNet's default augmenter, in its order."""
    if p.resize > 0:
        h, w = img.shape[:2]
        size = (p.resize * h // w, p.resize) if h > w else (p.resize, p.resize * w // h)
        img = resize(img, size[0], size[1], p.inter_method if p.inter_method != AUTO
                     else BILINEAR, rng)
    # a plain crop right after the warp is done by it (only the kept pixels are warped)
    fused = p.warps and p.pad <= 0 and p.plain_crop
    if p.warps:
        img = warp(img, p, rng, crop=fused)
    if p.pad > 0:
        cv2 = _cv.opencv()
        if cv2 is not None:
            img = _hwc(cv2.copyMakeBorder(img, p.pad, p.pad, p.pad, p.pad, cv2.BORDER_CONSTANT,
                                          value=(p.fill_value,) * 4), img)
        else:
            img = np.pad(img, ((p.pad, p.pad), (p.pad, p.pad), (0, 0)),
                         constant_values=p.fill_value)
    if not fused:
        img = crop(img, p, rng)
    if p.random_h or p.random_s or p.random_l:
        img = hls_jitter(img, p, rng)
    return color_jitter(img, p, rng)


def normalize(img: np.ndarray, p: AugParams, rng: np.random.Generator,
              mean_img: np.ndarray | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """The batch entry of an augmented ``(h, w, c)`` image: ``(C, H, W)`` float32, mirrored
    when asked, ``((x - mean) * contrast + illumination) * scale / std`` per channel, written
    into ``out`` when given (a slot of the batch). The image is read in place, as a
    channel-first view (mirrored by a reversed one, the mean image with it)."""
    mirror = p.mirror or (p.rand_mirror and _randint(rng, 0, 1) == 1)
    contrast = 1 + _uniform(rng, -p.max_random_contrast, p.max_random_contrast) \
        if p.max_random_contrast > 0 else 1.0
    illumination = _uniform(rng, -p.max_random_illumination, p.max_random_illumination) \
        if p.max_random_illumination > 0 else 0.0
    h, w, c = img.shape
    if out is None:
        out = np.empty((c, h, w), np.float32)
    src = (img[:, ::-1] if mirror else img).transpose(2, 0, 1)
    means, std, mult, scales = p.normalization(c)
    if mean_img is not None:
        means = mean_img[:, :, ::-1] if mirror else mean_img
    if contrast != 1.0:
        mult = np.float32(contrast * p.scale) / std
    # the float32 steps of (x - mean) * mult + add, a multiply by 1 or an add of 0 left out
    # (they change nothing)
    np.subtract(src, means, out=out, dtype=np.float32)
    if contrast != 1.0 or scales:
        np.multiply(out, mult, out=out)
    if illumination:
        np.add(out, np.float32(illumination * p.scale) / std, out=out)
    return out
