"""MXNet's ``mx.image``: decoding helpers, the Python augmenters and ``ImageIter``.

Images are numpy ``(height, width, channels)`` arrays in RGB order, as ``mx.image`` hands
them out (there as NDArrays). Augmenters are callables from one such image to another;
:func:`CreateAugmenter` builds MXNet's standard list. ``ImageIter`` reads a ``.rec`` (with
or without ``.idx``), a ``.lst`` plus a root folder, or an in-memory list, and is a
:class:`~raymod.io.RowSource`: a Ray worker reads and augments its own images.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from . import random as _random
from . import recordio
from .io.base import DataDesc, RowReader, check_rows
from .io.image_aug import BILINEAR, CUBIC, NEAREST, resize
from .io.image_record_iter import RecordFile
from .io.sampler import RowIter

__all__ = ["imdecode", "imread", "imresize", "resize_short", "fixed_crop", "center_crop",
           "random_crop", "color_normalize", "CreateAugmenter", "ImageIter", "ResizeAug",
           "ForceResizeAug", "RandomCropAug", "CenterCropAug", "HorizontalFlipAug",
           "CastAug", "ColorNormalizeAug", "ColorJitterAug", "LightingAug"]

_INTERP = {0: NEAREST, 1: BILINEAR, 2: CUBIC, 3: 3, 4: 4, 9: 9, 10: 10}


def imdecode(buf: bytes, flag: int = 1, to_rgb: bool = True) -> np.ndarray:
    """Decode JPEG/PNG bytes: ``(h, w, 3)`` (``flag=1``) or ``(h, w, 1)`` (``flag=0``)."""
    img = recordio.decode_image(bytes(buf), 1 if flag else 0, bgr=not to_rgb)
    return img[:, :, None] if img.ndim == 2 else img


def imread(filename: str, flag: int = 1, to_rgb: bool = True) -> np.ndarray:
    """Read and decode an image file."""
    with open(filename, "rb") as f:
        return imdecode(f.read(), flag, to_rgb)


def imresize(src: np.ndarray, w: int, h: int, interp: int = 1) -> np.ndarray:
    """``src`` resized to width ``w`` and height ``h``."""
    return resize(np.asarray(src, np.uint8), int(h), int(w), _INTERP.get(interp, BILINEAR),
                  _random.generator())


def resize_short(src: np.ndarray, size: int, interp: int = 2) -> np.ndarray:
    """Resize so that the shorter edge is ``size``, keeping the aspect ratio."""
    h, w = src.shape[:2]
    new_h, new_w = (size, size * w // h) if h < w else (size * h // w, size)
    return imresize(src, new_w, new_h, interp)


def fixed_crop(src: np.ndarray, x0: int, y0: int, w: int, h: int,
               size: tuple | None = None, interp: int = 2) -> np.ndarray:
    """The ``w x h`` crop at ``(x0, y0)``, resized to ``size = (w, h)`` when given."""
    out = src[y0:y0 + h, x0:x0 + w]
    if size is not None and (w, h) != tuple(size):
        out = imresize(out, size[0], size[1], interp)
    return out


def _scaled_to_fit(src_w: int, src_h: int, size: tuple) -> tuple[int, int]:
    """The crop ``size`` shrunk, keeping its aspect ratio, until it fits the image."""
    w, h = size
    if h > src_h:
        w, h = w * src_h // h, src_h
    if w > src_w:
        w, h = src_w, h * src_w // w
    return int(w), int(h)


def center_crop(src: np.ndarray, size: tuple, interp: int = 2) -> tuple[np.ndarray, tuple]:
    """The centre crop of ``size = (w, h)`` (shrunk to fit), resized to ``size``; and its
    ``(x0, y0, w, h)``."""
    h, w = src.shape[:2]
    new_w, new_h = _scaled_to_fit(w, h, size)
    x0, y0 = (w - new_w) // 2, (h - new_h) // 2
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def random_crop(src: np.ndarray, size: tuple, interp: int = 2) -> tuple[np.ndarray, tuple]:
    """A crop of ``size = (w, h)`` (shrunk to fit) at a random place, resized to ``size``."""
    h, w = src.shape[:2]
    new_w, new_h = _scaled_to_fit(w, h, size)
    rng = _random.generator()
    x0, y0 = int(rng.integers(0, w - new_w + 1)), int(rng.integers(0, h - new_h + 1))
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def color_normalize(src: np.ndarray, mean: Any, std: Any = None) -> np.ndarray:
    """``(src - mean) / std`` per channel."""
    out = np.asarray(src, np.float32) - np.float32(mean)
    return out / np.float32(std) if std is not None else out


# --- augmenters: callables image -> image ---------------------------------------------------
class Augmenter:
    """Base of the augmenters: ``aug(img) -> img``; ``dumps()`` names it and its arguments."""

    def __init__(self, **kwargs: Any):
        self._kwargs = kwargs

    def dumps(self) -> str:
        """``[name, arguments]`` as JSON."""
        import json
        return json.dumps([type(self).__name__.lower(), self._kwargs], default=str)

    def __call__(self, src: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class ResizeAug(Augmenter):
    """Resize the shorter edge to ``size``."""

    def __init__(self, size: int, interp: int = 2):
        super().__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src):
        return resize_short(src, self.size, self.interp)


class ForceResizeAug(Augmenter):
    """Resize to exactly ``size = (w, h)``."""

    def __init__(self, size: tuple, interp: int = 2):
        super().__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src):
        return imresize(src, self.size[0], self.size[1], self.interp)


class RandomCropAug(Augmenter):
    """A random crop of ``size = (w, h)``."""

    def __init__(self, size: tuple, interp: int = 2):
        super().__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src):
        return random_crop(src, self.size, self.interp)[0]


class CenterCropAug(Augmenter):
    """The centre crop of ``size = (w, h)``."""

    def __init__(self, size: tuple, interp: int = 2):
        super().__init__(size=size, interp=interp)
        self.size, self.interp = size, interp

    def __call__(self, src):
        return center_crop(src, self.size, self.interp)[0]


class HorizontalFlipAug(Augmenter):
    """Mirror left-right with probability ``p``."""

    def __init__(self, p: float):
        super().__init__(p=p)
        self.p = p

    def __call__(self, src):
        return src[:, ::-1] if _random.generator().random() < self.p else src


class CastAug(Augmenter):
    """Cast to ``typ`` (float32)."""

    def __init__(self, typ: str = "float32"):
        super().__init__(type=typ)
        self.typ = typ

    def __call__(self, src):
        return np.asarray(src, self.typ)


class ColorNormalizeAug(Augmenter):
    """Subtract ``mean`` and divide by ``std`` per channel."""

    def __init__(self, mean: Any, std: Any):
        super().__init__(mean=mean, std=std)
        self.mean, self.std = mean, std

    def __call__(self, src):
        return color_normalize(src, self.mean, self.std)


_GRAY = np.float32([0.299, 0.587, 0.114])


class ColorJitterAug(Augmenter):
    """Brightness, contrast and saturation factors ``1 + U(-v, v)``, in random order."""

    def __init__(self, brightness: float, contrast: float, saturation: float):
        super().__init__(brightness=brightness, contrast=contrast, saturation=saturation)
        self.amounts = {"brightness": brightness, "contrast": contrast,
                        "saturation": saturation}

    def __call__(self, src):
        rng = _random.generator()
        out = np.asarray(src, np.float32)
        for kind in rng.permutation(list(self.amounts)):
            v = self.amounts[kind]
            if not v:
                continue
            alpha = 1 + rng.uniform(-v, v)
            gray = out @ _GRAY
            if kind == "brightness":
                out = out * alpha
            elif kind == "contrast":
                out = out * alpha + (1 - alpha) * gray.mean()
            else:
                out = out * alpha + (1 - alpha) * gray[..., None]
        return out


class LightingAug(Augmenter):
    """AlexNet-style PCA lighting noise of scale ``alphastd``."""

    def __init__(self, alphastd: float, eigval: Any, eigvec: Any):
        super().__init__(alphastd=alphastd)
        self.alphastd = alphastd
        self.eigval, self.eigvec = np.float32(eigval), np.float32(eigvec)

    def __call__(self, src):
        alpha = _random.generator().normal(0, self.alphastd, size=3).astype(np.float32)
        return np.asarray(src, np.float32) + self.eigvec @ (alpha * self.eigval)


class RandomSizedCropAug(Augmenter):
    """A crop of random area share in ``[min_area, 1]`` and aspect ratio in ``ratio``,
    resized to ``size = (w, h)`` (the centre crop when no try fits)."""

    def __init__(self, size: tuple, area: float, ratio: tuple, interp: int = 2):
        super().__init__(size=size, area=area, ratio=ratio, interp=interp)
        self.size, self.area, self.ratio, self.interp = size, area, ratio, interp

    def __call__(self, src):
        h, w = src.shape[:2]
        rng = _random.generator()
        for _ in range(10):
            target = rng.uniform(self.area, 1.0) * h * w
            ratio = np.exp(rng.uniform(np.log(self.ratio[0]), np.log(self.ratio[1])))
            cw, ch = int(round(np.sqrt(target * ratio))), int(round(np.sqrt(target / ratio)))
            if 0 < cw <= w and 0 < ch <= h:
                x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
                return fixed_crop(src, x0, y0, cw, ch, self.size, self.interp)
        return center_crop(src, self.size, self.interp)[0]


_MEAN = [123.68, 116.28, 103.53]
_STD = [58.395, 57.12, 57.375]
_EIGVAL = [55.46, 4.794, 1.148]
_EIGVEC = [[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140], [-0.5836, -0.6948, 0.4203]]


def CreateAugmenter(data_shape: Sequence[int], resize: int = 0, rand_crop: bool = False,
                    rand_resize: bool = False, rand_mirror: bool = False, mean: Any = None,
                    std: Any = None, brightness: float = 0, contrast: float = 0,
                    saturation: float = 0, hue: float = 0, pca_noise: float = 0,
                    rand_gray: float = 0, inter_method: int = 2) -> list:
    """MXNet's standard augmenter list for images of ``data_shape = (C, H, W)``.

    ``mean=True`` / ``std=True`` mean ImageNet's RGB statistics. ``hue`` and ``rand_gray``
    are not provided (a ValueError says so when set).
    """
    if hue or rand_gray:
        raise ValueError("CreateAugmenter: hue and rand_gray jitter are not provided by raymod "
                         f"(got hue={hue}, rand_gray={rand_gray})")
    augs: list = []
    if resize > 0:
        augs.append(ResizeAug(resize, inter_method))
    size = (data_shape[2], data_shape[1])
    if rand_resize:
        if not rand_crop:
            raise ValueError("CreateAugmenter: rand_resize needs rand_crop=True")
        augs.append(RandomSizedCropAug(size, 0.08, (3 / 4, 4 / 3), inter_method))
    elif rand_crop:
        augs.append(RandomCropAug(size, inter_method))
    else:
        augs.append(CenterCropAug(size, inter_method))
    if rand_mirror:
        augs.append(HorizontalFlipAug(0.5))
    augs.append(CastAug())
    if brightness or contrast or saturation:
        augs.append(ColorJitterAug(brightness, contrast, saturation))
    if pca_noise > 0:
        augs.append(LightingAug(pca_noise, _EIGVAL, _EIGVEC))
    mean = _MEAN if mean is True else mean
    std = _STD if std is True else std
    if mean is not None or std is not None:
        augs.append(ColorNormalizeAug(0 if mean is None else mean, std))
    return augs


class ImageSource(RowReader):
    """Where ``ImageIter``'s images come from and how they are augmented: a ``.rec`` (byte
    offsets) or a list of ``(labels, path)`` under a root folder. Picklable: a worker that
    gets it reads and augments the images itself."""

    def __init__(self, rec: str | None, offsets: np.ndarray | None, items: list | None,
                 root: str, channels: int, label_width: int, augs: list, dtype: str):
        self.file = RecordFile(rec) if rec else None
        self.offsets, self.items, self.root = offsets, items, os.path.abspath(root)
        self.channels, self.label_width, self.augs, self.dtype = (channels, label_width,
                                                                  augs, dtype)

    def __len__(self) -> int:
        return len(self.offsets) if self.file is not None else len(self.items)

    def take(self, rows: Any) -> tuple[list, list]:
        """Augmented ``(n, C, H, W)`` images and labels of ``rows``."""
        data, labels = [], []
        for row in rows:
            img, label = self._read(int(row))
            for aug in self.augs:
                img = aug(img)
            data.append(np.asarray(img, self.dtype).transpose(2, 0, 1))
            labels.append(label[:self.label_width])
        label = np.stack(labels)
        return [np.stack(data)], [label[:, 0] if self.label_width == 1 else label]

    def _read(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        if self.file is not None:
            header, payload = recordio.unpack(self.file.read(int(self.offsets[row])))
            label = np.ravel(np.asarray(header.label, np.float32))
            return imdecode(payload, self.channels != 1), label
        label, path = self.items[row]
        return imread(os.path.join(self.root, path), self.channels != 1), label


class ImageIter(RowIter):
    """MXNet's ``mx.image.ImageIter``: images from a ``.rec``, a ``.lst`` or a list,
    augmented by ``aug_list`` (default: :func:`CreateAugmenter` of ``kwargs``).

    Parameters
    ----------
    batch_size : int
        Images per batch.
    data_shape : tuple of int
        ``(channels, height, width)`` the augmenters produce.
    label_width : int, default 1
        Labels per image.
    path_imgrec, path_imgidx : str, optional
        A RecordIO file and its index.
    path_imglist, path_root : str, optional
        A ``.lst`` file and the folder its paths are relative to.
    imglist : list, optional
        ``[[label(s), path], ...]`` in memory, paths under ``path_root``.
    shuffle : bool, default False
        A new random order each epoch.
    part_index, num_parts : int, default 0 and 1
        Read only one of ``num_parts`` equal shares of the images.
    aug_list : list of callables, optional
        Augmenters applied in order to each ``(h, w, c)`` image.
    data_name, label_name : str
        Input names.
    dtype : str, default 'float32'
        Data type of the batches.
    last_batch_handle : {'pad', 'discard', 'roll_over'}, default 'pad'
        As ``NDArrayIter``.
    **kwargs
        Arguments of :func:`CreateAugmenter` when ``aug_list`` is None.
    """

    def __init__(self, batch_size: int, data_shape: Sequence[int], label_width: int = 1,
                 path_imgrec: str | None = None, path_imglist: str | None = None,
                 path_root: str | None = None, path_imgidx: str | None = None,
                 shuffle: bool = False, part_index: int = 0, num_parts: int = 1,
                 aug_list: list | None = None, imglist: list | None = None,
                 data_name: str = "data", label_name: str = "softmax_label",
                 dtype: str = "float32", last_batch_handle: str = "pad", **kwargs: Any):
        if not (path_imgrec or path_imglist or imglist is not None):
            raise ValueError("ImageIter needs path_imgrec, path_imglist or imglist")
        data_shape = tuple(int(d) for d in data_shape)
        if len(data_shape) != 3 or data_shape[0] not in (1, 3):
            raise ValueError(f"data_shape must be (1 or 3, height, width); got {data_shape}")
        if not 0 <= part_index < num_parts:
            raise ValueError(f"part_index must lie in [0, num_parts={num_parts}); got "
                             f"{part_index}")
        augs = CreateAugmenter(data_shape, **kwargs) if aug_list is None else list(aug_list)
        offsets = items = None
        if path_imgrec:
            offsets = (sorted(recordio.read_index(path_imgidx).values()) if path_imgidx
                       else recordio.record_offsets(path_imgrec))
        elif path_imglist:
            items = [(np.float32(lab), path)
                     for _, lab, path in recordio.read_image_list(path_imglist)]
        else:
            items = [(np.float32(np.ravel(lab)), path) for lab, path in imglist]
        whole = offsets if offsets is not None else items
        step = -(-len(whole) // num_parts)
        whole = whole[step * part_index:step * (part_index + 1)]
        if offsets is not None:
            offsets = np.asarray(whole, np.int64)
        else:
            items = whole
        self.data_shape, self.label_width = data_shape, int(label_width)
        self.dtype = np.dtype(dtype)
        self.auglist = augs
        self._source = ImageSource(path_imgrec, offsets, items, path_root or "",
                                   data_shape[0], self.label_width, augs, str(self.dtype))
        if len(self._source) == 0:
            raise ValueError("ImageIter found no images (in this part)")
        self._names = (data_name, label_name)
        self._init_sampler(batch_size, shuffle, last_batch_handle, None)

    @property
    def num_rows(self) -> int:
        """Images in this part."""
        return len(self._source)

    def take(self, rows: Any) -> tuple[list, list]:
        """Augmented images and labels of ``rows``."""
        return self._source.take(check_rows(rows, self.num_rows))

    def reader(self) -> ImageSource:
        """What a Ray worker is sent: where the images are and the augmenters."""
        return self._source

    @property
    def data_descs(self) -> list[DataDesc]:
        """One image's descriptor."""
        return [DataDesc(self._names[0], self.data_shape, self.dtype)]

    @property
    def label_descs(self) -> list[DataDesc]:
        """One image's label descriptor."""
        shape = () if self.label_width == 1 else (self.label_width,)
        return [DataDesc(self._names[1], shape, np.float32)]
