"""Train a small convnet on scikit-learn's bundled 8x8 digits with raymod's Module API.

    python jobs/train_digits.py                  # 2 Ray workers on a local loopback cluster
    python jobs/train_digits.py --workers 0      # in this process
    python jobs/train_digits.py --workers 2:4 --address auto   # inside `ray submit`

The data ships inside scikit-learn, so the job runs offline. Module.fit logs the training
and validation accuracy and cross-entropy (the loss) of every epoch (a progress bar is drawn
when stderr is a terminal), one JSON line per epoch goes to ``--metrics`` (``--tensorboard``
and ``--mlflow`` record the run too), and the end writes a checkpoint in MXNet's
layout (``PREFIX-symbol.json``, ``PREFIX-%04d.params``, ``PREFIX-%04d.states``) and prints
``final validation accuracy 0.9xxx``. Exit status: 0; 1 if the run failed or ended below
``--min-accuracy``; 2 for bad flags.
"""
from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import numpy as np

import raymod as rm

try:  # run as a script (jobs/ is on sys.path) or as `python -m jobs.train_digits`
    import _common as common
except ImportError:  # pragma: no cover
    from . import _common as common

_LOG = logging.getLogger("train_digits")

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
        common.fail("train_digits needs scikit-learn for its bundled data: "
                    "pip install 'raymod[data]'")
    bunch = sk_load()
    x = (bunch.images / 16.0).astype(np.float32)[:, None]
    y = bunch.target.astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(x))
    cut = int(0.8 * len(x))
    return x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags; exits with status 2 and a one-line message when one is invalid."""
    parser = common.JobArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=common.positive_int, default=12,
                        help="epochs to train (default %(default)s)")
    parser.add_argument("--batch-size", type=common.positive_int, default=64,
                        help="global batch, cut into one slice per worker (default %(default)s)")
    parser.add_argument("--lr", type=common.positive_float, default=0.1,
                        help="SGD learning rate, momentum 0.9 (default %(default)s)")
    parser.add_argument("--seed", type=int, default=42,
                        help="seeds the split, initializer and shuffles (default %(default)s)")
    parser.add_argument("--min-accuracy", type=common.fraction, default=0.0,
                        help="exit with status 1 if the final validation accuracy is lower "
                             "(default %(default)s: off)")
    common.add_cluster_args(parser)
    common.add_output_args(parser, "digits")
    args = parser.parse_args(argv)
    args.workers = common.workers_from_args(parser, args)
    return args


def main(argv: list[str] | None = None) -> float:
    """Train, checkpoint and return the final validation accuracy."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    rm.random.seed(args.seed)
    x_train, y_train, x_val, y_val = load_digits(args.seed)
    train = rm.io.NDArrayIter(x_train, y_train, args.batch_size, shuffle=True)
    val = rm.io.NDArrayIter(x_val, y_val, args.batch_size)
    batches = -(-len(x_train) // args.batch_size)

    where = common.describe_workers(args.workers)
    _LOG.info("digits: %d train / %d validation samples, batch %d, %d epochs, %s",
              len(x_train), len(x_val), args.batch_size, args.epochs, where)
    if args.workers is None:
        common.limit_blas_threads(args.cpus_per_worker)
    connected_here = args.workers is not None and not rm.cluster.is_initialized()
    mod = rm.mod.Module(digits_convnet(), context=common.contexts_from_args(args),
                        workers=args.workers)
    metrics = common.EpochMetrics(args.metrics, args.batch_size,
                                  mode="a" if args.resume else "w", tensorboard=args.tensorboard,
                                  disp_batches=args.disp_batches)
    try:
        common.connect(args.workers, args.address)
        start = time.time()
        with common.progress_bar(batches) as bar:
            result = mod.fit(
                # cross-entropy beside accuracy: the loss that metrics, --tensorboard and
                # --mlflow show (as train_loss / val_loss, loss)
                metrics.timed(train), eval_data=val, eval_metric=["acc", "ce"],
                num_epoch=args.epochs, kvstore=common.kvstore_for(args.kvstore, args.workers),
                optimizer="sgd", optimizer_params={"learning_rate": args.lr, "momentum": 0.9},
                initializer=rm.init.Xavier(magnitude=2.0),
                batch_end_callback=[bar, metrics.batch_end],
                epoch_end_callback=[bar, metrics.epoch_end],
                eval_end_callback=metrics.eval_end, **common.fit_checkpointing(args))
        common.log_fit_result(result)
        accuracy = float(dict(mod.score(val, "acc"))["accuracy"])
        Path(args.checkpoint).parent.mkdir(parents=True, exist_ok=True)
        mod.save_checkpoint(args.checkpoint, args.epochs, save_optimizer_states=True)
        elapsed = time.time() - start
    except rm.MXNetError as err:  # e.g. WorkersUnavailable: the cluster is too small
        _LOG.debug("failed", exc_info=True)
        common.fit_failed(err)
    finally:
        metrics.close()
        mod.close()  # stops the worker actors
        if connected_here:  # sooner than Ray's exit hook, which took seconds longer
            rm.cluster.shutdown()
    _LOG.info("fit, score and checkpoint took %.1f s; checkpoint %s-%04d.params, metrics %s",
              elapsed, args.checkpoint, args.epochs, args.metrics)
    print(f"final validation accuracy {accuracy:.4f}", flush=True)
    if accuracy < args.min_accuracy:
        common.fail(f"final validation accuracy {accuracy:.4f} is below --min-accuracy "
                    f"{args.min_accuracy}")
    return accuracy


if __name__ == "__main__":
    main()
