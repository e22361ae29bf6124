"""MXNet 1.x reference figures for raymod's benchmarks.

Runs under the separate MXNet venv, never under raymod's environment:

    /tmp/mxvenv/bin/python bench/mxnet_reference.py [--only mlp,lenet,lstm,svrg] [--repeats 5]

(mxnet==1.9.1 with numpy<1.24.) OMP_NUM_THREADS defaults to 2 (set before mxnet is
imported) so figures compare with the 2-core reference machine; pass --threads to change.
Prints one JSON object per measurement, then a table.

Workloads (all data synthetic and seeded):
  mlp    MLP 784-128-64-10 (relu) + SoftmaxOutput, batch 100, SGD lr 0.1, 60k rows
         (--mlp-rows).
  lenet  conv20(5x5)-tanh-maxpool-conv50(5x5)-tanh-maxpool-fc500-tanh-fc10, 1x28x28, batch 64.
  lstm   BucketingModule LM: embed 200, 2x LSTMCell(200), vocab 10,000, buckets 10/20/30/40,
         batch 32, SGD lr 0.01 (as example/rnn/bucketing/lstm_bucketing.py).
  svrg   SVRGModule linear regression 20k x 90 (correlated features + noise), lr 0.025,
         update_freq 2, batch 100, 10 epochs; excess MSE over the least-squares optimum,
         against plain Module SGD at the same lr.

Figures:
  fit_samples_per_s   Module.fit epoch throughput (bind/init excluded; the first epoch is a
                      warm-up; median over the timed epochs, timed by epoch_end_callback).
  step_samples_per_s  forward(is_train=True) + backward + Module.update on one fixed batch,
                      median of --repeats repeats of 100 steps (waitall at the end of each).
"""
import argparse
import json
import logging
import os
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description="MXNet 1.x reference benchmark for raymod")
    ap.add_argument("--only", default="mlp,lenet,lstm,svrg",
                    help="comma list of workloads: mlp, lenet, lstm, svrg")
    ap.add_argument("--repeats", type=int, default=5, help="repeats for the executor-step figure")
    ap.add_argument("--steps", type=int, default=100, help="steps per executor-step repeat")
    ap.add_argument("--fit-epochs", type=int, default=3, help="timed fit epochs after the warm-up")
    ap.add_argument("--mlp-rows", type=int, default=60000)
    ap.add_argument("--lenet-rows", type=int, default=6400)
    ap.add_argument("--no-step", action="store_true",
                    help="Module.fit figures only: skip the executor-step and numpy figures")
    ap.add_argument("--lstm-batches", type=int, default=60, help="timed LSTM batches")
    ap.add_argument("--lstm-time-cap", type=float, default=60.0,
                    help="stop the LSTM run after this many seconds of timed batches")
    ap.add_argument("--svrg-epochs", type=int, default=10)
    ap.add_argument("--svrg-time-cap", type=float, default=60.0,
                    help="stop SVRG/SGD early after this many seconds each")
    ap.add_argument("--threads", default="2", help="OMP_NUM_THREADS (set before importing mxnet)")
    return ap.parse_args()


ARGS = parse_args()
os.environ["OMP_NUM_THREADS"] = ARGS.threads
os.environ.setdefault("MXNET_SUBGRAPH_VERBOSE", "0")
import numpy as np  # noqa: E402
import mxnet as mx  # noqa: E402

logging.disable(logging.WARNING)
RESULTS = []


def emit(**rec):
    rec.setdefault("mxnet_version", mx.__version__)
    rec.setdefault("omp_num_threads", int(os.environ["OMP_NUM_THREADS"]))
    # A busy host ruins OpenMP timings (libgomp threads wait on descheduled peers):
    # keep the 1-minute load average next to every figure.
    rec.setdefault("loadavg_1m", round(os.getloadavg()[0], 2))
    RESULTS.append(rec)
    print(json.dumps(rec), flush=True)


def median(xs):
    return float(np.median(np.asarray(xs, dtype=np.float64)))


