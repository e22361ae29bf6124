"""Linear regression with SVRG (rm.mod.SVRGModule) against plain SGD at the same learning rate.

    python jobs/train_svrg_regression.py                        # noisy least squares, 2 workers
    python jobs/train_svrg_regression.py --dataset diabetes     # scikit-learn's diabetes data
    python jobs/train_svrg_regression.py --workers 0            # in this process

Two problems, both offline:

- ``noisy`` (default): ``y = X w* + 0.4 * noise`` with 20,000 x 90 correlated Gaussian
  features (pairwise correlations around 0.1, Hessian eigenvalues from ~0.3 to ~10);
- ``diabetes``: scikit-learn's bundled diabetes data (442 x 10), features and target
  standardised.

The same network (one FullyConnected unit and a LinearRegressionOutput) is trained twice from
the same initial weights with the same shuffles: by ``rm.mod.Module`` with SGD, and by
``rm.mod.SVRGModule``, whose steps are SGD steps along ``g_b(w) - g_b(w~) + mu`` with a
full-gradient snapshot every ``--update-freq`` epochs. Plain SGD at a constant learning rate
stalls at a noise floor set by the variance of its batch gradients; SVRG's correction removes
that variance, so it keeps converging linearly. The loss is the excess training MSE over the
least-squares optimum (``MSE(w) - MSE(w_ls)``, exact: ``||X (w - w_ls)||^2 / n``), computed
after every epoch; a JSON line per method and epoch goes to ``--metrics`` and a PNG with both
curves (log scale) next to it when matplotlib is installed. The end writes a checkpoint of
each module (``PREFIX-*`` for SVRG, ``PREFIX_sgd-*`` for SGD) and prints one line with both
final losses and their ratio. Exit status: 0; 1 if the run failed or SGD's final loss is less
than ``--min-ratio`` times SVRG's; 2 for bad flags.
"""
from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

import numpy as np

import raymod as rm

try:  # run as a script (jobs/ is on sys.path) or as `python -m jobs.train_svrg_regression`
    import _common as common
except ImportError:  # pragma: no cover
    from . import _common as common

_LOG = logging.getLogger("train_svrg_regression")

LABEL = "lin_reg_label"

#: per dataset: the defaults of --epochs, --batch-size, --lr and --update-freq
PRESETS = {
    "noisy": {"epochs": 10, "batch_size": 100, "lr": 0.025, "update_freq": 2},
    "diabetes": {"epochs": 30, "batch_size": 16, "lr": 0.15, "update_freq": 2},
}


# ---- data -----------------------------------------------------------------------------------
def noisy_least_squares(rows: int, cols: int, noise: float = 0.4,
                        seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``y = X w* + noise * e`` with correlated columns ``X = Z L``.

    ``L^T L = Q diag(eig) Q^T + 0.1 * 11^T`` (random rotation ``Q``, ``eig`` from 0.3 to
    1.5, plus a factor shared by all columns), so pairwise correlations are around 0.1 and
    the Hessian's eigenvalues run from ~0.3 to ~10 (for 90 columns): a learning rate of
    0.025 is stable for SGD.
    """
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((cols, cols)))
    cov = (q * np.geomspace(0.3, 1.5, cols)) @ q.T + 0.1 * np.ones((cols, cols))
    x = (rng.standard_normal((rows, cols)) @ np.linalg.cholesky(cov).T).astype(np.float32)
    y = (x @ rng.standard_normal(cols) + noise * rng.standard_normal(rows)).astype(np.float32)
    return x, y


def diabetes() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's diabetes data, each feature and the target standardised."""
    try:
        from sklearn.datasets import load_diabetes
    except ImportError:
        common.fail("--dataset diabetes needs scikit-learn for its bundled data: "
                    "pip install 'raymod[data]'")
    bunch = load_diabetes(scaled=False)
    x = np.asarray(bunch.data, np.float64)
    y = np.asarray(bunch.target, np.float64)
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    y = (y - y.mean()) / y.std()
    return x.astype(np.float32), y.astype(np.float32)


class ExcessMSE:
    """The training MSE at given weights, and its excess over the least-squares optimum."""

    def __init__(self, x: np.ndarray, y: np.ndarray):
        self.x1 = np.hstack([x.astype(np.float64), np.ones((len(x), 1))])  # bias column
        self.y = y.astype(np.float64)
        # on the normal equations: the same optimum as lstsq on X, and far faster
        gram = self.x1.T @ self.x1
        self.best = np.linalg.lstsq(gram, self.x1.T @ self.y, rcond=None)[0]
        self.best_mse = self.mse(self.best)

    def weights(self, arg_params: dict) -> np.ndarray:
        """``[fc_weight..., fc_bias]`` as one float64 vector."""
        return np.concatenate([np.asarray(arg_params["fc_weight"]).ravel(),
                               np.asarray(arg_params["fc_bias"]).ravel()]).astype(np.float64)

    def mse(self, w: np.ndarray) -> float:
        r = self.x1 @ w - self.y
        return float(r @ r) / len(r)

    def excess(self, w: np.ndarray) -> float:
        """``MSE(w) - MSE(w_ls) = ||X (w - w_ls)||^2 / n`` (no cancellation)."""
        d = self.x1 @ (w - self.best)
        return float(d @ d) / len(d)


def linear_regression() -> rm.sym.Symbol:
    """``fc`` (one unit) into a LinearRegressionOutput on ``lin_reg_label``."""
    fc = rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=1, name="fc")
    return rm.sym.LinearRegressionOutput(fc, rm.sym.Variable(LABEL), name="lro")


