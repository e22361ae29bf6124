"""Head-to-head under worker kills: raymod's elastic Module.fit against Ray Train V2's
elastic ``TorchTrainer``.

The same MLP (784-128-64-10, SGD 0.1 with momentum 0.9, global batch 100, synthetic rows
of :func:`mlp_data`), the same number of steps and the same kill schedule (a
SIGKILL of one random training worker's process each time training first reaches a multiple
of ``--kill-every`` steps, none in the last 10 %) on both:

- raymod: ``Module.fit`` on ``rm.Workers(min, max, spares=--spares)`` with a ``dist_sync``
  store of hot-standby KVServers; a lost worker's slices are recomputed by the survivors, a
  spare started ahead of need (else a replacement once started) joins between steps;
- Ray Train V2: ``TorchTrainer`` with ``ScalingConfig(num_workers=(min, max))``,
  ``FailureConfig(max_failures=-1)`` and a checkpoint every ``--checkpoint-every`` steps (rank
  0 saves model, optimizer and step; a restarted group resumes from the last one), torch on
  CPU with DDP.

Each side first runs failure-free, then with the kills. Per side: wall time of both runs,
time lost per kill ((faulty - failure-free) / kills), steps computed again (raymod: the lost
slices recomputed, in steps; Ray Train: steps run again since the last checkpoint), and the
final training loss of both runs (cross-entropy over the rows, computed here the same way for
both) with how far the faulty run's parameters ended from the failure-free run's.

torch and ``ray[train]`` are a bench extra (``pip install -e ".[bench]"``), never a runtime
dependency; ``--train-python`` runs the Ray Train side with another interpreter (a venv with
torch) when this one has none.

    python bench/bench_vs_ray_train.py [--workers 4] [--min-workers 2] [--steps 3000]
        [--kill-every 250] [--checkpoint-every 100] [--spares 1] [--train-python PATH]

Prints one JSON object per run, then a table.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

BATCH = 100
ROWS = 20_000  # the data cycles: step s reads rows (s * BATCH) % ROWS onwards
LAYERS = (784, 128, 64, 10)


def mlp_data(rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The synthetic rows both sides train on: uniform pixels, labelled by the largest of
    10 fixed random projections (learnable, so the final losses say something)."""
    rng = np.random.RandomState(0)
    x = rng.rand(rows, LAYERS[0]).astype(np.float32)
    projection = rng.standard_normal((LAYERS[0], LAYERS[-1])).astype(np.float32)
    return x, (x @ projection).argmax(axis=1).astype(np.float32)


def batch_rows(step: int) -> slice:
    start = (step * BATCH) % ROWS
    return slice(start, start + BATCH)


def loss_of(params: list[np.ndarray]) -> float:
    """Mean cross-entropy of the MLP ``[W1, b1, W2, b2, W3, b3]`` (W: out x in) on the rows."""
    x, y = mlp_data(ROWS)
    h = x
    for k in range(0, len(params), 2):
        h = h @ params[k].T + params[k + 1]
        if k + 2 < len(params):
            h = np.maximum(h, 0)
    h = h - h.max(axis=1, keepdims=True)
    logp = h - np.log(np.exp(h).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(y)), y.astype(int)].mean())


class Killer(threading.Thread):
    """SIGKILLs one of ``pids()`` each time ``progress()`` (the furthest step reached) passes
    a multiple of ``every`` steps, up to 90 % of ``steps``."""

    def __init__(self, pids, progress, every: int, steps: int, seed: int):
        super().__init__(daemon=True)
        self.pids, self.progress, self.rng = pids, progress, random.Random(seed)
        self.due = list(range(every, int(0.9 * steps), every))
        self.kills, self.stop = 0, threading.Event()

    def run(self) -> None:
        while self.due and not self.stop.wait(0.02):
            if self.progress() < self.due[0]:
                continue
            alive = self.pids()
            if alive:
                try:
                    os.kill(self.rng.choice(alive), signal.SIGKILL)
                    self.kills += 1
                except ProcessLookupError:
                    continue
            self.due.pop(0)


