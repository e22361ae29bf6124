"""Sparse models at parameter-server scale: what a step moves, costs and holds.

    python bench/bench_sparse.py [--sections linear,dense,mxnet,table,tablefit,workers]
                                 [--steps 20] [--table-rows 10000000]

Sections, each printing JSON lines then a table:
  linear  A linear model at Avazu's width (1,000,001 features x 2 classes) on csr batches of
          8192 rows, about 15 non-zeros each (ids drawn long-tailed, as click logs are), Adam
          with lazy updates, in one process: step time, rows the gradient holds, bytes of the
          batch and of the gradient, resident memory. Then the same through a kvstore that
          runs the optimizer, with prepare() pulling the batch's rows: bytes pulled and pushed.
  dense   The same model with dense storage, at the batch that fits (256 rows: a dense
          8192-row batch is 32 GB), against csr at that batch.
  mxnet   MXNet 1.9.1 (``--mxnet-python``, default /tmp/mxvenv/bin/python; skipped when
          absent) on the same csr batches, in one process, at batch 2048 (its pip build stops
          at 8192 x 1,000,001 elements, past 2^31) and the same batch for raymod.
  table   An embedding table of 10^7 rows x 64 (2.56 GB float32, plus Adam's two states) on
          two KVServer shards by row range; this process acts as the worker: per step it pulls
          only the rows of 8192 ids, runs Embedding forward and backward, and pushes the
          row_sparse gradient. Bytes per step, step time, and the resident memory of the
          worker and of each server.
  tablefit The 10^7 x 64 table through Module.fit on 2 Ray workers and 2 KVServer shards
          (Embedding with sparse_grad, lazy Adam, 8192 long-tailed ids per batch): the
          driver draws the table a block at a time and each server draws its own rows, so
          no process holds it whole but the servers (by half). init_params + init_optimizer
          seconds, the fit's seconds per step, and the resident memory of the driver, the
          workers and the servers.
  workers The linear model trained by fit on 2 Ray workers and 2 KVServer shards: the fit's
          seconds (worker start included), the rows each worker holds (its last slice's), and the resident memory of
          the workers and the servers.

OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for this process (and the MXNet one).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

for _name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # before numpy loads OpenBLAS
    os.environ.pop(_name, None)

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.records import cpu_model, emit  # noqa: E402

WIDTH = 1_000_001
NNZ = 15


def rss_mb(pid: int | str = "self") -> float:
    """Resident memory of a process, from /proc."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def csr_batches(steps: int, batch: int, rng: np.random.Generator, width: int = WIDTH):
    """``steps`` csr batches (data, indices, indptr) and labels, long-tailed ids."""
    out = []
    for _ in range(steps):
        counts = rng.integers(NNZ - 5, NNZ + 6, batch)
        ids, indptr = [], [0]
        for c in counts:
            row = np.unique(np.minimum(rng.zipf(1.1, c), width) - 1)
            ids.append(row)
            indptr.append(indptr[-1] + row.size)
        indices = np.concatenate(ids).astype(np.int64)
        out.append((np.ones(indices.size, np.float32), indices, np.asarray(indptr, np.int64),
                    (rng.random(batch) < 0.3).astype(np.float32)))
    return out


def linear_module(rm, batch: int, stype: str, width: int = WIDTH):
    x = rm.sym.Variable("data", stype=stype)
    w = rm.sym.Variable("weight", shape=(width, 2), init=rm.init.Normal(0.01),
                        stype="row_sparse" if stype == "csr" else "default")
    b = rm.sym.Variable("bias", shape=(2,))
    net = rm.sym.SoftmaxOutput(rm.sym.broadcast_add(rm.sym.dot(x, w), b), name="softmax")
    mod = rm.mod.Module(net)
    mod.bind([("data", (batch, width))], [("softmax_label", (batch,))])
    mod.init_params()
    return mod


def time_steps(rm, mod, batches, width: int, dense: bool = False, prepare: bool = False):
    from raymod.sparse import CSRArray
    times, grad_rows = [], []
    rows_fn = (lambda b: {"weight": b.data[0].indices}) if prepare else None
    group = mod._exec_group
    k = group.param_names.index("weight")
    for i, (data, indices, indptr, label) in enumerate(batches):
        x = CSRArray(data, indices, indptr, (len(label), width))
        batch = rm.io.DataBatch([x.todense() if dense else x], [label])
        t0 = time.perf_counter()
        if prepare:
            mod.prepare(batch, sparse_row_id_fn=rows_fn)
        mod.forward_backward(batch)
        mod.update()
        if i:  # the first step allocates: a warm-up
            times.append(time.perf_counter() - t0)
        g = group.grad_arrays[k][0]
        grad_rows.append(g.indices.size if hasattr(g, "indices") else g.shape[0])
    return float(np.median(times)), int(np.median(grad_rows))


