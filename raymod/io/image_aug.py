"""MXNet's default image augmenter (``ImageRecordIter``'s arguments), on numpy and Pillow.

One image goes through the steps MXNet's C++ augmenter takes, in its order: resize the
shorter edge, an affine warp (rotation, shear, scale, aspect ratio, size bounds), padding,
a crop (random-resized, random-size, random or centre), an HLS jitter, then the colour
jitters; :func:`normalize` mirrors it and subtracts the mean, divides by the std and scales,
giving the ``(C, H, W)`` float array of a batch. Every random draw comes from the
``numpy.random.Generator`` passed in, in a fixed order, so one seed gives one result.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

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


def pillow_filter(method: int, src_size: tuple, dst_size: tuple, rng: np.random.Generator) -> int:
    """The Pillow resampling filter for an MXNet ``inter_method`` (9: cubic to enlarge, area
    to shrink; 10: one drawn at random)."""
    from PIL import Image
    if method == AUTO:
        method = CUBIC if dst_size[0] * dst_size[1] > src_size[0] * src_size[1] else AREA
    elif method == RANDOM:
        method = int(rng.integers(0, 5))
    return {NEAREST: Image.NEAREST, BILINEAR: Image.BILINEAR, CUBIC: Image.BICUBIC,
            AREA: Image.BOX, LANCZOS: Image.LANCZOS}[method]


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
    """``img`` resized to ``(height, width)`` with MXNet's ``inter_method``."""
    if img.shape[:2] == (height, width):
        return img
    if method == BILINEAR:
        return bilinear_resize(img, height, width)
    from PIL import Image
    flt = pillow_filter(method, img.shape[1::-1], (width, height), rng)
    return np.asarray(_pil(img).resize((width, height), flt)).reshape(
        (height, width, img.shape[2]))


def _pil(img: np.ndarray) -> Any:
    """A Pillow image of an ``(h, w, c)`` uint8 array."""
    from PIL import Image
    return Image.fromarray(img if img.shape[2] != 1 else img[:, :, 0])


def _uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(rng.uniform(low, high)) if high > low else float(low)


def _randint(rng: np.random.Generator, low: int, high: int) -> int:
    """An int in ``[low, high]``, both ends included."""
    return int(rng.integers(low, high + 1)) if high > low else int(low)


def warp(img: np.ndarray, p: AugParams, rng: np.random.Generator) -> np.ndarray:
    """MXNet's affine step: shear, rotation, scale and aspect ratio about the centre, into
    an image of ``scale`` times the size (bounded by min/max_img_size), filled outside."""
    from PIL import Image
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
    new_w = int(max(p.min_img_size, min(p.max_img_size, scale * w)))
    new_h = int(max(p.min_img_size, min(p.max_img_size, scale * h)))
    m = np.array([[hs * a - shear * b * ws, hs * b + shear * a * ws],
                  [-b * ws, a * ws]])
    # the source centre lands on the new image's centre
    t = (np.array([new_w, new_h]) - m @ np.array([w, h])) / 2
    det = m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]  # a 2x2 inverse (np.linalg costs more)
    inv = np.array([[m[1, 1], -m[0, 1]], [-m[1, 0], m[0, 0]]]) / det
    coeffs = np.concatenate([inv, (-inv @ t)[:, None]], axis=1).ravel()
    fill = (p.fill_value,) * img.shape[2] if img.shape[2] > 1 else p.fill_value
    # Pillow warps with nearest, bilinear or bicubic only: the other methods map to these
    method = p.inter_method if p.inter_method != RANDOM else int(rng.integers(0, 5))
    resample = {NEAREST: Image.NEAREST, CUBIC: Image.BICUBIC,
                LANCZOS: Image.BICUBIC}.get(method, Image.BILINEAR)
    out = _pil(img).transform((new_w, new_h), Image.AFFINE, tuple(coeffs), resample=resample,
                              fillcolor=fill)
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
    if h < out_h or w < out_w:
        raise ValueError(f"the image ({h}x{w} after resize, warp and pad) is smaller than "
                         f"data_shape's {out_h}x{out_w}; set resize or a smaller data_shape")
    y, x = _crop_origin(h - out_h, w - out_w, p.rand_crop, rng)
    return img[y:y + out_h, x:x + out_w]


def _crop_origin(span_y: int, span_x: int, random: bool, rng: np.random.Generator) -> tuple:
    if random:
        return _randint(rng, 0, span_y), _randint(rng, 0, span_x)
    return span_y // 2, span_x // 2