# ---- flags ----------------------------------------------------------------------------------
def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (np.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags; exits with status 2 and a one-line message when one is invalid."""
    parser = common.JobArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=sorted(PRESETS), default="noisy",
                        help="noisy least squares or scikit-learn's diabetes data "
                             "(default %(default)s)")
    preset = ", ".join(f"{name}: {p['epochs']}" for name, p in PRESETS.items())
    parser.add_argument("--epochs", type=common.positive_int, default=None,
                        help=f"epochs to train (default {preset})")
    parser.add_argument("--batch-size", type=common.positive_int, default=None,
                        help="global batch, cut into one slice per worker (default " +
                             ", ".join(f"{n}: {p['batch_size']}" for n, p in PRESETS.items())
                             + ")")
    parser.add_argument("--lr", type=common.positive_float, default=None,
                        help="learning rate of both methods, no momentum (default " +
                             ", ".join(f"{n}: {p['lr']}" for n, p in PRESETS.items()) + ")")
    parser.add_argument("--update-freq", type=common.positive_int, default=None,
                        help="SVRG: a full-gradient snapshot every N epochs (default 2)")
    parser.add_argument("--seed", type=int, default=42,
                        help="seeds the initializer and shuffles (default %(default)s)")
    parser.add_argument("--rows", type=common.positive_int, default=20000,
                        help="noisy: number of samples (default %(default)s)")
    parser.add_argument("--cols", type=common.positive_int, default=90,
                        help="noisy: number of features (default %(default)s)")
    parser.add_argument("--min-ratio", type=_non_negative_float, default=0.0,
                        help="exit with status 1 unless SGD's final excess MSE is at least "
                             "this many times SVRG's (default %(default)s: off)")
    common.add_cluster_args(parser)
    common.add_output_args(parser, "svrg")
    common.add_plot_arg(parser)
    args = parser.parse_args(argv)
    for key, value in PRESETS[args.dataset].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.workers = common.workers_from_args(parser, args)
    if args.dataset == "noisy" and args.rows < args.batch_size:
        parser.error(f"argument --rows: {args.rows} rows do not fill one batch of "
                     f"{args.batch_size}")
    return args


# ---- training -------------------------------------------------------------------------------
def train(method: str, args: argparse.Namespace, x: np.ndarray, y: np.ndarray,
          loss: ExcessMSE) -> tuple[rm.mod.Module, list[dict]]:
    """Fit one method from the seed's initial weights; returns the module and its records."""
    rm.random.seed(args.seed)  # the same initial weights and shuffles for both methods
    data = rm.io.NDArrayIter(x, y, args.batch_size, shuffle=True, label_name=LABEL)
    batches = -(-len(x) // args.batch_size)
    if method == "svrg":
        mod = rm.mod.SVRGModule(linear_regression(), label_names=[LABEL],
                                context=common.contexts_from_args(args),
                                update_freq=args.update_freq, workers=args.workers)
    else:
        mod = rm.mod.Module(linear_regression(), label_names=[LABEL],
                            context=common.contexts_from_args(args), workers=args.workers)
    metrics = common.EpochMetrics(args.metrics, args.batch_size, has_validation=False,
                                  mode="w" if method == "sgd" and not args.resume else "a",
                                  fields={"method": method, "dataset": args.dataset},
                                  tensorboard=args.tensorboard and os.path.join(args.tensorboard,
                                                                                method),
                                  disp_batches=args.disp_batches)

    def note_loss(_epoch, _symbol, arg_params, _aux_params):
        w = loss.weights(arg_params)
        metrics.note(mse=loss.mse(w), excess_mse=loss.excess(w))

    try:
        with common.progress_bar(batches) as bar:
            result = mod.fit(
                metrics.timed(data), eval_metric="mse", num_epoch=args.epochs,
                kvstore=common.kvstore_for(args.kvstore, args.workers), optimizer="sgd",
                optimizer_params={"learning_rate": args.lr},
                initializer=rm.init.Uniform(0.01),
                batch_end_callback=[bar, metrics.batch_end],
                epoch_end_callback=[bar, note_loss, metrics.epoch_end],
                **common.fit_checkpointing(args, method))
        common.log_fit_result(result)
        prefix = args.checkpoint if method == "svrg" else f"{args.checkpoint}_sgd"
        Path(prefix).parent.mkdir(parents=True, exist_ok=True)
        mod.save_checkpoint(prefix, args.epochs, save_optimizer_states=True)
        records = metrics.records
        if not records:  # resumed after the last epoch: nothing trained here
            w = loss.weights(mod.get_params()[0])
            records = [{"epoch": args.epochs - 1, "mse": loss.mse(w),
                        "excess_mse": loss.excess(w)}]
    finally:
        metrics.close()
        mod.close()  # stops the worker actors
    return mod, records


def main(argv: list[str] | None = None) -> float:
    """Train both methods, checkpoint and return SGD's final excess MSE over SVRG's."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.dataset == "noisy":
        x, y = noisy_least_squares(args.rows, args.cols)
    else:
        x, y = diabetes()
    loss = ExcessMSE(x, y)
    where = common.describe_workers(args.workers)
    _LOG.info("%s: %d x %d, least-squares MSE %.6g; batch %d, lr %g, %d epochs, SVRG "
              "update_freq %d, %s", args.dataset, x.shape[0], x.shape[1], loss.best_mse,
              args.batch_size, args.lr, args.epochs, args.update_freq, where)
    if args.workers is None:
        common.limit_blas_threads(args.cpus_per_worker)
    connected_here = args.workers is not None and not rm.cluster.is_initialized()
    records: dict[str, list[dict]] = {}
    try:
        common.connect(args.workers, args.address)
        for method in ("sgd", "svrg"):
            tic = time.time()
            _LOG.info("training with %s", method.upper())
            _, records[method] = train(method, args, x, y, loss)
            _LOG.info("%s: final excess MSE %.4g, training MSE %.6g, %.1f s", method.upper(),
                      records[method][-1]["excess_mse"], records[method][-1]["mse"],
                      time.time() - tic)
    except rm.MXNetError as err:  # e.g. WorkersUnavailable: the cluster is too small
        _LOG.debug("failed", exc_info=True)
        common.fit_failed(err)
    finally:
        if connected_here:  # sooner than Ray's exit hook
            rm.cluster.shutdown()
    common.save_curves_png(
        common.plot_path(args),
        {method.upper(): ([r["epoch"] + 1 for r in recs], [r["excess_mse"] for r in recs])
         for method, recs in records.items()},
        title=f"{args.dataset}: lr {args.lr:g}, batch {args.batch_size} ({where})",
        ylabel="excess training MSE over least squares", xlabel="epochs trained",
        log_y=True)
    sgd, svrg = records["sgd"][-1]["excess_mse"], records["svrg"][-1]["excess_mse"]
    ratio = sgd / svrg if svrg > 0 else float("inf")
    print(f"final excess MSE: SVRG {svrg:.4g}, SGD {sgd:.4g}, SGD/SVRG ratio {ratio:.4g}",
          flush=True)
    if ratio < args.min_ratio:
        common.fail(f"SGD/SVRG ratio {ratio:.4g} is below --min-ratio {args.min_ratio:g}")
    return ratio


if __name__ == "__main__":
    main()