def section_linear(rm, args) -> list[dict]:
    rng = np.random.default_rng(0)
    batches = csr_batches(args.steps, 8192, rng)
    recs = []
    mod = linear_module(rm, 8192, "csr")
    mod.init_optimizer(optimizer="adam", optimizer_params={"learning_rate": 0.01})
    step, rows = time_steps(rm, mod, batches, WIDTH)
    nnz = int(np.median([b[1].size for b in batches]))
    recs.append(emit(section="linear", variant="csr + row_sparse, in process", batch=8192,
                     step_s=round(step, 4), grad_rows=rows, batch_nnz=nnz,
                     batch_bytes=nnz * 12 + 8193 * 8, grad_bytes=rows * (2 * 4 + 8),
                     dense_grad_bytes=WIDTH * 2 * 4, rss_mb=round(rss_mb(), 1)))
    mod = linear_module(rm, 8192, "csr")
    mod.init_optimizer(kvstore=rm.kv.create("local"), optimizer="adam",
                       optimizer_params={"learning_rate": 0.01})
    step, rows = time_steps(rm, mod, batches, WIDTH, prepare=True)
    recs.append(emit(section="linear", variant="csr + row_sparse, kvstore serves rows",
                     batch=8192, step_s=round(step, 4), grad_rows=rows,
                     pulled_bytes=rows * (2 * 4 + 8), pushed_bytes=rows * (2 * 4 + 8),
                     rss_mb=round(rss_mb(), 1)))
    return recs


def section_dense(rm, args) -> list[dict]:
    rng = np.random.default_rng(1)
    batches = csr_batches(args.steps, 256, rng)
    recs = []
    for stype in ("csr", "default"):
        mod = linear_module(rm, 256, stype)
        mod.init_optimizer(optimizer="adam", optimizer_params={"learning_rate": 0.01})
        step, rows = time_steps(rm, mod, batches, WIDTH, dense=stype == "default")
        recs.append(emit(section="dense", variant=f"{stype} storage", batch=256,
                         step_s=round(step, 4), grad_rows=rows, rss_mb=round(rss_mb(), 1)))
        del mod
    return recs


MXNET_SCRIPT = r"""
import json, sys, time
import numpy as np
import mxnet as mx
path, width = sys.argv[1], int(sys.argv[2])
saved = np.load(path)
n = int(saved["count"])
x = mx.sym.Variable("data", stype="csr")
w = mx.sym.Variable("weight", shape=(width, 2), init=mx.init.Normal(0.01), stype="row_sparse")
b = mx.sym.Variable("bias", shape=(2,))
net = mx.sym.SoftmaxOutput(mx.sym.broadcast_add(mx.sym.sparse.dot(x, w), b), name="softmax")
batch = len(saved["label0"])
mod = mx.mod.Module(net)
mod.bind([("data", (batch, width))], [("softmax_label", (batch,))])
mod.init_params()
mod.init_optimizer(optimizer="adam", optimizer_params={"learning_rate": 0.01})
times = []
for i in range(n):
    data = mx.nd.sparse.csr_matrix((saved[f"data{i}"], saved[f"indices{i}"], saved[f"indptr{i}"]),
                                   shape=(batch, width))
    db = mx.io.DataBatch([data], [mx.nd.array(saved[f"label{i}"])])
    t0 = time.perf_counter()
    mod.forward_backward(db)
    mod.update()
    mx.nd.waitall()
    if i:
        times.append(time.perf_counter() - t0)
print(json.dumps({"step_s": float(np.median(times))}))
"""


def section_mxnet(rm, args) -> list[dict]:
    if not os.path.exists(args.mxnet_python):
        return [emit(section="mxnet", note=f"skipped: no {args.mxnet_python}")]
    rng = np.random.default_rng(2)
    batches = csr_batches(args.steps, 2048, rng)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "batches.npz")
        arrays = {"count": np.array(len(batches))}
        for i, (d, ind, ptr, lab) in enumerate(batches):
            arrays.update({f"data{i}": d, f"indices{i}": ind, f"indptr{i}": ptr,
                           f"label{i}": lab})
        np.savez(path, **arrays)
        env = dict(os.environ)
        out = subprocess.run([args.mxnet_python, "-c", MXNET_SCRIPT, path, str(WIDTH)],
                             capture_output=True, text=True, env=env, timeout=1200)
    if out.returncode:
        return [emit(section="mxnet", note="MXNet run failed", stderr=out.stderr[-600:])]
    theirs = json.loads(out.stdout.strip().splitlines()[-1])["step_s"]
    mod = linear_module(rm, 2048, "csr")
    mod.init_optimizer(optimizer="adam", optimizer_params={"learning_rate": 0.01})
    ours, _ = time_steps(rm, mod, batches, WIDTH)
    return [emit(section="mxnet", variant="MXNet 1.9.1", batch=2048, step_s=round(theirs, 4)),
            emit(section="mxnet", variant="raymod", batch=2048, step_s=round(ours, 4),
                 ratio_to_mxnet=round(ours / theirs, 3))]


