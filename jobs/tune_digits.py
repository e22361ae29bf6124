"""Search the digits convnet's learning rate, batch size and workers per trial with Ray Tune.

    python jobs/tune_digits.py --trials 4                # on a loopback-only local cluster
    python jobs/tune_digits.py --trials 8 --workers 1,2,4 --address auto   # inside ray submit

Each trial is a ``Module.fit`` of ``train_digits``' network on its own worker actors
(``rm.tune.fit_trainable``), reporting every epoch's training and validation accuracy to Tune
with a checkpoint of the parameters; each trial's placement group holds its workers, so Tune
runs only as many trials at once as the cluster's CPUs allow. The learning rate is drawn
log-uniformly from ``--lr-range``, the batch size and workers per trial from their lists.
Prints the best trial (configuration, validation accuracy, checkpoint folder). Exit status:
0; 1 if no trial finished; 2 for bad flags.
"""
from __future__ import annotations

import argparse
import logging
import math
import os
from pathlib import Path

import raymod as rm

try:  # run as a script (jobs/ is on sys.path) or as `python -m jobs.tune_digits`
    import _common as common
    import train_digits
except ImportError:  # pragma: no cover
    from . import _common as common
    from . import train_digits

_LOG = logging.getLogger("tune_digits")


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError(f"expected at least one value, got {text!r}")
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags; exits with status 2 and a one-line message when one is invalid."""
    parser = common.JobArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=common.positive_int, default=4,
                        help="trials to run (default %(default)s)")
    parser.add_argument("--epochs", type=common.positive_int, default=3,
                        help="epochs per trial (default %(default)s)")
    parser.add_argument("--lr-range", type=float, nargs=2, default=(0.01, 0.5),
                        metavar=("LOW", "HIGH"),
                        help="learning-rate range, sampled log-uniformly (default 0.01 0.5)")
    parser.add_argument("--batch-sizes", type=_int_list, default=[32, 64], metavar="B1,B2",
                        help="batch sizes to choose from (default 32,64)")
    parser.add_argument("--workers", type=_int_list, default=[1, 2], metavar="N1,N2",
                        help="worker actors per trial to choose from; 0 trains in the "
                             "trial's process (default 1,2)")
    parser.add_argument("--cpus-per-worker", type=common.positive_float, default=1.0,
                        metavar="N", help="Ray CPUs per worker actor (default %(default)g)")
    parser.add_argument("--seed", type=int, default=42,
                        help="seeds the search, the split and each trial (default %(default)s)")
    parser.add_argument("--storage", default="runs/tune_digits", metavar="PATH",
                        type=common.output_folder,  # checked before Ray or Tune start
                        help="Tune's results and checkpoints (default %(default)s)")
    parser.add_argument("--address", default=os.environ.get("RAY_ADDRESS") or None,
                        help="Ray cluster to join ('auto' inside ray submit); default: start "
                             "a loopback-only local cluster")
    args = parser.parse_args(argv)
    low, high = args.lr_range
    if not (math.isfinite(low) and math.isfinite(high) and 0 < low <= high):
        parser.error(f"argument --lr-range: need 0 < LOW <= HIGH, got {low:g} {high:g}")
    if any(b < 1 for b in args.batch_sizes):
        parser.error(f"argument --batch-sizes: sizes must be >= 1, got {args.batch_sizes}")
    if any(w < 0 for w in args.workers):
        parser.error(f"argument --workers: counts must be >= 0, got {args.workers}")
    small = [(b, w) for b in args.batch_sizes for w in args.workers if b < w]
    if small:
        parser.error(f"argument --batch-sizes: batch {small[0][0]} is smaller than the "
                     f"{small[0][1]} slices of a {small[0][1]}-worker trial")
    return args


def digits_trainable(epochs: int, cpus_per_worker: float, seed: int):
    """The Tune trainable: train_digits' network and data, hyperparameters from the config."""
    def module(config: dict, workers):
        return rm.mod.Module(train_digits.digits_convnet(), workers=workers)

    def data(config: dict):
        rm.random.seed(seed)
        x_train, y_train, x_val, y_val = train_digits.load_digits(seed)
        batch = int(config["batch_size"])
        return (rm.io.NDArrayIter(x_train, y_train, batch, shuffle=True),
                rm.io.NDArrayIter(x_val, y_val, batch))

    def fit_kwargs(config: dict) -> dict:
        return {"optimizer": "sgd", "initializer": rm.init.Xavier(magnitude=2.0),
                "optimizer_params": {"learning_rate": float(config["lr"]), "momentum": 0.9},
                "kvstore": "dist_sync" if config["workers"] else "local"}

    return rm.tune.fit_trainable(module, data, num_epoch=epochs, fit_kwargs=fit_kwargs,
                                 workers="workers", cpus_per_worker=cpus_per_worker)


def main(argv: list[str] | None = None):
    """Run the search; print and return the best result."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        from ray import tune
    except ImportError:
        common.fail("tune_digits needs Ray Tune: pip install 'raymod[tune]'")
    need = math.ceil(max(args.workers) * args.cpus_per_worker) or 1
    connected_here = not rm.cluster.is_initialized()
    try:
        info = rm.cluster.init(address=args.address, num_cpus=None if args.address
                               else max(os.cpu_count() or 1, need))
    except Exception as err:  # noqa: BLE001 - Ray's start-up errors have no common base
        common.fail(f"cannot start or join the Ray cluster: {' '.join(str(err).split())}")
    if info["resources"].get("CPU", 0) < need:
        common.fail(f"a {max(args.workers)}-worker trial needs {need} CPUs; the cluster has "
                    f"{info['resources'].get('CPU', 0):g}")
    space = {"lr": tune.loguniform(*args.lr_range), "batch_size": tune.choice(args.batch_sizes),
             "workers": tune.choice(args.workers)}
    tuner = tune.Tuner(
        digits_trainable(args.epochs, args.cpus_per_worker, args.seed), param_space=space,
        tune_config=tune.TuneConfig(num_samples=args.trials, metric="val_accuracy",
                                    mode="max",
                                    search_alg=tune.search.BasicVariantGenerator(
                                        random_state=args.seed)),
        run_config=tune.RunConfig(name="tune_digits",
                                  storage_path=str(Path(args.storage).resolve()),
                                  verbose=1))
    try:
        results = tuner.fit()
        ok = [r for r in results if r.error is None and r.metrics]
        if not ok:
            common.fail(f"no trial finished: {results.errors[0] if results.errors else '?'}")
        best = results.get_best_result()
    finally:
        if connected_here:
            rm.cluster.shutdown()
    cfg = best.config
    print(f"best trial: lr={cfg['lr']:.4g} batch_size={cfg['batch_size']} "
          f"workers={cfg['workers']} val_accuracy={best.metrics['val_accuracy']:.4f} "
          f"(epoch {best.metrics['epoch']}), checkpoint {best.checkpoint.path}", flush=True)
    return best


if __name__ == "__main__":
    main()