def rgb_to_hls(img: np.ndarray) -> np.ndarray:
    """OpenCV's 8-bit HLS of an RGB uint8 image: H in [0, 180), L and S in [0, 255]."""
    f = img.astype(np.float32) / 255
    r, g, b = f[..., 0], f[..., 1], f[..., 2]
    # (elementwise over the three planes: a reduction along the last axis is far slower)
    vmax, vmin = np.maximum(np.maximum(r, g), b), np.minimum(np.minimum(r, g), b)
    diff, total = vmax - vmin, vmax + vmin
    light = total / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        sat = np.where(light < 0.5, diff / total, diff / (2 - total))
        hue = np.where(vmax == r, (g - b) / diff * 60,
                       np.where(vmax == g, (b - r) / diff * 60 + 120, (r - g) / diff * 60 + 240))
    grey = diff <= np.finfo(np.float32).eps
    sat, hue = np.where(grey, 0, sat), np.where(grey, 0, hue)
    hue = np.where(hue < 0, hue + 360, hue)
    return np.stack([hue / 2, light * 255, sat * 255], axis=-1)


def hls_to_rgb(hls: np.ndarray) -> np.ndarray:
    """The inverse of :func:`rgb_to_hls` (float H, L, S in OpenCV's 8-bit ranges)."""
    h = (hls[..., 0] * 2 % 360) / 360
    light, s = hls[..., 1] / 255, hls[..., 2] / 255
    q = np.where(light < 0.5, light * (1 + s), light + s - light * s)
    p = 2 * light - q

    def channel(t: np.ndarray) -> np.ndarray:
        t = t % 1.0
        return np.where(t < 1 / 6, p + (q - p) * 6 * t,
                        np.where(t < 1 / 2, q, np.where(t < 2 / 3, p + (q - p) * (4 - 6 * t), p)))

    rgb = np.stack([channel(h + 1 / 3), channel(h), channel(h - 1 / 3)], axis=-1)
    return np.clip(np.floor(rgb * 255 + 0.5), 0, 255).astype(np.uint8)


def hls_jitter(img: np.ndarray, p: AugParams, rng: np.random.Generator) -> np.ndarray:
    """Shift H, L and S by whole amounts drawn from ``[-random_x, random_x]`` (truncated as
    MXNet's C++ does), clamping to OpenCV's ranges."""
    shifts = [int(_uniform(rng, 0, 1) * v * 2 - v) for v in (p.random_h, p.random_s, p.random_l)]
    if img.shape[2] < 3:
        return img
    hls = np.round(rgb_to_hls(img[..., :3]))
    h, s, light = shifts
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
    if p.warps:
        img = warp(img, p, rng)
    if p.pad > 0:
        img = np.pad(img, ((p.pad, p.pad), (p.pad, p.pad), (0, 0)),
                     constant_values=p.fill_value)
    img = crop(img, p, rng)
    if p.random_h or p.random_s or p.random_l:
        img = hls_jitter(img, p, rng)
    return color_jitter(img, p, rng)


def normalize(img: np.ndarray, p: AugParams, rng: np.random.Generator,
              mean_img: np.ndarray | None = None) -> np.ndarray:
    """The batch entry of an augmented ``(h, w, c)`` image: ``(C, H, W)`` float32, mirrored
    when asked, ``((x - mean) * contrast + illumination) * scale / std`` per channel."""
    chw = img.transpose(2, 0, 1).astype(np.float32)
    mirror = p.mirror or (p.rand_mirror and _randint(rng, 0, 1) == 1)
    contrast = 1 + _uniform(rng, -p.max_random_contrast, p.max_random_contrast) \
        if p.max_random_contrast > 0 else 1.0
    illumination = _uniform(rng, -p.max_random_illumination, p.max_random_illumination) \
        if p.max_random_illumination > 0 else 0.0
    c = chw.shape[0]
    if mean_img is not None:
        chw -= mean_img
    else:
        chw -= np.float32([p.mean_r, p.mean_g, p.mean_b, p.mean_a][:c] if c > 1
                          else [p.mean_r])[:, None, None]
    std = np.float32([p.std_r, p.std_g, p.std_b, p.std_a][:c] if c > 1 else [p.std_r])
    mult = np.float32(contrast * p.scale) / std
    chw = chw * mult[:, None, None] + (np.float32(illumination * p.scale) / std)[:, None, None]
    return chw[:, :, ::-1] if mirror else chw