def section_table(rm, args) -> list[dict]:
    import ray
    from raymod.sparse import RowSparseArray
    rows, dim, batch = args.table_rows, 64, 8192
    kv = rm.kv.DistKVStore("dist_sync", num_servers=2)
    kv.set_optimizer(rm.optimizer.Adam(learning_rate=0.01))
    t0 = time.perf_counter()
    kv.init("embed", RowSparseArray.empty((rows, dim)))
    init_s = time.perf_counter() - t0
    sym = rm.sym.MakeLoss(rm.sym.sum(rm.sym.Embedding(
        rm.sym.Variable("ids"), rm.sym.Variable("embed", stype="row_sparse"),
        input_dim=rows, output_dim=dim, sparse_grad=True)))
    ex = sym.simple_bind(rm.cpu(), grad_req={"ids": "null", "embed": "write"}, ids=(batch,),
                         embed=(rows, dim))
    rng = np.random.default_rng(3)
    times, pulled, pushed = [], [], []
    for step in range(args.steps):
        ids = (np.minimum(rng.zipf(1.05, batch), rows) - 1).astype(np.float32)
        kv.row_traffic(reset=True)
        t = time.perf_counter()
        kv.row_sparse_pull("embed", out=ex.arg_dict["embed"], row_ids=ids.astype(np.int64))
        ex.arg_dict["ids"][...] = ids
        ex.forward(is_train=True)
        ex.backward()
        kv.push("embed", ex.grad_dict["embed"])
        if step:
            times.append(time.perf_counter() - t)
        moved = kv.row_traffic()
        pulled.append(moved["pulled"])
        pushed.append(moved["pushed"])
    servers = [ray.get(s.__ray_call__.remote(lambda self: os.getpid())) for s in kv.servers]
    recs = [emit(section="table", rows=rows, dim=dim, table_gb=round(rows * dim * 4 / 1e9, 2),
                 shards=2, batch_ids=batch, init_s=round(init_s, 2),
                 step_s=round(float(np.median(times)), 4),
                 rows_pulled=int(ex.arg_dict["embed"].indices.size),
                 bytes_pulled=int(np.median(pulled)), bytes_pushed=int(np.median(pushed)),
                 worker_rss_mb=round(rss_mb(), 1),
                 server_rss_mb=[round(rss_mb(pid), 1) for pid in servers])]
    kv.close()
    return recs


def section_tablefit(rm, args) -> list[dict]:
    """The 10^7 x 64 table trained by Module.fit on 2 workers and 2 shards."""
    import ray
    rows, dim, batch = args.table_rows, 64, 8192
    rng = np.random.default_rng(3)
    ids = (np.minimum(rng.zipf(1.05, (args.steps * batch, 1)), rows) - 1).astype(np.float32)
    net = rm.sym.MakeLoss(rm.sym.sum(rm.sym.Embedding(
        rm.sym.Variable("ids"), rm.sym.Variable("embed_weight", stype="row_sparse"),
        input_dim=rows, output_dim=dim, sparse_grad=True)))
    mod = rm.mod.Module(net, data_names=["ids"], label_names=None, workers=2)
    kv = rm.kv.DistKVStore("dist_sync", num_servers=2)
    it = rm.io.NDArrayIter(ids, batch_size=batch, data_name="ids")
    driver_before = rss_mb()
    mod.bind(it.provide_data)
    t0 = time.perf_counter()
    mod.init_params(rm.init.Uniform(0.01))
    mod.init_optimizer(kvstore=kv, optimizer="adam", optimizer_params={"learning_rate": 0.01})
    init_s = time.perf_counter() - t0
    driver_peak = rss_mb()
    t0 = time.perf_counter()
    mod.fit(it, num_epoch=1, eval_metric="loss")
    step_s = (time.perf_counter() - t0) / args.steps
    workers = list(mod._pool.workers.values())
    pids = ray.get([w.__ray_call__.remote(lambda self: os.getpid()) for w in workers])
    held = ray.get([w.__ray_call__.remote(
        lambda self: int(self.root.param_arrays[0][0].indices.size)) for w in workers])
    spids = [ray.get(s.__ray_call__.remote(lambda self: os.getpid())) for s in kv.servers]
    rec = emit(section="tablefit", variant="Module.fit, 2 workers, 2 shards", batch=batch,
               step_s=round(step_s, 4), rows=rows, dim=dim,
               table_gb=round(rows * dim * 4 / 1e9, 2), init_s=round(init_s, 2),
               rows_held_by_worker=held,
               driver_rss_mb={"before": round(driver_before, 1),
                              "after_init": round(driver_peak, 1),
                              "after_fit": round(rss_mb(), 1)},
               worker_rss_mb=[round(rss_mb(p), 1) for p in pids],
               server_rss_mb=[round(rss_mb(p), 1) for p in spids])
    mod.close()
    kv.close()
    return [rec]