# ---------------------------------------------------------------- shared timing helpers
def time_fit(sym, it, batch, rows, lr, epochs):
    """Module.fit for 1 warm-up + `epochs` timed epochs; returns per-epoch seconds."""
    mod = mx.mod.Module(sym, context=mx.cpu())
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    mod.init_params(initializer=mx.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": lr})
    stamps = []

    def on_epoch_end(epoch, symbol, arg, aux):
        mx.nd.waitall()
        stamps.append(time.perf_counter())

    mx.nd.waitall()
    t0 = time.perf_counter()
    mod.fit(it, num_epoch=1 + epochs, eval_metric="acc", epoch_end_callback=on_epoch_end)
    ends = [t0] + stamps
    secs = [b - a for a, b in zip(ends[:-1], ends[1:])]
    return secs[0], secs[1:], mod


def time_steps(mod, batch, repeats, steps):
    """forward(is_train=True)+backward+update on one fixed batch; seconds per repeat."""
    out = []
    for _ in range(repeats + 1):  # the first repeat is a warm-up
        mx.nd.waitall()
        t0 = time.perf_counter()
        for _ in range(steps):
            mod.forward(batch, is_train=True)
            mod.backward()
            mod.update()
        mx.nd.waitall()
        out.append(time.perf_counter() - t0)
    return out[1:]


def classifier_bench(name, sym, X, y, batch, lr):
    it = mx.io.NDArrayIter(X, y, batch_size=batch, shuffle=False, label_name="softmax_label")
    warm, secs, mod = time_fit(sym, it, batch, len(X), lr, ARGS.fit_epochs)
    rows = (len(X) // batch) * batch
    emit(workload=name, metric="fit_samples_per_s", value=round(rows / median(secs), 1),
         epoch_seconds=[round(s, 4) for s in secs], warmup_epoch_seconds=round(warm, 4),
         rows=rows, batch_size=batch)
    if ARGS.no_step:
        return
    it.reset()
    db = next(iter(it))
    reps = time_steps(mod, db, ARGS.repeats, ARGS.steps)
    emit(workload=name, metric="step_samples_per_s",
         value=round(ARGS.steps * batch / median(reps), 1),
         ms_per_step=round(1e3 * median(reps) / ARGS.steps, 4),
         repeat_seconds=[round(s, 4) for s in reps], steps=ARGS.steps, batch_size=batch)


# ---------------------------------------------------------------- 1. MLP
def bench_mlp():
    rng = np.random.RandomState(0)
    X = rng.rand(ARGS.mlp_rows, 784).astype(np.float32)
    y = rng.randint(0, 10, ARGS.mlp_rows).astype(np.float32)
    data = mx.sym.Variable("data")
    x = mx.sym.FullyConnected(data, num_hidden=128, name="fc1")
    x = mx.sym.Activation(x, act_type="relu", name="relu1")
    x = mx.sym.FullyConnected(x, num_hidden=64, name="fc2")
    x = mx.sym.Activation(x, act_type="relu", name="relu2")
    x = mx.sym.FullyConnected(x, num_hidden=10, name="fc3")
    sym = mx.sym.SoftmaxOutput(x, name="softmax")
    classifier_bench("mlp", sym, X, y, 100, 0.1)
    if not ARGS.no_step:
        numpy_mlp_calibration(X[:100], y[:100].astype(np.int64))


def numpy_mlp_calibration(xb, yb, lr=0.1):
    """The same MLP step written in plain numpy (float32): a machine-speed yardstick.

    DESIGN.md quotes ~200,000 samples/s for it on the reference machine; the ratio of the
    MXNet figures to this one is what stays comparable when the host is slower or busy.
    """
    rng = np.random.RandomState(0)
    shapes = [(784, 128), (128, 64), (64, 10)]
    Ws = [(rng.randn(*s) * np.sqrt(2.0 / s[0])).astype(np.float32) for s in shapes]
    bs = [np.zeros(s[1], np.float32) for s in shapes]
    n = len(xb)
    onehot = np.zeros((n, 10), np.float32)
    onehot[np.arange(n), yb] = 1

    def step():
        h1 = np.maximum(xb @ Ws[0] + bs[0], 0)
        h2 = np.maximum(h1 @ Ws[1] + bs[1], 0)
        z = h2 @ Ws[2] + bs[2]
        e = np.exp(z - z.max(axis=1, keepdims=True))
        g3 = (e / e.sum(axis=1, keepdims=True) - onehot) * (1.0 / n)
        g2 = (g3 @ Ws[2].T) * (h2 > 0)
        g1 = (g2 @ Ws[1].T) * (h1 > 0)
        for W, b, a, g in ((Ws[2], bs[2], h2, g3), (Ws[1], bs[1], h1, g2), (Ws[0], bs[0], xb, g1)):
            W -= lr * (a.T @ g)
            b -= lr * g.sum(axis=0)

    reps = []
    for _ in range(ARGS.repeats + 1):
        t0 = time.perf_counter()
        for _ in range(ARGS.steps):
            step()
        reps.append(time.perf_counter() - t0)
    reps = reps[1:]
    emit(workload="mlp", metric="numpy_step_samples_per_s",
         value=round(ARGS.steps * n / median(reps), 1),
         ms_per_step=round(1e3 * median(reps) / ARGS.steps, 4),
         repeat_seconds=[round(s, 4) for s in reps], steps=ARGS.steps, batch_size=n,
         note="plain numpy float32 forward+backward+SGD of the same MLP (calibration)")


# ---------------------------------------------------------------- 2. LeNet
def lenet_symbol():
    data = mx.sym.Variable("data")
    x = mx.sym.Convolution(data, kernel=(5, 5), num_filter=20, name="conv1")
    x = mx.sym.Activation(x, act_type="tanh")
    x = mx.sym.Pooling(x, pool_type="max", kernel=(2, 2), stride=(2, 2))
    x = mx.sym.Convolution(x, kernel=(5, 5), num_filter=50, name="conv2")
    x = mx.sym.Activation(x, act_type="tanh")
    x = mx.sym.Pooling(x, pool_type="max", kernel=(2, 2), stride=(2, 2))
    x = mx.sym.Flatten(x)
    x = mx.sym.FullyConnected(x, num_hidden=500, name="fc1")
    x = mx.sym.Activation(x, act_type="tanh")
    x = mx.sym.FullyConnected(x, num_hidden=10, name="fc2")
    return mx.sym.SoftmaxOutput(x, name="softmax")


def bench_lenet():
    rng = np.random.RandomState(1)
    n = ARGS.lenet_rows
    X = rng.rand(n, 1, 28, 28).astype(np.float32)
    y = rng.randint(0, 10, n).astype(np.float32)
    classifier_bench("lenet", lenet_symbol(), X, y, 64, 0.1)


# ---------------------------------------------------------------- 3. LSTM bucketing LM
def bench_lstm():
    vocab, num_embed, num_hidden, num_layers, batch = 10000, 200, 200, 2, 32
    buckets = [10, 20, 30, 40]
    rng = np.random.RandomState(2)
    n_batches = ARGS.lstm_batches + 2 * len(buckets)  # extra batches absorb per-bucket binds
    sentences = []
    per_bucket = {b: 0 for b in buckets}
    # Uniform lengths 2..40, then trim each bucket to whole batches.
    while len(sentences) < n_batches * batch * 1.2:
        ln = int(rng.randint(2, 41))
        sentences.append(list(rng.randint(1, vocab, ln)))
    train = mx.rnn.BucketSentenceIter(sentences, batch, buckets=buckets, invalid_label=0)
    for b, d in zip(train.buckets, train.data):
        per_bucket[b] = len(d) // batch

    def sym_gen(seq_len):
        data = mx.sym.Variable("data")
        label = mx.sym.Variable("softmax_label")
        embed = mx.sym.Embedding(data=data, input_dim=vocab, output_dim=num_embed, name="embed")
        stack = mx.rnn.SequentialRNNCell()
        for i in range(num_layers):
            stack.add(mx.rnn.LSTMCell(num_hidden=num_hidden, prefix="lstm_l%d_" % i))
        stack.reset()
        outputs, _ = stack.unroll(seq_len, inputs=embed, merge_outputs=True)
        pred = mx.sym.Reshape(outputs, shape=(-1, num_hidden))
        pred = mx.sym.FullyConnected(data=pred, num_hidden=vocab, name="pred")
        label = mx.sym.Reshape(label, shape=(-1,))
        pred = mx.sym.SoftmaxOutput(data=pred, label=label, name="softmax")
        return pred, ("data",), ("softmax_label",)

    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=train.default_bucket_key,
                                 context=mx.cpu())
    seen, times, keys = set(), [], []
    state = {"t": None, "stop": False}

    class Stop(Exception):
        pass

    def on_batch_end(param):
        mx.nd.waitall()
        now = time.perf_counter()
        key = param.locals["data_batch"].bucket_key
        if key in seen:  # first batch of a bucket includes its bind: not timed
            times.append(now - state["t"])
            keys.append(key)
        seen.add(key)
        state["t"] = now
        if len(times) >= ARGS.lstm_batches or sum(times) > ARGS.lstm_time_cap:
            raise Stop()

    t_bind = time.perf_counter()
    mod.bind(data_shapes=train.provide_data, label_shapes=train.provide_label)
    mod.init_params(initializer=mx.init.Xavier(factor_type="in", magnitude=2.34))
    mod.init_optimizer(optimizer="sgd",
                       optimizer_params={"learning_rate": 0.01, "momentum": 0.0, "wd": 0.00001})
    t_bind = time.perf_counter() - t_bind
    state["t"] = time.perf_counter()
    try:
        mod.fit(train, eval_metric=mx.metric.Perplexity(0), num_epoch=1,
                batch_end_callback=on_batch_end)
    except Stop:
        pass
    total = sum(times)
    by_bucket = {}
    for k, t in zip(keys, times):
        by_bucket.setdefault(k, []).append(t)
    emit(workload="lstm", metric="fit_sentences_per_s", value=round(len(times) * batch / total, 1),
         timed_batches=len(times), seconds=round(total, 3), batch_size=batch,
         ms_per_batch_by_bucket={str(k): round(1e3 * median(v), 2) for k, v in sorted(by_bucket.items())},
         batches_per_bucket={str(k): len(v) for k, v in sorted(by_bucket.items())},
         dataset_batches_per_bucket={str(k): v for k, v in sorted(per_bucket.items())},
         default_bucket_bind_init_s=round(t_bind, 3),
         tokens_per_s=round(sum(k for k in keys) * batch / total, 1))


# ---------------------------------------------------------------- 4. SVRG linear regression
def bench_svrg():
    from mxnet.contrib.svrg_optimization.svrg_module import SVRGModule
    n, d, batch, lr = 20000, 90, 100, 0.025
    rng = np.random.RandomState(3)
    # AR(1)-correlated features (corr 0.5 between neighbours), unit variance.
    Z = rng.randn(n, d)
    X = np.empty_like(Z)
    X[:, 0] = Z[:, 0]
    rho = 0.5
    for j in range(1, d):
        X[:, j] = rho * X[:, j - 1] + np.sqrt(1 - rho * rho) * Z[:, j]
    w_true = rng.randn(d) / np.sqrt(d)
    y = X @ w_true + 0.3 + 0.1 * rng.randn(n)
    X = X.astype(np.float32)
    y = y.astype(np.float32)
    # Least-squares optimum (with bias) in float64: the floor for the MSE.
    A = np.hstack([X.astype(np.float64), np.ones((n, 1))])
    sol, *_ = np.linalg.lstsq(A, y.astype(np.float64), rcond=None)
    mse_opt = float(np.mean((A @ sol - y) ** 2))

    data = mx.sym.Variable("data")
    label = mx.sym.Variable("lin_reg_label")
    fc = mx.sym.FullyConnected(data, num_hidden=1, name="fc1")
    sym = mx.sym.LinearRegressionOutput(fc, label=label, name="lro")

    def full_mse(mod):
        arg, _ = mod.get_params()
        w = arg["fc1_weight"].asnumpy().astype(np.float64).ravel()
        b = float(arg["fc1_bias"].asnumpy()[0])
        return float(np.mean((X.astype(np.float64) @ w + b - y) ** 2))

    def run(kind):
        it = mx.io.NDArrayIter(X, y, batch_size=batch, shuffle=True, label_name="lin_reg_label")
        mx.random.seed(3)
        np.random.seed(3)
        if kind == "svrg":
            mod = SVRGModule(sym, data_names=["data"], label_names=["lin_reg_label"],
                             update_freq=2, context=mx.cpu())
        else:
            mod = mx.mod.Module(sym, data_names=["data"], label_names=["lin_reg_label"],
                                context=mx.cpu())
        curve = []
        start = time.perf_counter()

        class Stop(Exception):
            pass

        def on_epoch_end(epoch, symbol, arg, aux):
            curve.append(full_mse(mod) - mse_opt)
            if time.perf_counter() - start > ARGS.svrg_time_cap:
                raise Stop()

        try:
            mod.fit(it, eval_metric="mse", optimizer="sgd",
                    optimizer_params={"learning_rate": lr}, num_epoch=ARGS.svrg_epochs,
                    initializer=mx.init.Uniform(0.01), epoch_end_callback=on_epoch_end)
        except Stop:
            pass
        return curve, time.perf_counter() - start

    for kind in ("svrg", "sgd"):
        curve, secs = run(kind)
        emit(workload="svrg", metric="excess_mse_%s" % kind, value=float("%.3g" % curve[-1]),
             epochs=len(curve), seconds=round(secs, 2), lr=lr, batch_size=batch,
             update_freq=2 if kind == "svrg" else None, mse_optimum=round(mse_opt, 6),
             excess_mse_by_epoch=[float("%.3g" % c) for c in curve])


# ---------------------------------------------------------------- main
BENCHES = {"mlp": bench_mlp, "lenet": bench_lenet, "lstm": bench_lstm, "svrg": bench_svrg}


def main():
    t0 = time.perf_counter()
    names = [s.strip() for s in ARGS.only.split(",") if s.strip()]
    for name in names:
        if name not in BENCHES:
            sys.exit("unknown workload %r (choose from %s)" % (name, ", ".join(BENCHES)))
    for name in names:
        BENCHES[name]()
    print()
    print("MXNet %s, OMP_NUM_THREADS=%s, total %.1f s, load average now %.2f on %d cores"
          % (mx.__version__, os.environ["OMP_NUM_THREADS"], time.perf_counter() - t0,
             os.getloadavg()[0], os.cpu_count()))
    print("%-8s %-22s %14s  %s" % ("workload", "metric", "value", "detail"))
    for r in RESULTS:
        detail = ""
        if "ms_per_step" in r:
            detail = "%.3f ms/step" % r["ms_per_step"]
        elif "epoch_seconds" in r:
            detail = "epochs %s s" % r["epoch_seconds"]
        elif "ms_per_batch_by_bucket" in r:
            detail = "ms/batch by bucket %s" % r["ms_per_batch_by_bucket"]
        elif "epochs" in r:
            detail = "%d epochs, %.1f s" % (r["epochs"], r["seconds"])
        val = r["value"]
        sval = ("%.3g" % val) if isinstance(val, float) and abs(val) < 1 else ("%.1f" % val)
        print("%-8s %-22s %14s  %s" % (r["workload"], r["metric"], sval, detail))


if __name__ == "__main__":
    main()
