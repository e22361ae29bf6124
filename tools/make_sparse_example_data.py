"""Generated data in the formats and widths of MXNet's ``example/sparse`` programs.

    python tools/make_sparse_example_data.py avazu DIR --rows 200000
    python tools/make_sparse_example_data.py criteo DIR --rows 100000
    python tools/make_sparse_example_data.py census DIR --rows 30000
    python tools/make_sparse_example_data.py movielens DIR --rows 100000

``avazu``: LibSVM lines ``label id:1 ...`` at Avazu's width (1,000,001 features, 0-based),
about 15 ids per line drawn from a long-tailed (Zipf) distribution, labels drawn from a
logistic model over a hidden weight per id, so a linear model can learn something: written to
``DIR/avazu-app`` and (a fifth as many lines) ``DIR/avazu-app.t``, the names
linear_classification/train.py reads. ``criteo``: the same at the factorization machine's
default width (1,000,000), as ``DIR/criteo.train`` and ``DIR/criteo.test``. ``census``: UCI
Adult's CSV columns (``adult.data``, ``adult.test``) with values from wide_deep's
vocabularies and an income label that depends on them. ``movielens``: ``user::item::rating::time`` lines,
MovieLens 10M's ids (71,569 users, 65,135 items) and a low-rank hidden preference, as
``DIR/ml-10M100K/r1.train`` and ``r1.test``. Deterministic for a given ``--seed``.
"""
from __future__ import annotations

import argparse
import os

import numpy as np

AVAZU_FEATURES = 1_000_001
CRITEO_FEATURES = 1_000_000
CENSUS_VOCAB = {
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
ML_USERS, ML_ITEMS = 71_569, 65_135


def avazu_lines(rows: int, rng: np.random.Generator, nnz: int = 15,
                width: int = AVAZU_FEATURES) -> list[str]:
    hidden = rng.standard_normal(width).astype(np.float32)
    counts = rng.integers(nnz - 5, nnz + 6, rows)
    lines = []
    for count in counts:
        ids = np.unique(np.minimum(rng.zipf(1.1, count), width) - 1)
        logit = hidden[ids].sum() * 0.5 - 0.5
        label = int(rng.random() < 1 / (1 + np.exp(-logit)))
        lines.append(f"{label} " + " ".join(f"{i}:1" for i in ids))
    return lines


def movielens_lines(rows: int, rng: np.random.Generator, rank: int = 4) -> list[str]:
    users = rng.standard_normal((ML_USERS, rank)).astype(np.float32)
    items = rng.standard_normal((ML_ITEMS, rank)).astype(np.float32)
    u = rng.integers(1, ML_USERS, rows)
    i = rng.integers(1, ML_ITEMS, rows)
    score = np.clip(np.round(3 + (users[u] * items[i]).sum(axis=1) / 2), 1, 5)
    return [f"{a}::{b}::{s:g}::0" for a, b, s in zip(u, i, score)]


def census_lines(rows: int, rng: np.random.Generator) -> list[str]:
    """Rows of UCI Adult's 15 columns; the label leans on education, hours and gender."""
    lines = []
    for _ in range(rows):
        pick = {k: v[rng.integers(len(v))] for k, v in CENSUS_VOCAB.items()}
        age, hours = int(rng.integers(17, 80)), int(rng.integers(10, 70))
        edu_num = CENSUS_VOCAB["education"].index(pick["education"]) + 1
        gain, loss = int(rng.exponential(500)), int(rng.exponential(80))
        score = 0.08 * (hours - 40) + 0.15 * (edu_num - 8) + (pick["gender"] == "Male") - 0.5
        label = ">50K" if rng.random() < 1 / (1 + np.exp(-score)) else "<=50K"
        lines.append(", ".join(map(str, [
            age, pick["workclass"], int(rng.integers(20000, 500000)), pick["education"], edu_num,
            pick["marital_status"], pick["occupation"], pick["relationship"], pick["race"],
            pick["gender"], gain, loss, hours, pick["native_country"], label])))
    return lines


def write(path: str, lines: list[str]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} lines to {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kind", choices=["avazu", "criteo", "census", "movielens"])
    parser.add_argument("folder")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.kind == "avazu":
        write(os.path.join(args.folder, "avazu-app"), avazu_lines(args.rows, rng))
        write(os.path.join(args.folder, "avazu-app.t"), avazu_lines(args.rows // 5, rng))
    elif args.kind == "criteo":
        for name, rows in (("criteo.train", args.rows), ("criteo.test", args.rows // 5)):
            write(os.path.join(args.folder, name),
                  avazu_lines(rows, rng, nnz=39, width=CRITEO_FEATURES))
    elif args.kind == "census":
        write(os.path.join(args.folder, "adult.data"), census_lines(args.rows, rng))
        write(os.path.join(args.folder, "adult.test"), census_lines(args.rows // 2, rng))
    else:
        base = os.path.join(args.folder, "ml-10M100K")
        write(os.path.join(base, "r1.train"), movielens_lines(args.rows, rng))
        write(os.path.join(base, "r1.test"), movielens_lines(args.rows // 5, rng))


if __name__ == "__main__":
    main()