def section_workers(rm, args) -> list[dict]:
    """The Avazu-width linear model on 2 Ray workers and 2 KVServer shards (fit)."""
    import ray
    from raymod.sparse import CSRArray
    rng = np.random.default_rng(4)
    batches = csr_batches(args.steps, 8192, rng)
    data = np.concatenate([b[0] for b in batches])
    indices = np.concatenate([b[1] for b in batches])
    indptr = np.concatenate([[0]] + [b[2][1:] + sum(len(c[1]) for c in batches[:i])
                                     for i, b in enumerate(batches)])
    label = np.concatenate([b[3] for b in batches])
    x = CSRArray(data, indices, indptr, (len(label), WIDTH))
    net = rm.sym.SoftmaxOutput(rm.sym.broadcast_add(
        rm.sym.dot(rm.sym.Variable("data", stype="csr"),
                   rm.sym.Variable("weight", shape=(WIDTH, 2), stype="row_sparse",
                                   init=rm.init.Normal(0.01))),
        rm.sym.Variable("bias", shape=(2,))), name="softmax")
    mod = rm.mod.Module(net, workers=2)
    kv = rm.kv.DistKVStore("dist_sync", num_servers=2)
    t0 = time.perf_counter()
    mod.fit(rm.io.NDArrayIter(x, label, batch_size=8192), num_epoch=1, optimizer="adam",
            optimizer_params={"learning_rate": 0.01}, kvstore=kv)
    seconds = time.perf_counter() - t0
    workers = list(mod._pool.workers.values())
    held = ray.get([w.__ray_call__.remote(
        lambda self: int(self.root.param_arrays[self.root.param_names.index("weight")][0]
                         .indices.size)) for w in workers])
    pids = ray.get([w.__ray_call__.remote(lambda self: os.getpid()) for w in workers])
    spids = [ray.get(s.__ray_call__.remote(lambda self: os.getpid())) for s in kv.servers]
    rec = emit(section="workers", variant="2 workers, 2 shards, fit", batch=8192,
               fit_s_with_worker_start=round(seconds, 2), steps=args.steps,
               rows_held_by_worker=held,
               pulled_bytes_per_worker=[h * (2 * 4 + 8) for h in held],
               worker_rss_mb=[round(rss_mb(p), 1) for p in pids],
               server_rss_mb=[round(rss_mb(p), 1) for p in spids])
    mod.close()
    kv.close()
    return [rec]


SECTIONS = {"linear": section_linear, "dense": section_dense, "mxnet": section_mxnet,
            "table": section_table, "tablefit": section_tablefit, "workers": section_workers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", default="linear,dense,mxnet,table,tablefit,workers")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--table-rows", type=int, default=10_000_000)
    parser.add_argument("--mxnet-python", default="/tmp/mxvenv/bin/python")
    args = parser.parse_args()
    import raymod as rm
    try:
        from threadpoolctl import threadpool_info
        blas = [{k: i.get(k) for k in ("internal_api", "architecture", "num_threads")}
                for i in threadpool_info()]
    except ImportError:
        blas = "threadpoolctl not installed"
    emit(cpu=cpu_model(), cores=os.cpu_count(), blas=blas)
    recs = []
    for name in args.sections.split(","):
        recs += SECTIONS[name](rm, args)
    print(f"\n{'section':<8} {'variant':<42} {'batch':>6} {'step s':>8}  other")
    for r in recs:
        other = {k: v for k, v in r.items() if k not in ("section", "variant", "batch",
                                                          "step_s", "loadavg_1m",
                                                          "omp_num_threads")}
        print(f"{r.get('section', ''):<8} {r.get('variant', ''):<42} {r.get('batch', ''):>6} "
              f"{r.get('step_s', ''):>8}  {json.dumps(other)}")


if __name__ == "__main__":
    main()
