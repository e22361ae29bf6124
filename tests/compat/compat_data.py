"""Offline stand-ins for the datasets MXNet's examples download, in the formats they read.

* MNIST: idx-ubyte files (MNIST's own format) of scikit-learn's bundled 8x8 digits, each
  upsampled 3x to 24x24 and placed in a 28x28 frame (more, varied rows).
* YearPredictionMSD: a bzip2'd svmlight file (label = year, 90 features), a noisy linear
  function of Gaussian features.
* Sherlock Holmes / PTB-style text (``sherlockholmes.{train,valid,test}.txt``): sentences of a
  small fixed vocabulary from a seeded Markov chain, so a language model has something to learn.
* MovieLens 10M (``ml-10m.zip`` and ``ml-10M100K/r1.train``, ``r1.test``): ``user::movie::
  rating::time`` lines of a low-rank model of ratings plus noise, in half stars.
* Click logs at Avazu's and Criteo's widths (LibSVM ``label id:1 ...`` lines, 0-based ids drawn
  long-tailed as click features are, labels from a logistic model over a hidden weight per id).
* UCI Adult (``adult.data``, ``adult.test``): its 15 CSV columns with values from wide_deep's
  vocabularies and an income label that leans on education, hours and gender.
"""
from __future__ import annotations

import bz2
import gzip
import os
import struct
import zipfile

import numpy as np

MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
               "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def write_idx(path: str, array: np.ndarray) -> None:
    """Write a uint8 array as an idx file: 0, 0, type 0x08, ndim, big-endian dims, bytes
    (gzip'd when ``path`` ends in ``.gz``, as MNIST's downloads are)."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    opened = gzip.open(path, "wb", compresslevel=1) if path.endswith(".gz") else open(path, "wb")
    with opened as f:
        f.write(bytes([0, 0, 0x08, array.ndim]))
        f.write(struct.pack(f">{array.ndim}I", *array.shape))
        f.write(array.tobytes())


def digits_28(images: np.ndarray) -> np.ndarray:
    """8x8 digits (0..16) as 28x28 uint8 images (0..255): each pixel becomes a block of
    4 or 3 rows and columns (4+3+4+3+4+3+4+3 = 28)."""
    sizes = [4, 3] * 4
    big = np.repeat(np.repeat(images.reshape(-1, 8, 8), sizes, axis=1), sizes, axis=2)
    return np.rint(big * (255.0 / 16.0)).astype(np.uint8)


def jittered(images: np.ndarray, rng: np.random.Generator, noise: float) -> np.ndarray:
    """28x28 uint8 images each moved by up to 2 pixels either way (wrapping round; the
    digits' borders are blank) with Gaussian noise of std ``noise`` added."""
    out = np.empty_like(images)
    shifts = rng.integers(-2, 3, size=(len(images), 2))
    for dy, dx in np.unique(shifts, axis=0):
        picked = (shifts[:, 0] == dy) & (shifts[:, 1] == dx)
        out[picked] = np.roll(images[picked], (dy, dx), axis=(1, 2))
    noisy = out + rng.normal(0.0, noise, size=out.shape)
    return np.clip(np.rint(noisy), 0, 255).astype(np.uint8)


def write_mnist(folder: str, train_copies: int = 8, test_copies: int = 4,
                n_train_digits: int = 1500, seed: int = 0, gz: bool = False,
                noise: float = 0.0) -> dict:
    """Write the four MNIST idx files into ``folder`` (as ``.gz`` files with ``gz``, the
    names MNIST is downloaded under); the arrays written, by file name. With ``noise`` > 0
    every copy of a digit is moved (up to 2 pixels) and noised (std ``noise``), so copies
    differ and the test split is not the training split again."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, rows, copies in (("train", slice(0, n_train_digits), train_copies),
                                ("t10k", slice(n_train_digits, None), test_copies)):
        images = np.repeat(digits.images[rows], copies, axis=0)
        labels = np.repeat(digits.target[rows], copies).astype(np.uint8)
        order = rng.permutation(len(images))  # files list the copies interleaved
        big = digits_28(images)
        if noise > 0:
            big = jittered(big, rng, noise)
        arrays[f"{split}-images-idx3-ubyte"] = big[order]
        arrays[f"{split}-labels-idx1-ubyte"] = labels[order]
    os.makedirs(folder, exist_ok=True)
    for name, array in arrays.items():
        write_idx(os.path.join(folder, name + (".gz" if gz else "")), array)
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


# a fixed vocabulary for the language-model text: small, so a few epochs learn the chain
WORDS = ("the a one this that holmes watson lestrade man woman door street house room night "
         "letter case clue hat window said asked saw found knew took came went looked opened "
         "to of in at on with from by and but then quickly slowly late early my his her "
         "our old young dark").split()


def markov_sentences(count: int, rng: np.random.Generator, successors: int = 4,
                     min_len: int = 3, max_len: int = 30) -> list:
    """``count`` sentences (lists of words) from a Markov chain over WORDS in which each
    word has ``successors`` likely next words; a sentence ends with probability 0.12 per
    word after ``min_len`` words (so at most ``max_len``). The chain comes from a fixed
    generator: every call describes the same language, ``rng`` draws the sentences."""
    chain = np.random.default_rng(1234)
    n = len(WORDS)
    nexts = np.stack([chain.choice(n, size=successors, replace=False) for _ in range(n)])
    probs = chain.dirichlet(np.full(successors, 0.7), size=n)
    first = chain.choice(n, size=6, replace=False)
    sentences = []
    for _ in range(count):
        word = int(rng.choice(first))
        sentence = [word]
        while len(sentence) < max_len and (len(sentence) < min_len or rng.random() > 0.12):
            word = int(nexts[word][rng.choice(successors, p=probs[word])])
            sentence.append(word)
        sentences.append(" ".join(WORDS[w] for w in sentence))
    return sentences


def write_sherlock(folder: str, train: int = 2000, valid: int = 200, test: int = 200,
                   seed: int = 0) -> dict:
    """Write ``sherlockholmes.train.txt``, ``.valid.txt`` and ``.test.txt`` into ``folder`` in
    the PTB layout the rnn examples read (one sentence a line, `` w1 w2 ... wn ``: a space
    before and after); the sentences written, by file name."""
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    written = {}
    for split, count in (("train", train), ("valid", valid), ("test", test)):
        name = f"sherlockholmes.{split}.txt"
        written[name] = markov_sentences(count, rng)
        with open(os.path.join(folder, name), "w") as f:
            f.writelines(f" {line} \n" for line in written[name])
    return written


def write_movielens(folder: str, users: int = 1000, movies: int = 400, train: int = 20000,
                    test: int = 2000, rank: int = 3, seed: int = 0) -> dict:
    """Write what matrix_factorization's get_data.py leaves behind into ``folder``:
    ``ml-10M100K/r1.train`` and ``r1.test`` (``user::movie::rating::timestamp`` lines, ids
    from 1, ratings 0.5 to 5 in half stars: a rank-``rank`` model plus noise) and
    ``ml-10m.zip`` holding them (its presence is what stops the download). Returns the
    (user, movie, rating) arrays by split."""
    rng = np.random.default_rng(seed)
    user_f = rng.normal(0.0, 1.0, size=(users + 1, rank))
    movie_f = rng.normal(0.0, 1.0, size=(movies + 1, rank))
    movie_bias = rng.normal(0.0, 0.5, size=movies + 1)
    inner = os.path.join(folder, "ml-10M100K")
    os.makedirs(inner, exist_ok=True)
    written = {}
    for split, count in (("r1.train", train), ("r1.test", test)):
        user = rng.integers(1, users + 1, size=count)
        movie = rng.integers(1, movies + 1, size=count)
        raw = (3.5 + movie_bias[movie] + 0.6 * (user_f[user] * movie_f[movie]).sum(axis=1)
               + rng.normal(0.0, 0.3, size=count))
        rating = np.clip(np.rint(raw * 2) / 2, 0.5, 5.0)
        stamp = rng.integers(1_000_000_000, 1_200_000_000, size=count)
        with open(os.path.join(inner, split), "w") as f:
            f.writelines(f"{u}::{m}::{r:g}::{t}\n" for u, m, r, t in zip(user, movie, rating,
                                                                         stamp))
        written[split] = (user, movie, rating)
    with zipfile.ZipFile(os.path.join(folder, "ml-10m.zip"), "w") as z:
        for split in written:
            z.write(os.path.join(inner, split), f"ml-10M100K/{split}")
    return written


AVAZU_FEATURES = 1_000_001  # linear_classification's width (ids 0 .. 1,000,000)
CRITEO_FEATURES = 1_000_000  # factorization_machine's default --input-size


def write_clicks(path: str, rows: int, width: int, nnz: int = 15, seed: int = 0) -> None:
    """LibSVM click lines: about ``nnz`` ids per line, ascending, below ``width``."""
    rng = np.random.default_rng(seed)
    hidden = rng.standard_normal(width).astype(np.float32)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        for count in rng.integers(nnz - 5, nnz + 6, rows):
            ids = np.unique(np.minimum(rng.zipf(1.1, count), width) - 1)
            label = int(rng.random() < 1 / (1 + np.exp(0.5 - hidden[ids].sum() * 0.5)))
            f.write(f"{label} " + " ".join(f"{i}:1" for i in ids) + "\n")


ADULT_VOCAB = {
    "workclass": ["Self-emp-not-inc", "Private", "State-gov", "Federal-gov", "Local-gov", "?",
                  "Self-emp-inc", "Without-pay", "Never-worked"],
    "education": ["Bachelors", "HS-grad", "11th", "Masters", "9th", "Some-college",
                  "Assoc-acdm", "Assoc-voc", "7th-8th", "Doctorate", "Prof-school", "5th-6th",
                  "10th", "1st-4th", "Preschool", "12th"],
    "marital_status": ["Married-civ-spouse", "Divorced", "Never-married", "Widowed"],
    "occupation": [f"occupation-{k}" for k in range(14)],
    "relationship": ["Husband", "Not-in-family", "Wife", "Own-child", "Unmarried",
                     "Other-relative"],
    "race": ["White", "Black", "Other"],
    "gender": ["Female", "Male"],
    "native_country": [f"country-{k}" for k in range(40)],
}


def write_adult(folder: str, train: int = 20000, test: int = 5000, seed: int = 0) -> None:
    """``adult.data`` and ``adult.test`` (their presence stops wide_deep's download)."""
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    for name, rows in (("adult.data", train), ("adult.test", test)):
        with open(os.path.join(folder, name), "w") as f:
            for _ in range(rows):
                pick = {k: v[rng.integers(len(v))] for k, v in ADULT_VOCAB.items()}
                age, hours = int(rng.integers(17, 80)), int(rng.integers(10, 70))
                edu = ADULT_VOCAB["education"].index(pick["education"]) + 1
                score = 0.08 * (hours - 40) + 0.15 * (edu - 8) + (pick["gender"] == "Male") - 0.5
                label = ">50K" if rng.random() < 1 / (1 + np.exp(-score)) else "<=50K"
                f.write(", ".join(map(str, [
                    age, pick["workclass"], int(rng.integers(20000, 500000)), pick["education"],
                    edu, pick["marital_status"], pick["occupation"], pick["relationship"],
                    pick["race"], pick["gender"], int(rng.exponential(500)),
                    int(rng.exponential(80)), hours, pick["native_country"], label])) + "\n")
