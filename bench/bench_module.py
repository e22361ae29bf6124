"""Module.fit throughput in process (workers=None) against MXNet 1.9.1, side by side.

The three DESIGN.md workloads, on the same synthetic data (same seeds and generators as
bench/mxnet_reference.py) and timed the same way (one warm-up epoch, then epochs timed by
``epoch_end_callback``; for the LSTM, every batch after the first of its bucket):

  mlp    MLP 784-128-64-10, batch 100, SGD lr 0.1, 60k rows            samples/s   target >= 1.5x
  lenet  conv20-tanh-pool-conv50-tanh-pool-fc500-tanh-fc10, batch 64    samples/s   target >= 1.0x
  lstm   BucketingModule LM: embed 200, 2x LSTMCell(200), vocab 10,000,
         buckets 10/20/30/40, batch 32, SGD lr 0.01                      sentences/s target >= 1.0x

Each repeat runs MXNet (bench/mxnet_reference.py under ``--mxnet-python``, in a subprocess)
and then raymod on the same workload, so a load change on a shared machine hits both; the
ratio quoted is the median of the per-repeat ratios. The LSTM's batches come in a random
bucket order, so its rate is also given "mix-weighted": per-bucket median ms/batch weighted by
the data set's batches per bucket (identical for both), which does not depend on which
buckets happened to be timed.

    OMP_NUM_THREADS=2 python bench/bench_module.py [--only mlp,lenet,lstm] [--repeats 3]
        [--mxnet-python /tmp/mxvenv/bin/python] [--quick] [--profile]

Prints one JSON object per measurement and per workload, then a table. ``--profile`` runs
each raymod workload once more under cProfile and prints where the time goes.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import logging
import os
import pstats
import statistics
import subprocess
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")
import numpy as np  # noqa: E402

import raymod as rm  # noqa: E402
from records import emit  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_MXNET = "/tmp/mxvenv/bin/python"
TARGETS = {"mlp": 1.5, "lenet": 1.0, "lstm": 1.0}
LSTM = dict(vocab=10000, embed=200, hidden=200, layers=2, batch=32, buckets=[10, 20, 30, 40])


# ---------------------------------------------------------------- networks (as MXNet's)
def mlp_symbol():
    x = rm.sym.Variable("data")
    x = rm.sym.Activation(rm.sym.FullyConnected(x, num_hidden=128, name="fc1"), act_type="relu")
    x = rm.sym.Activation(rm.sym.FullyConnected(x, num_hidden=64, name="fc2"), act_type="relu")
    x = rm.sym.FullyConnected(x, num_hidden=10, name="fc3")
    return rm.sym.SoftmaxOutput(x, name="softmax")


def lenet_symbol():
    x = rm.sym.Variable("data")
    for i, filters in enumerate((20, 50)):
        x = rm.sym.Convolution(x, kernel=(5, 5), num_filter=filters, name=f"conv{i + 1}")
        x = rm.sym.Activation(x, act_type="tanh")
        x = rm.sym.Pooling(x, pool_type="max", kernel=(2, 2), stride=(2, 2))
    x = rm.sym.Flatten(x)
    x = rm.sym.Activation(rm.sym.FullyConnected(x, num_hidden=500, name="fc1"), act_type="tanh")
    x = rm.sym.FullyConnected(x, num_hidden=10, name="fc2")
    return rm.sym.SoftmaxOutput(x, name="softmax")


def lstm_sym_gen(seq_len):
    data = rm.sym.Variable("data")
    label = rm.sym.Variable("softmax_label")
    embed = rm.sym.Embedding(data=data, input_dim=LSTM["vocab"], output_dim=LSTM["embed"],
                             name="embed")
    stack = rm.rnn.SequentialRNNCell()
    for i in range(LSTM["layers"]):
        stack.add(rm.rnn.LSTMCell(num_hidden=LSTM["hidden"], prefix=f"lstm_l{i}_"))
    stack.reset()
    outputs, _ = stack.unroll(seq_len, inputs=embed, merge_outputs=True)
    pred = rm.sym.Reshape(outputs, shape=(-1, LSTM["hidden"]))
    pred = rm.sym.FullyConnected(data=pred, num_hidden=LSTM["vocab"], name="pred")
    label = rm.sym.Reshape(label, shape=(-1,))
    pred = rm.sym.SoftmaxOutput(data=pred, label=label, name="softmax")
    return pred, ("data",), ("softmax_label",)


# ---------------------------------------------------------------- data (as mxnet_reference.py)
def mlp_data(rows):
    rng = np.random.RandomState(0)
    X = rng.rand(rows, 784).astype(np.float32)
    return X, rng.randint(0, 10, rows).astype(np.float32)


def lenet_data(rows):
    rng = np.random.RandomState(1)
    X = rng.rand(rows, 1, 28, 28).astype(np.float32)
    return X, rng.randint(0, 10, rows).astype(np.float32)


def lstm_sentences(timed_batches):
    """The sentences mxnet_reference.py's bench_lstm draws for ``--lstm-batches``."""
    rng = np.random.RandomState(2)
    n_batches = timed_batches + 2 * len(LSTM["buckets"])
    sentences = []
    while len(sentences) < n_batches * LSTM["batch"] * 1.2:
        ln = int(rng.randint(2, 41))
        sentences.append(list(rng.randint(1, LSTM["vocab"], ln)))
    return sentences


