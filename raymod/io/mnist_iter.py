"""``MNISTIter``: batches from MNIST's idx-ubyte files, as MXNet's ``mx.io.MNISTIter``."""
from __future__ import annotations

import gzip
import os
import sys
from typing import Sequence

import numpy as np

from .ndarray_iter import NDArrayIter

# idx header: two zero bytes, a type code, the number of dimensions, then one big-endian u32
# per dimension; MNIST's files hold unsigned bytes (type 0x08)
_UBYTE = 0x08
_GZIP_MAGIC = b"\x1f\x8b"


def read_idx(path: str, ndim: int) -> np.ndarray:
    """The unsigned-byte array of an idx file (MNIST's format) with ``ndim`` dimensions.

    A gzipped file (``.gz``, as MNIST is distributed) is decompressed first.

    Parameters
    ----------
    path : str
        File to read.
    ndim : int
        Dimensions the file must have (3 for images, 1 for labels).

    Raises
    ------
    ValueError
        When the file is not an idx file of unsigned bytes with ``ndim`` dimensions, or is
        shorter than its header says.
    """
    with open(path, "rb") as f:
        blob = f.read()
    if blob[:2] == _GZIP_MAGIC:  # MNIST is distributed gzipped (train-images-idx3-ubyte.gz)
        blob = gzip.decompress(blob)
    head = blob[:4]
    if len(head) < 4 or head[0] != 0 or head[1] != 0:
        raise ValueError(f"{path!r} is not an idx file (first bytes {head!r})")
    if head[2] != _UBYTE or head[3] != ndim:
        raise ValueError(f"{path!r}: expected an idx file of unsigned bytes with {ndim} "
                         f"dimension(s), got type 0x{head[2]:02x} with {head[3]}")
    dims = tuple(int(d) for d in np.frombuffer(blob, ">u4", count=ndim, offset=4))
    start = 4 + 4 * ndim
    size = int(np.prod(dims))
    if len(blob) - start < size:
        raise ValueError(f"{path!r} is truncated: its header says {dims} ({size} bytes of "
                         f"data), the file holds {len(blob) - start}")
    return np.frombuffer(blob, np.uint8, count=size, offset=start).reshape(dims)


def _check_image_shape(what: str, shape: Sequence[int] | None, image: tuple) -> None:
    """ValueError unless ``shape`` (the caller's ``what``) holds one ``image``'s pixels."""
    if shape is None:
        return
    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise ValueError(f"MNISTIter: {what} must be a tuple of ints, got {shape!r}") from None
    if int(np.prod(dims)) != int(np.prod(image)):
        raise ValueError(f"MNISTIter: {what}={dims} does not hold one image of the file: "
                         f"expected {int(np.prod(image))} pixels, e.g. "
                         f"{(int(np.prod(image)),)} or {(1, *image)}, got {int(np.prod(dims))}")


