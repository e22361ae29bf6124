"""Offline stand-ins for the datasets MXNet's examples download, in the formats they read.

* MNIST: idx-ubyte files (MNIST's own format) of scikit-learn's bundled 8x8 digits, each
  upsampled 3x to 24x24 and placed in a 28x28 frame (more, varied rows).
* YearPredictionMSD: a bzip2'd svmlight file (label = year, 90 features), a noisy linear
  function of Gaussian features.
"""
from __future__ import annotations

import bz2
import os
import struct

import numpy as np

MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
               "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def write_idx(path: str, array: np.ndarray) -> None:
    """Write a uint8 array as an idx file: 0, 0, type 0x08, ndim, big-endian dims, bytes."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    with open(path, "wb") as f:
        f.write(bytes([0, 0, 0x08, array.ndim]))
        f.write(struct.pack(f">{array.ndim}I", *array.shape))
        f.write(array.tobytes())


def digits_28(images: np.ndarray) -> np.ndarray:
    """8x8 digits (0..16) as 28x28 uint8 images (0..255): each pixel becomes a block of
    4 or 3 rows and columns (4+3+4+3+4+3+4+3 = 28)."""
    sizes = [4, 3] * 4
    big = np.repeat(np.repeat(images.reshape(-1, 8, 8), sizes, axis=1), sizes, axis=2)
    return np.rint(big * (255.0 / 16.0)).astype(np.uint8)


def write_mnist(folder: str, train_copies: int = 8, test_copies: int = 4,
                n_train_digits: int = 1500, seed: int = 0) -> dict:
    """Write the four MNIST idx files into ``folder``; the arrays written, by file name."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, rows, copies in (("train", slice(0, n_train_digits), train_copies),
                                ("t10k", slice(n_train_digits, None), test_copies)):
        images = np.repeat(digits.images[rows], copies, axis=0)
        labels = np.repeat(digits.target[rows], copies).astype(np.uint8)
        order = rng.permutation(len(images))  # files list the copies interleaved
        arrays[f"{split}-images-idx3-ubyte"] = digits_28(images)[order]
        arrays[f"{split}-labels-idx1-ubyte"] = labels[order]
    os.makedirs(folder, exist_ok=True)
    for name, array in arrays.items():
        write_idx(os.path.join(folder, name), array)
    return arrays


def write_year_prediction(folder: str, rows: int = 2000, seed: int = 0) -> str:
    """Write ``YearPredictionMSD.bz2`` (svmlight: ``year 1:x1 ... 90:x90``) into ``folder``."""
    rng = np.random.default_rng(seed)
    features = rng.normal(0.0, 1.0, size=(rows, 90)) * rng.uniform(0.5, 20.0, size=90)
    weights = rng.normal(0.0, 1.0, size=90) / 10.0
    years = np.rint(1998 + features @ weights + rng.normal(0.0, 5.0, size=rows))
    lines = [" ".join([f"{int(y)}", *(f"{j + 1}:{v:.6f}" for j, v in enumerate(row))])
             for y, row in zip(years, features)]
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "YearPredictionMSD.bz2")
    with bz2.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")
    return path


def write_cifar_rec(folder: str, n_train: int = 600, n_val: int = 200, seed: int = 0) -> dict:
    """Write ``cifar10_train.rec`` and ``cifar10_val.rec`` (32x32 JPEGs, ten classes told
    apart by their colour and stripes) into ``folder``, as train_cifar10.py's download step
    names them; the labels written, by file name."""
    from raymod import recordio

    rng = np.random.default_rng(seed)
    palette = rng.integers(30, 226, size=(10, 3))
    y, x = np.mgrid[0:32, 0:32]
    os.makedirs(folder, exist_ok=True)
    written = {}
    for name, count in (("cifar10_train.rec", n_train), ("cifar10_val.rec", n_val)):
        labels = rng.integers(0, 10, size=count)
        rec = recordio.MXRecordIO(os.path.join(folder, name), "w")
        for i, label in enumerate(labels):
            stripes = np.sin((x if label % 2 else y) * (1 + label % 5) / 3.0)[..., None]
            img = palette[label] + 25 * stripes + rng.normal(0, 10, size=(32, 32, 3))
            img = np.clip(img, 0, 255).astype(np.uint8)
            rec.write(recordio.pack_img((0, float(label), i, 0), img[..., ::-1], quality=90))
        rec.close()
        written[name] = labels
    return written