# ---------------------------------------------------------------------------- raymod
def raymod_run(args, kill: bool) -> dict:
    import raymod as rm
    from raymod.kvstore.dist import DistKVStore
    from bench_module import mlp_symbol
    x, y = mlp_data(ROWS)
    epochs = args.steps * BATCH // ROWS
    it = rm.io.NDArrayIter(x, y, batch_size=BATCH, label_name="softmax_label")
    rm.random.seed(1)
    kv = DistKVStore("dist_sync", num_servers=1, standby=True)
    mod = rm.mod.Module(mlp_symbol(), context=rm.cpu(),
                        workers=rm.Workers(args.min_workers, args.workers,
                                           spares=args.spares))
    reached = [0]
    killer = Killer(lambda: [mod._pool.info[r]["pid"] for r in mod._pool.ranks],
                    lambda: reached[0], args.kill_every, args.steps, args.seed)

    def count(param):  # batch ends come in step order (late under run-ahead, never early)
        reached[0] = param.nbatch + 1 + param.epoch * (ROWS // BATCH)
    if kill:
        killer.start()
    t0 = time.time()
    mod.fit(it, num_epoch=epochs, kvstore=kv, initializer=rm.init.Xavier(), optimizer="sgd",
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9}, batch_end_callback=count)
    wall = time.time() - t0
    killer.stop.set()
    arg = mod.get_params()[0]
    params = [arg[f"fc{i}_{p}"] for i in (1, 2, 3) for p in ("weight", "bias")]
    slices = mod._pool.spec.slices
    redone = sum(e["slices_recomputed"] for e in mod._pool.events
                 if e["event"] == "recovered") / slices
    mod.close()
    kv.close()
    return {"wall_s": wall, "kills": killer.kills, "steps_redone": redone, "params": params}


