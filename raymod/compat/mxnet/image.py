"""``mx.image``: raymod's image helpers and ``ImageIter``, handing out NDArrays."""
from __future__ import annotations

from typing import Any

from ... import image as _image
from ...image import (CastAug, CenterCropAug, ColorJitterAug, ColorNormalizeAug,  # noqa: F401
                      CreateAugmenter, ForceResizeAug, HorizontalFlipAug, LightingAug,
                      RandomCropAug, RandomSizedCropAug, ResizeAug)
from ..ndarray import wrap
from .io import _compat

__all__ = list(_image.__all__) + ["RandomSizedCropAug"]

ImageIter = _compat(_image.ImageIter)


def _returning_ndarrays(func):
    def call(*args: Any, **kwargs: Any) -> Any:
        return wrap(func(*args, **kwargs))
    call.__name__, call.__doc__ = func.__name__, func.__doc__
    return call


imdecode = _returning_ndarrays(_image.imdecode)
imread = _returning_ndarrays(_image.imread)
imresize = _returning_ndarrays(_image.imresize)
resize_short = _returning_ndarrays(_image.resize_short)
fixed_crop = _returning_ndarrays(_image.fixed_crop)
center_crop = _returning_ndarrays(_image.center_crop)
random_crop = _returning_ndarrays(_image.random_crop)
color_normalize = _returning_ndarrays(_image.color_normalize)