# ---------------------------------------------------------------- raymod runs
def raymod_classifier(symbol, X, y, batch, lr, epochs, context=None):
    """Module.fit on ``context`` (default cpu): 1 warm-up + ``epochs`` timed epochs; returns
    samples/s (median epoch)."""
    it = rm.io.NDArrayIter(X, y, batch_size=batch, shuffle=False, label_name="softmax_label")
    mod = rm.mod.Module(symbol, context=context or rm.cpu())
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    mod.init_params(initializer=rm.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": lr})
    stamps = []
    t0 = time.perf_counter()
    mod.fit(it, num_epoch=1 + epochs, eval_metric="acc",
            epoch_end_callback=lambda *a: stamps.append(time.perf_counter()))
    ends = [t0] + stamps
    secs = [b - a for a, b in zip(ends[:-1], ends[1:])]
    rows = (len(X) // batch) * batch
    return {"value": rows / statistics.median(secs[1:]),
            "epoch_seconds": [round(s, 4) for s in secs[1:]],
            "warmup_epoch_seconds": round(secs[0], 4), "rows": rows}


class _Stop(Exception):
    pass


def raymod_lstm(sentences, timed_batches, time_cap, context=None):
    """BucketingModule.fit on ``context`` (default cpu), timing every batch but the first of
    each bucket (its bind)."""
    batch, buckets = LSTM["batch"], LSTM["buckets"]
    train = rm.rnn.BucketSentenceIter(sentences, batch, buckets=buckets, invalid_label=0)
    dataset = {str(b): len(d) // batch for b, d in zip(train.buckets, train.data)}
    mod = rm.mod.BucketingModule(lstm_sym_gen, default_bucket_key=train.default_bucket_key,
                                 context=context or rm.cpu())
    seen, times, keys = set(), [], []
    state = {"t": None}

    def on_batch_end(param):
        now = time.perf_counter()
        key = param.locals["data_batch"].bucket_key
        if key in seen:
            times.append(now - state["t"])
            keys.append(key)
        seen.add(key)
        state["t"] = now
        if len(times) >= timed_batches or sum(times) > time_cap:
            raise _Stop()

    mod.bind(data_shapes=train.provide_data, label_shapes=train.provide_label)
    mod.init_params(initializer=rm.init.Xavier(factor_type="in", magnitude=2.34))
    mod.init_optimizer(optimizer="sgd",
                       optimizer_params={"learning_rate": 0.01, "momentum": 0.0, "wd": 0.00001})
    state["t"] = time.perf_counter()
    try:
        mod.fit(train, eval_metric=rm.metric.Perplexity(0), num_epoch=1,
                batch_end_callback=on_batch_end)
    except _Stop:
        pass
    by_bucket = {}
    for k, t in zip(keys, times):
        by_bucket.setdefault(str(k), []).append(t)
    total = sum(times)
    return {"value": len(times) * batch / total, "timed_batches": len(times),
            "seconds": round(total, 3),
            "ms_per_batch_by_bucket": {k: round(1e3 * statistics.median(v), 2)
                                       for k, v in sorted(by_bucket.items())},
            "batches_per_bucket": {k: len(v) for k, v in sorted(by_bucket.items())},
            "dataset_batches_per_bucket": dataset}


def mix_weighted(ms_by_bucket: dict, dataset: dict, batch: int, keys=None) -> float:
    """Sentences/s of one pass over the data set, from per-bucket median ms per batch."""
    keys = [k for k in (keys or ms_by_bucket) if k in ms_by_bucket and k in dataset]
    seconds = sum(dataset[k] * ms_by_bucket[k] / 1e3 for k in keys)
    return batch * sum(dataset[k] for k in keys) / seconds


# ---------------------------------------------------------------- MXNet runs (subprocess)
def mxnet_run(python, name, cfg, env):
    cmd = [python, str(HERE / "mxnet_reference.py"), "--only", name, "--no-step",
           "--threads", os.environ["OMP_NUM_THREADS"]]
    if name == "mlp":
        cmd += ["--mlp-rows", str(cfg["rows"]), "--fit-epochs", str(cfg["epochs"])]
    elif name == "lenet":
        cmd += ["--lenet-rows", str(cfg["rows"]), "--fit-epochs", str(cfg["epochs"])]
    else:
        cmd += ["--lstm-batches", str(cfg["batches"]), "--lstm-time-cap", str(cfg["time_cap"])]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError(f"mxnet_reference.py failed:\n{out.stderr[-3000:]}")
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            if rec.get("metric") in ("fit_samples_per_s", "fit_sentences_per_s"):
                return rec
    raise RuntimeError(f"no fit figure from mxnet_reference.py:\n{out.stdout[-2000:]}")


# ---------------------------------------------------------------- machine check
def blas_check(reps: int = 200) -> dict:
    """ms per (100x784) @ (784x128) float32 GEMM, the MLP's first layer, with the process's
    BLAS threads and with one (threadpoolctl, when installed): a busy core makes a
    multi-threaded BLAS wait for its descheduled helper thread, which this shows at once."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((100, 784), dtype=np.float32)
    b = rng.standard_normal((784, 128), dtype=np.float32)

    def per_call():
        a @ b
        best = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(reps):
                a @ b
            best.append((time.perf_counter() - t0) / reps)
        return round(1e3 * statistics.median(best), 4)

    out = {"gemm_ms_omp_threads": per_call()}
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return out
    with threadpool_limits(limits=1, user_api="blas"):
        out["gemm_ms_1_thread"] = per_call()
    return out


# ---------------------------------------------------------------- driver
def configs(args):
    if args.quick:
        return {"mlp": dict(rows=3000, epochs=1), "lenet": dict(rows=320, epochs=1),
                "lstm": dict(batches=8, time_cap=4.0)}
    return {"mlp": dict(rows=60000, epochs=args.epochs),
            "lenet": dict(rows=args.lenet_rows, epochs=args.epochs),
            "lstm": dict(batches=args.lstm_batches, time_cap=args.lstm_time_cap)}


def run_raymod(name, cfg, data):
    if name == "mlp":
        return raymod_classifier(mlp_symbol(), *data, 100, 0.1, cfg["epochs"])
    if name == "lenet":
        return raymod_classifier(lenet_symbol(), *data, 64, 0.1, cfg["epochs"])
    return raymod_lstm(data, cfg["batches"], cfg["time_cap"])


def make_data(name, cfg):
    if name == "mlp":
        return mlp_data(cfg["rows"])
    if name == "lenet":
        return lenet_data(cfg["rows"])
    return lstm_sentences(cfg["batches"])


def profile(name, cfg, data, top):
    """One more raymod run under cProfile; prints the top functions by own and total time."""
    prof = cProfile.Profile()
    prof.enable()
    run_raymod(name, cfg, data)
    prof.disable()
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(top)
        lines = buf.getvalue().splitlines()
        start = next(i for i, ln in enumerate(lines) if "ncalls" in ln)
        print(f"\n--- cProfile {name}, sorted by {key} (top {top}) ---")
        print("\n".join(ln for ln in lines[start - 2:] if ln.strip()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="mlp,lenet,lstm")
    ap.add_argument("--repeats", type=int, default=3,
                    help="MXNet-then-raymod pairs per workload (the ratio is their median)")
    ap.add_argument("--epochs", type=int, default=1, help="timed epochs per fit (mlp, lenet)")
    ap.add_argument("--lenet-rows", type=int, default=3200)
    ap.add_argument("--lstm-batches", type=int, default=150, help="timed LSTM batches")
    ap.add_argument("--lstm-time-cap", type=float, default=40.0,
                    help="stop an LSTM run after this many seconds of timed batches")
    ap.add_argument("--mxnet-python", default=DEFAULT_MXNET if os.path.exists(DEFAULT_MXNET)
                    else None, help="python of a venv with mxnet==1.9.1 (default: %(default)s)")
    ap.add_argument("--no-mxnet", action="store_true", help="raymod figures only")
    ap.add_argument("--quick", action="store_true", help="smoke run: small data, 1 repeat")
    ap.add_argument("--profile", action="store_true", help="cProfile each raymod workload")
    ap.add_argument("--profile-top", type=int, default=25)
    args = ap.parse_args()
    if args.quick:
        args.repeats = 1
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore", message="Parameters already initialized")
    mx_python = None if args.no_mxnet else args.mxnet_python
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    cfgs = configs(args)
    env = dict(os.environ)
    rows = []
    t_start = time.perf_counter()
    load_before = os.getloadavg()
    blas_before = emit(kind="blas_check", when="start", **blas_check())
    for name in names:
        cfg = cfgs[name]
        data = make_data(name, cfg)
        pairs = []
        for rep in range(args.repeats):
            mx = mxnet_run(mx_python, name, cfg, env) if mx_python else None
            ours = run_raymod(name, cfg, data)
            if mx is not None and name == "lstm":
                dataset = ours["dataset_batches_per_bucket"]
                keys = sorted(set(ours["ms_per_batch_by_bucket"])
                              & set(mx["ms_per_batch_by_bucket"]), key=int)
                # buckets timed by both (each side's own buckets when none is common)
                ours["mix_weighted"] = mix_weighted(ours["ms_per_batch_by_bucket"], dataset,
                                                    LSTM["batch"], keys or None)
                mx["mix_weighted"] = mix_weighted(mx["ms_per_batch_by_bucket"], dataset,
                                                  LSTM["batch"], keys or None)
                mx["bucket_ratios"] = {k: round(mx["ms_per_batch_by_bucket"][k]
                                                / ours["ms_per_batch_by_bucket"][k], 3)
                                       for k in keys}
            elif name == "lstm":
                ours["mix_weighted"] = mix_weighted(ours["ms_per_batch_by_bucket"],
                                                    ours["dataset_batches_per_bucket"],
                                                    LSTM["batch"])
            rec = {"workload": name, "repeat": rep, "raymod": ours}
            if mx is not None:
                rec["mxnet"] = {k: v for k, v in mx.items() if k not in ("workload", "metric")}
                rec["ratio"] = ours["value"] / mx["value"]
                if name == "lstm":
                    rec["ratio_mix_weighted"] = ours["mix_weighted"] / mx["mix_weighted"]
            pairs.append(emit(kind="pair", **rec))
        unit = "sentences_per_s" if name == "lstm" else "samples_per_s"
        summary = {"workload": name, "unit": unit, "repeats": args.repeats, "config": cfg,
                   "raymod": statistics.median(p["raymod"]["value"] for p in pairs),
                   "target_ratio": TARGETS[name]}
        if name == "lstm":
            summary["raymod_mix_weighted"] = statistics.median(p["raymod"]["mix_weighted"]
                                                               for p in pairs)
        if mx_python:
            summary["mxnet"] = statistics.median(p["mxnet"]["value"] for p in pairs)
            summary["ratio"] = statistics.median(p["ratio"] for p in pairs)
            summary["ratios"] = [round(p["ratio"], 3) for p in pairs]
            if name == "lstm":
                summary["mxnet_mix_weighted"] = statistics.median(p["mxnet"]["mix_weighted"]
                                                                  for p in pairs)
                summary["ratio_mix_weighted"] = statistics.median(p["ratio_mix_weighted"]
                                                                  for p in pairs)
                summary["ratio_by_bucket"] = pairs[-1]["mxnet"]["bucket_ratios"]
            judged = summary.get("ratio_mix_weighted", summary["ratio"])
            summary["meets_target"] = judged >= TARGETS[name]
        rows.append(emit(kind="summary", **summary))
        if args.profile:
            profile(name, cfg, data, args.profile_top)
    blas_after = emit(kind="blas_check", when="end", **blas_check())
    print(f"\nraymod Module.fit in process vs MXNet 1.9.1 (OMP_NUM_THREADS="
          f"{os.environ['OMP_NUM_THREADS']}, {os.cpu_count()} cores, load average "
          f"{load_before[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end, "
          f"{time.perf_counter() - t_start:.0f} s)")
    print(f"{'workload':<8} {'unit':<16} {'raymod':>10} {'mxnet':>10} {'ratio':>7} "
          f"{'target':>7}  per-repeat ratios")
    for r in rows:
        nan = float("nan")
        print(f"{r['workload']:<8} {r['unit']:<16} {r['raymod']:>10.1f} "
              f"{r.get('mxnet', nan):>10.1f} {r.get('ratio', nan):>7.2f} "
              f"{r['target_ratio']:>6.1f}x  {r.get('ratios', '')}")
        if r["workload"] == "lstm":
            print(f"{'lstm':<8} {'mix-weighted':<16} {r['raymod_mix_weighted']:>10.1f} "
                  f"{r.get('mxnet_mix_weighted', nan):>10.1f} "
                  f"{r.get('ratio_mix_weighted', nan):>7.2f}"
                  f"          by bucket (mxnet ms / raymod ms): {r.get('ratio_by_bucket', '')}")
    print("BLAS check, ms per 100x784 @ 784x128 GEMM (OMP_NUM_THREADS threads / 1 thread): "
          + ", ".join(f"{label} {b['gemm_ms_omp_threads']} / {b.get('gemm_ms_1_thread', '-')}"
                      for label, b in (("start", blas_before), ("end", blas_after))))


if __name__ == "__main__":
    main()
