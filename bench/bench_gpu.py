"""In-process throughput on numpy (``rm.cpu()``) and CuPy (``rm.gpu(0)``): MLP, LeNet, LSTM.

The three anchor workloads of bench/bench_module.py (same networks, data and timing), run
through ``rm.mod.Module`` / ``rm.mod.BucketingModule`` with the local kvstore, no Ray:

    python bench/bench_gpu.py [--only mlp,lenet,lstm] [--quick] [--json-out FILE]

Prints one JSON object per measurement, then a table: samples/s on each device and GPU / CPU.
Without CuPy or a CUDA device the GPU column says so and only the CPU column is measured.
Like the other benches, it unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for its own process
and prints the BLAS kernel threadpoolctl reports.
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # before numpy loads OpenBLAS
    os.environ.pop(_var, None)

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import raymod as rm  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_module as anchors  # noqa: E402
from records import emit  # noqa: E402

FULL = {"mlp": dict(rows=60000, batch=100, lr=0.1, epochs=2),
        "lenet": dict(rows=12800, batch=64, lr=0.1, epochs=1),
        "lstm": dict(batches=60, time_cap=60.0)}
QUICK = {"mlp": dict(rows=6000, batch=100, lr=0.1, epochs=2),
         "lenet": dict(rows=1280, batch=64, lr=0.1, epochs=2),
         "lstm": dict(batches=12, time_cap=20.0)}


def blas_kernel() -> str:
    """The BLAS library and kernel numpy uses, as threadpoolctl reports them."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed"
    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    return "; ".join(f"{i.get('internal_api')} {i.get('version')} kernel "
                     f"{i.get('architecture')} threads {i.get('num_threads')}" for i in blas)


def gpu_missing() -> str | None:
    """Why rm.gpu(0) cannot run here, or None when it can."""
    try:
        rm.gpu(0).xp
    except RuntimeError as err:
        return str(err)
    return None


def run(name: str, cfg: dict, context: rm.Context) -> dict:
    """samples/s (sentences/s for the LSTM) of one workload on ``context``."""
    if name == "lstm":
        sentences = anchors.lstm_sentences(cfg["batches"])
        return anchors.raymod_lstm(sentences, cfg["batches"], cfg["time_cap"], context=context)
    symbol = anchors.mlp_symbol() if name == "mlp" else anchors.lenet_symbol()
    X, y = (anchors.mlp_data if name == "mlp" else anchors.lenet_data)(cfg["rows"])
    return anchors.raymod_classifier(symbol, X, y, cfg["batch"], cfg["lr"], cfg["epochs"],
                                     context=context)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="mlp,lenet,lstm")
    parser.add_argument("--quick", action="store_true", help="small runs (a smoke test)")
    parser.add_argument("--json-out", help="also write the summary JSON here")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - set(FULL))
    if unknown:
        parser.error(f"--only: unknown workload(s) {unknown}; expected some of {sorted(FULL)}")
    configs = QUICK if args.quick else FULL

    missing = gpu_missing()
    print(f"BLAS: {blas_kernel()}")
    print("GPU: " + (f"none, the GPU column is skipped ({missing})" if missing else
                     f"CuPy {getattr(rm.gpu(0).xp, '__version__', '(stand-in)')}, "
                     f"{rm.context.num_gpus()} device(s)"))
    rows = {}
    for name in names:
        row = {}
        for device, context in (("cpu", rm.cpu()), ("gpu", rm.gpu(0))):
            if device == "gpu" and missing:
                continue
            result = run(name, configs[name], context)
            emit(bench="gpu", workload=name, device=device, **result)
            row[device] = result["value"]
        if "gpu" in row:
            row["gpu_over_cpu"] = row["gpu"] / row["cpu"]
        rows[name] = row

    summary = {"bench": "gpu", "quick": args.quick, "blas": blas_kernel(),
               "gpu": None if missing else "gpu(0)", "gpu_skipped_because": missing,
               "samples_per_s": rows}
    print(json.dumps(summary))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(summary, indent=1))
    print(f"\n{'workload':<8} {'cpu samples/s':>14} {'gpu samples/s':>14} {'gpu / cpu':>10}")
    for name, row in rows.items():
        gpu = f"{row['gpu']:14.1f}" if "gpu" in row else f"{'skipped':>14}"
        ratio = f"{row['gpu_over_cpu']:9.2f}x" if "gpu" in row else f"{'-':>10}"
        print(f"{name:<8} {row['cpu']:14.1f} {gpu} {ratio}")


if __name__ == "__main__":
    main()
