"""A training step in raymod against the same step in PyTorch eager on the CPU.

One step is forward, backward and SGD with momentum 0.9, on one fixed batch (no data loading),
for the nets of bench/workloads.py:

  mlp        784-128-64-10 ReLU, batch 100
  lenet      conv20-tanh-pool-conv50-tanh-pool-fc500-tanh-fc10, batch 64
  resnet20   CIFAR ResNet-20 with batch norm, 3x32x32, batch 32
  lstm_lm    embed 200, 2-layer LSTM 200 (raymod: one fused RNN node; torch: nn.LSTM),
             vocab 10,000, sequence 35, batch 32

Each (net, threads, side) is timed in a process of its own (raymod: ``RAYMOD_THREADS``;
torch: ``torch.set_num_threads``), the sides alternating, ``--repeats`` times; the figure is
the median ms per step over each process's timed steps, then the median over repeats. The
ratio is raymod's time over torch's (below 1: raymod is faster). The fraction of peak is the
step's FLOPs (counted by torch's FlopCounterMode on the torch net, forward and backward) over
its time, against one core's float32 GEMM rate measured here (numpy, 1024^3, one thread).

    python bench/bench_vs_torch.py [--only mlp,lenet,resnet20,lstm_lm] [--threads 1,2]
        [--repeats 3] [--steps 30]

Needs torch (the ``bench`` extra). OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for
every measuring process. Prints one JSON object per measurement, then a table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

for _name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # before numpy loads OpenBLAS
    os.environ.pop(_name, None)

HERE = Path(__file__).resolve().parent
NETS = ("mlp", "lenet", "resnet20", "lstm_lm")
RAYMOD_NAME = {"lstm_lm": "lstm_lm_fused"}


# ---------------------------------------------------------------- torch nets
def torch_net(name: str):
    import torch.nn as nn
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                             nn.Linear(64, 10))
    if name == "lenet":
        return nn.Sequential(nn.Conv2d(1, 20, 5), nn.Tanh(), nn.MaxPool2d(2),
                             nn.Conv2d(20, 50, 5), nn.Tanh(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(800, 500), nn.Tanh(), nn.Linear(500, 10))
    if name == "resnet20":
        def conv_bn(cin, cout, stride, kernel=3):
            return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False),
                    nn.BatchNorm2d(cout, momentum=0.1, eps=1e-5)]

        class Block(nn.Module):
            def __init__(self, cin, cout, stride):
                super().__init__()
                self.a = nn.Sequential(*conv_bn(cin, cout, stride), nn.ReLU())
                self.b = nn.Sequential(*conv_bn(cout, cout, 1))
                self.p = nn.Sequential(*conv_bn(cin, cout, stride, 1)) if stride != 1 else None

            def forward(self, x):
                y = self.b(self.a(x))
                return y.add_(self.p(x) if self.p is not None else x).relu_()

        layers = conv_bn(3, 16, 1) + [nn.ReLU()]
        cin = 16
        for stage, cout in enumerate((16, 32, 64)):
            for block in range(3):
                layers.append(Block(cin, cout, 2 if stage > 0 and block == 0 else 1))
                cin = cout
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
        return nn.Sequential(*layers)
    if name == "lstm_lm":
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10000, 200)
                self.lstm = nn.LSTM(200, 200, num_layers=2, batch_first=True)
                self.pred = nn.Linear(200, 10000)

            def forward(self, x):
                out, _ = self.lstm(self.embed(x))
                return self.pred(out.reshape(-1, 200))
        return LM()
    raise ValueError(name)


def torch_child(name: str, threads: int, steps: int) -> dict:
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    sys.path.insert(0, str(HERE))
    from workloads import WORKLOADS
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    w = WORKLOADS[RAYMOD_NAME.get(name, name)]
    X, y = w.data(1)
    x = torch.from_numpy(X).long() if name == "lstm_lm" else torch.from_numpy(X)
    t = torch.from_numpy(y).long().reshape(-1)
    net = torch_net(name)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(net(x), t).backward()
        opt.step()

    with FlopCounterMode(display=False) as counter:
        loss_fn(net(x), t).backward()
    return {"flops": counter.get_total_flops(), **_time(step, steps)}


def raymod_child(name: str, steps: int) -> dict:
    sys.path.insert(0, str(HERE))
    import raymod as rm
    from workloads import WORKLOADS
    w = WORKLOADS[RAYMOD_NAME.get(name, name)]
    X, y = w.data(1)
    it = rm.io.NDArrayIter(X, y, batch_size=w.batch, label_name="softmax_label")
    mod = rm.mod.Module(w.symbol(), context=rm.cpu())
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    mod.init_params(initializer=rm.init.Xavier(magnitude=2.0))
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.01, "momentum": 0.9})
    batch = next(iter(it))

    def step():
        mod.forward_backward(batch)
        mod.update()
        mod.get_outputs()[0]  # as torch, the step ends with its output in hand

    return _time(step, steps)


def _time(step, steps: int) -> dict:
    for _ in range(3):  # warm-up: allocations, pools, caches
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return {"ms_per_step": 1e3 * statistics.median(times),
            "ms_min": 1e3 * min(times), "ms_max": 1e3 * max(times)}


def sgemm_peak_gflops() -> float:
    """One core's float32 GEMM rate (numpy's BLAS, one thread, 1024^3)."""
    import numpy as np
    from threadpoolctl import threadpool_limits
    a = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
    with threadpool_limits(limits=1, user_api="blas"):
        a @ a
        best = min(_clock(lambda: a @ a) for _ in range(5))
    return 2 * 1024 ** 3 / best / 1e9


def _clock(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(side: str, name: str, threads: int, steps: int) -> dict:
    env = dict(os.environ)
    env["RAYMOD_THREADS"] = str(threads)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", side, "--only", name,
           "--threads", str(threads), "--steps", str(steps)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"{side} {name} {threads}: no result\n{out.stderr[-3000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=",".join(NETS))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30, help="timed steps a process")
    ap.add_argument("--child", choices=("torch", "raymod"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        name, threads = args.only, int(args.threads)
        rec = torch_child(name, threads, args.steps) if args.child == "torch" \
            else raymod_child(name, args.steps)
        print("RESULT " + json.dumps(rec), flush=True)
        return

    sys.path.insert(0, str(HERE))
    from records import cpu_model
    import torch
    peak = sgemm_peak_gflops()
    print(json.dumps({"cpu": cpu_model(), "cores": len(os.sched_getaffinity(0)),
                      "torch": torch.__version__, "sgemm_1core_gflops": round(peak, 1),
                      "loadavg_1m_at_start": round(os.getloadavg()[0], 2)}), flush=True)
    rows = []
    for name in args.only.split(","):
        for threads in (int(t) for t in args.threads.split(",")):
            per = {"torch": [], "raymod": []}
            flops = None
            for _ in range(args.repeats):
                for side in ("torch", "raymod"):
                    rec = measure(side, name, threads, args.steps)
                    flops = rec.get("flops", flops)
                    per[side].append(rec["ms_per_step"])
                    print(json.dumps({"net": name, "threads": threads, "side": side, **rec,
                                      "loadavg_1m": round(os.getloadavg()[0], 2)}), flush=True)
            t_ms, r_ms = statistics.median(per["torch"]), statistics.median(per["raymod"])
            rows.append((name, threads, t_ms, r_ms, r_ms / t_ms,
                         [r / t for r, t in zip(per["raymod"], per["torch"])],
                         flops / (r_ms / 1e3) / 1e9 / peak, flops / (t_ms / 1e3) / 1e9 / peak))
            print(json.dumps({"net": name, "threads": threads, "torch_ms": t_ms,
                              "raymod_ms": r_ms, "ratio": r_ms / t_ms, "flops": flops}),
                  flush=True)

    print(f"\nraymod against PyTorch {torch.__version__}, training step on the CPU "
          f"({cpu_model()}, load now {os.getloadavg()[0]:.2f}; one core's sgemm {peak:.0f} "
          f"GFLOP/s)")
    print(f"{'net':<10}{'threads':>8}{'torch ms':>10}{'raymod ms':>11}{'ratio':>7}"
          f"{'per repeat':>22}{'raymod peak':>13}{'torch peak':>12}")
    for name, threads, t_ms, r_ms, ratio, each, r_peak, t_peak in rows:
        print(f"{name:<10}{threads:>8}{t_ms:>10.2f}{r_ms:>11.2f}{ratio:>7.2f}"
              f"{', '.join(f'{e:.2f}' for e in each):>22}{r_peak:>13.0%}{t_peak:>12.0%}")


if __name__ == "__main__":
    main()