class MNISTIter(NDArrayIter):
    """Iterate over MNIST's idx-ubyte image and label files, as MXNet's ``MNISTIter``.

    Images come as float32 scaled by 1/256 (as MXNet scales them), shaped
    ``(batch_size, 784)`` when ``flat`` and ``(batch_size, 1, rows, cols)`` otherwise; labels
    as float32 ``(batch_size,)``. Inputs are named ``data`` and ``softmax_label``. A last
    batch that would not be full is dropped, as MXNet's iterator drops it.

    Parameters
    ----------
    image : str, default './train-images-idx3-ubyte'
        Image file (idx, 3 dimensions).
    label : str, default './train-labels-idx1-ubyte'
        Label file (idx, 1 dimension), as many rows as ``image``.
    batch_size : int, default 128
        Rows per batch.
    shuffle : bool, default True
        Shuffle the rows once, when the files are read (``reset`` keeps the order, as in
        MXNet). The order is numpy's permutation for ``seed``, not MXNet's.
    flat : bool, default False
        Flatten each image to one row.
    seed : int, default 0
        Shuffle seed.
    silent : bool, default False
        When False, print how many images were read (on stderr).
    num_parts, part_index : int, default 1, 0
        Read only the ``part_index``-th of ``num_parts`` contiguous slices of the files
        (before shuffling), for data-parallel readers.
    input_shape, data_shape : tuple of int, optional
        The shape of one image as the caller expects it (``(784,)``, ``(1, 28, 28)``);
        MXNet's callers pass one or the other (``mx.test_utils.get_mnist_iterator`` passes
        ``input_shape``). MXNet ignores both and shapes batches by ``flat``; raymod does the
        same, after checking that the shape holds one image's pixels.
    **kwargs
        MXNet's other parameters (``prefetch_buffer``, ``ctx``, ``dtype``) are accepted;
        ``dtype`` other than None/float32 is refused.

    Raises
    ------
    FileNotFoundError
        When ``image`` or ``label`` does not exist.
    ValueError
        For a bad ``num_parts``/``part_index``, ``dtype`` or image shape, or files that do
        not match.
    TypeError
        For an argument MXNet's MNISTIter does not have.
    """

    def __init__(self, image: str = "./train-images-idx3-ubyte",
                 label: str = "./train-labels-idx1-ubyte", batch_size: int = 128,
                 shuffle: bool = True, flat: bool = False, seed: int = 0, silent: bool = False,
                 num_parts: int = 1, part_index: int = 0,
                 input_shape: Sequence[int] | None = None,
                 data_shape: Sequence[int] | None = None, **kwargs):
        unknown = set(kwargs) - {"prefetch_buffer", "ctx", "dtype"}
        if unknown:
            raise TypeError(f"MNISTIter got unexpected argument(s) {sorted(unknown)}")
        if kwargs.get("dtype") not in (None, "float32", np.float32):
            raise ValueError(f"MNISTIter: dtype must be None or 'float32', got "
                             f"{kwargs['dtype']!r}")
        if int(num_parts) < 1 or not 0 <= int(part_index) < int(num_parts):
            raise ValueError(f"MNISTIter: need num_parts >= 1 and 0 <= part_index < num_parts, "
                             f"got num_parts={num_parts}, part_index={part_index}")
        for what, path in (("image", image), ("label", label)):
            if not os.path.isfile(path):
                raise FileNotFoundError(f"MNISTIter: {what} file {path!r} does not exist")
        images = read_idx(image, 3)
        labels = read_idx(label, 1)
        for what, shape in (("input_shape", input_shape), ("data_shape", data_shape)):
            _check_image_shape(what, shape, images.shape[1:])
        if images.shape[0] != labels.shape[0]:
            raise ValueError(f"MNISTIter: {image!r} holds {images.shape[0]} images but "
                             f"{label!r} holds {labels.shape[0]} labels")
        total = images.shape[0]
        lo = total * int(part_index) // int(num_parts)
        hi = total * (int(part_index) + 1) // int(num_parts)
        images, labels = images[lo:hi], labels[lo:hi]
        if shuffle:
            order = np.random.RandomState(seed).permutation(len(labels))
            images, labels = images[order], labels[order]
        shape = (-1, images.shape[1] * images.shape[2]) if flat else (-1, 1, *images.shape[1:])
        data = images.reshape(shape).astype(np.float32) * np.float32(1.0 / 256)
        if not silent:
            print(f"MNISTIter: load {len(labels)} images, shuffle={int(bool(shuffle))}, "
                  f"shape={(int(batch_size), *data.shape[1:])}", file=sys.stderr)
        super().__init__(data, labels.astype(np.float32), batch_size=batch_size, shuffle=False,
                         last_batch_handle="discard", data_name="data",
                         label_name="softmax_label")

    def getdata(self):
        """The current batch's images: one array, as MXNet's C++ iterators return it."""
        return super().getdata()[0]

    def getlabel(self):
        """The current batch's labels: one array, as MXNet's C++ iterators return it."""
        return super().getlabel()[0]
