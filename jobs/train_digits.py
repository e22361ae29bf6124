"""Train a small convnet on scikit-learn's bundled 8x8 digits with raymod's Module API.

    python jobs/train_digits.py [--epochs 10] [--batch-size 32] [--out out/digits]

The data ships inside scikit-learn, so the job runs offline. It prints a progress bar per
epoch, the validation accuracy after every epoch, and writes a final checkpoint in MXNet's
layout (``<out>-symbol.json``, ``<out>-%04d.params``, ``<out>-%04d.states``).
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import numpy as np

import raymod as rm


def digits_convnet() -> rm.sym.Symbol:
    """conv(16, 3x3, pad 1) - relu - maxpool 2 - fc 64 - relu - fc 10 - softmax."""
    data = rm.sym.Variable("data")
    net = rm.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=16, name="conv1")
    net = rm.sym.Activation(net, act_type="relu", name="relu1")
    net = rm.sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2), name="pool1")
    net = rm.sym.Flatten(net)
    net = rm.sym.Activation(rm.sym.FullyConnected(net, num_hidden=64, name="fc1"),
                            act_type="relu", name="relu2")
    net = rm.sym.FullyConnected(net, num_hidden=10, name="fc2")
    return rm.sym.SoftmaxOutput(net, name="softmax")


def load_digits(seed: int) -> tuple[np.ndarray, ...]:
    """The 1,797 digits as (N, 1, 8, 8) float32 in [0, 1], split 80/20 with a fixed seed."""
    try:
        from sklearn.datasets import load_digits as sk_load
    except ImportError:
        sys.exit("train_digits needs scikit-learn for its bundled data: pip install 'raymod[data]'")
    bunch = sk_load()
    x = (bunch.images / 16.0).astype(np.float32)[:, None]
    y = bunch.target.astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(x))
    cut = int(0.8 * len(x))
    return x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", default="out/digits", help="checkpoint prefix")
    args = parser.parse_args(argv)
    for name in ("epochs", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    return args


def main(argv=None) -> float:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    rm.random.seed(args.seed)
    x_train, y_train, x_val, y_val = load_digits(args.seed)
    train = rm.io.NDArrayIter(x_train, y_train, args.batch_size, shuffle=True)
    val = rm.io.NDArrayIter(x_val, y_val, args.batch_size)
    mod = rm.mod.Module(digits_convnet(), context=rm.cpu())
    mod.fit(train, eval_data=val, eval_metric="acc", num_epoch=args.epochs,
            optimizer="sgd", optimizer_params={"learning_rate": args.lr, "momentum": 0.9},
            initializer=rm.init.Xavier(magnitude=2.0),
            batch_end_callback=rm.callback.TqdmProgress())
    accuracy = dict(mod.score(val, "acc"))["accuracy"]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    mod.save_checkpoint(args.out, args.epochs, save_optimizer_states=True)
    print(f"validation accuracy {accuracy:.4f}; checkpoint {args.out}-{args.epochs:04d}.params")
    return accuracy


if __name__ == "__main__":
    main()