# ---------------------------------------------------------------------------- Ray Train V2
def _train_loop(config: dict) -> None:
    import torch
    import ray.train
    from ray.train.torch import prepare_model
    torch.manual_seed(1)
    torch.set_num_threads(1)
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    layers = []
    for a, b in zip(LAYERS[:-1], LAYERS[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    model = prepare_model(torch.nn.Sequential(*layers[:-1]))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    start = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            state = torch.load(os.path.join(d, "state.pt"))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
    x, y = (torch.from_numpy(a) for a in mlp_data(ROWS))
    y = y.long()
    per = -(-BATCH // world)
    with open(os.path.join(config["pids"], str(os.getpid())), "w"):
        pass  # the bench's killer picks its victims here
    for step in range(start, config["steps"]):
        rows = batch_rows(step)
        mine = slice(rows.start + rank * per, min(rows.stop, rows.start + (rank + 1) * per))
        loss = torch.nn.functional.cross_entropy(model(x[mine]), y[mine])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            with open(config["executed"], "a") as f:
                f.write(f"{step}\n")
        last = step + 1 == config["steps"]
        if (step + 1) % config["every"] == 0 or last:
            with tempfile.TemporaryDirectory() as d:
                saved = None
                if rank == 0:
                    torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                                "step": step + 1}, os.path.join(d, "state.pt"))
                    saved = ray.train.Checkpoint.from_directory(d)
                    if last:
                        np.savez(config["final"], *[p.detach().numpy()
                                                    for p in model.parameters()])
                ray.train.report({"step": step + 1}, checkpoint=saved)


def ray_train_run(args, kill: bool) -> dict:
    import ray
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer
    ray.init(num_cpus=args.workers + 1)
    tmp = tempfile.mkdtemp(prefix="bench-ray-train-")
    config = {"steps": args.steps, "every": args.checkpoint_every,
              "executed": os.path.join(tmp, "executed.txt"),
              "final": os.path.join(tmp, "final.npz"), "pids": os.path.join(tmp, "pids")}
    os.makedirs(config["pids"])

    def pids() -> list[int]:  # the training workers alive (each wrote its pid at start)
        alive = []
        for name in os.listdir(config["pids"]):
            try:
                os.kill(int(name), 0)
                alive.append(int(name))
            except ProcessLookupError:
                os.remove(os.path.join(config["pids"], name))
        return alive
    def progress() -> int:  # the furthest step rank 0 has run
        try:
            with open(config["executed"], "rb") as f:
                return max((int(line) + 1 for line in f.read().split()), default=0)
        except FileNotFoundError:
            return 0
    killer = Killer(pids, progress, args.kill_every, args.steps, args.seed)
    trainer = TorchTrainer(
        _train_loop, train_loop_config=config,
        scaling_config=ScalingConfig(num_workers=(args.min_workers, args.workers)),
        run_config=RunConfig(storage_path=tmp, name="mlp",
                             failure_config=FailureConfig(max_failures=-1),
                             checkpoint_config=CheckpointConfig(num_to_keep=2)))
    t0 = time.time()
    if kill:
        killer.start()
    trainer.fit()
    wall = time.time() - t0
    killer.stop.set()
    executed = len(open(config["executed"]).read().split())
    params = list(np.load(config["final"]).values())
    ray.shutdown()
    return {"wall_s": wall, "kills": killer.kills, "steps_redone": executed - args.steps,
            "params": params}


# ---------------------------------------------------------------------------- driver
def side(name: str, args) -> dict:
    """Both runs of one side, in this process or (Ray Train) another interpreter."""
    if name == "ray_train" and args.train_python:
        cmd = [args.train_python, __file__, "--side", "ray_train", "--out", args.out + ".rt"]
        cmd += [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
                if k in ("workers", "min_workers", "steps", "kill_every", "checkpoint_every",
                         "seed")]
        subprocess.run(cmd, check=True)
        return json.load(open(args.out + ".rt"))
    run = raymod_run if name == "raymod" else ray_train_run
    free = run(args, kill=False)
    faulty = run(args, kill=True)
    out = {"side": name}
    for label, r in (("free", free), ("faulty", faulty)):
        out[label] = {"wall_s": r["wall_s"], "kills": r["kills"],
                      "steps_redone": r["steps_redone"], "final_loss": loss_of(r["params"])}
    out["param_diff"] = max(float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-3))
                            for a, b in zip(free["params"], faulty["params"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--min-workers", type=int, default=2)
    ap.add_argument("--spares", type=int, default=1, help="raymod's spare workers")
    ap.add_argument("--steps", type=int, default=3000, help="a multiple of 200")
    ap.add_argument("--kill-every", type=int, default=250, help="steps between kills")
    ap.add_argument("--checkpoint-every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train-python", help="interpreter with torch and ray[train]")
    ap.add_argument("--side", choices=["raymod", "ray_train"], help=argparse.SUPPRESS)
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "bench_vs_rt"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:  # the Ray Train side, run by the driver under --train-python
        json.dump(side(args.side, args), open(args.out, "w"))
        return
    import logging
    import warnings
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    load = os.getloadavg()[0]
    rows = []
    for name in ("raymod", "ray_train"):
        if name == "raymod":
            import raymod as rm
            rm.cluster.init(num_cpus=args.workers + 1)
        rows.append(side(name, args))
        if name == "raymod":
            import ray
            ray.shutdown()
        print(json.dumps(rows[-1]), flush=True)
    print(f"\nMLP 784-128-64-10, {args.steps} steps of batch 100, {args.min_workers}-"
          f"{args.workers} workers, a worker SIGKILL every {args.kill_every} steps; "
          f"{os.cpu_count()} cores, load {load:.1f} -> {os.getloadavg()[0]:.1f}")
    print("| system | failure-free s | with kills s | kills | s lost per kill | steps redone "
          "| loss free / faulty | params vs failure-free |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        f, k = r["free"], r["faulty"]
        lost = (k["wall_s"] - f["wall_s"]) / max(k["kills"], 1)
        print(f"| {r['side']} | {f['wall_s']:.1f} | {k['wall_s']:.1f} | {k['kills']} | "
              f"{lost:.2f} | {k['steps_redone']:.1f} | {f['final_loss']:.4f} / "
              f"{k['final_loss']:.4f} | {r['param_diff']:.1e} |")


if __name__ == "__main__":
    main()
