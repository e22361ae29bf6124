"""Images per second decoded and augmented by one process (what each Ray worker does):
raymod's ImageRecordIter against MXNet 1.9.1's on the same .rec, side by side, one run.

    python bench/bench_recordio.py [--images 2000] [--size 96] [--epochs 2] [--threads 1,2]

Writes a .rec of synthetic JPEGs (``--size`` square, quality 90) to a temporary folder, then
times full epochs of each configuration (the first epoch is a warm-up) in this process (with
the image backend raymod picks: OpenCV, or Pillow without cv2 or with
``RAYMOD_IMAGE_BACKEND=pillow``) and, with ``--mxnet-python`` (default
/tmp/mxvenv/bin/python, skipped when absent), in MXNet.
Both sides run with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset. Prints one JSON line per
figure, then a table.

Configurations (data_shape 3 x (size - 16) x (size - 16), batch 64):
  crop_mirror   rand_crop, rand_mirror, mean/std normalisation (the CIFAR/ImageNet recipe)
  heavy         crop_mirror plus max_random_scale 1.2, max_rotate_angle 10, max_shear_ratio
                0.1 and random_h/s/l 10/20/20 (the affine warp and HLS jitter)
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
from bench.records import emit  # noqa: E402

CONFIGS = {
    "crop_mirror": dict(rand_crop=True, rand_mirror=True, mean_r=123.68, mean_g=116.28,
                        mean_b=103.53, std_r=58.395, std_g=57.12, std_b=57.375),
    "heavy": dict(rand_crop=True, rand_mirror=True, mean_r=123.68, mean_g=116.28,
                  mean_b=103.53, std_r=58.395, std_g=57.12, std_b=57.375,
                  max_random_scale=1.2, max_rotate_angle=10, max_shear_ratio=0.1,
                  random_h=10, random_s=20, random_l=20, fill_value=0),
}

# what the MXNet side runs (its own process, its own Python)
MXNET_SCRIPT = r"""
import json, os, sys, time
import mxnet as mx
rec, shape, epochs, threads, configs = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), \
    json.loads(sys.argv[4]), json.loads(sys.argv[5])
for name, kwargs in configs.items():
    for t in threads:
        it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=shape, batch_size=64,
                                   preprocess_threads=t, shuffle=False, seed=0, **kwargs)
        rates = []
        for epoch in range(epochs + 1):
            n, t0 = 0, time.perf_counter()
            for batch in it:
                batch.data[0].wait_to_read()
                n += batch.data[0].shape[0] - batch.pad
            if epoch:
                rates.append(n / (time.perf_counter() - t0))
            it.reset()
        print(json.dumps({"config": name, "threads": t, "images_per_s": sorted(rates)[len(rates) // 2]}))
"""


def blas_kernels() -> list:
    """The BLAS libraries threadpoolctl sees in this process (kernel and threads)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return ["threadpoolctl not installed"]
    return [{k: i.get(k) for k in ("internal_api", "architecture", "num_threads")}
            for i in threadpool_info() if i.get("user_api") == "blas"]


def write_rec(folder: str, images: int, size: int) -> str:
    """``images`` synthetic JPEGs of ``size`` x ``size`` in ``folder/bench.rec``."""
    from raymod import recordio
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:size, 0:size]
    path = os.path.join(folder, "bench.rec")
    rec = recordio.MXRecordIO(path, "w")
    for i in range(images):
        phase = rng.uniform(0, 6.3, size=3)
        img = np.stack([127 + 100 * np.sin(x / (5 + c) + y / 7 + phase[c]) for c in range(3)],
                       axis=-1) + rng.normal(0, 8, size=(size, size, 3))
        img = np.clip(img, 0, 255).astype(np.uint8)
        rec.write(recordio.pack_img((0, float(i % 10), i, 0), img, quality=90))
    rec.close()
    return path


def raymod_rates(rec: str, shape: tuple, epochs: int, threads: list[int]) -> list[dict]:
    import raymod as rm
    out = []
    for name, kwargs in CONFIGS.items():
        for t in threads:
            it = rm.io.ImageRecordIter(path_imgrec=rec, data_shape=shape, batch_size=64,
                                       preprocess_threads=t, **kwargs)
            rates = []
            for epoch in range(epochs + 1):
                n, t0 = 0, time.perf_counter()
                for batch in it:
                    n += batch.data[0].shape[0] - batch.pad
                if epoch:
                    rates.append(n / (time.perf_counter() - t0))
                it.reset()
            out.append({"config": name, "threads": t,
                        "images_per_s": sorted(rates)[len(rates) // 2]})
    return out


def mxnet_rates(python: str, rec: str, shape: tuple, epochs: int,
                threads: list[int]) -> list[dict]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    proc = subprocess.run([python, "-c", MXNET_SCRIPT, rec, json.dumps(list(shape)),
                           str(epochs), json.dumps(threads), json.dumps(CONFIGS)],
                          capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode:
        raise RuntimeError(f"the MXNet side failed:\n{proc.stderr[-2000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--size", type=int, default=96, help="image side in pixels")
    ap.add_argument("--epochs", type=int, default=2, help="timed epochs (after a warm-up)")
    ap.add_argument("--threads", default="1,2", help="preprocess_threads values")
    ap.add_argument("--mxnet-python", default="/tmp/mxvenv/bin/python")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    shape = (3, args.size - 16, args.size - 16)
    from raymod.io import _cv
    backend = _cv.backend()  # opencv, or pillow without cv2 (RAYMOD_IMAGE_BACKEND forces one)
    emit(kind="machine", blas=blas_kernels(), cpus=os.cpu_count(), image_backend=backend)
    with tempfile.TemporaryDirectory() as folder:
        rec = write_rec(folder, args.images, args.size)
        figures = {("raymod",) + (r["config"], r["threads"]): r["images_per_s"]
                   for r in raymod_rates(rec, shape, args.epochs, threads)}
        if os.path.exists(args.mxnet_python):
            for r in mxnet_rates(args.mxnet_python, rec, shape, args.epochs, threads):
                figures[("mxnet", r["config"], r["threads"])] = r["images_per_s"]
    for (side, config, t), rate in sorted(figures.items()):
        emit(kind="decode", side=side, config=config, threads=t, images=args.images,
             image_size=args.size, data_shape=list(shape), images_per_s=round(rate, 1))
    print(f"\n| configuration | threads | raymod ({backend}) images/s | MXNet 1.9.1 images/s |")
    print("|---|---|---|---|")
    for config in CONFIGS:
        for t in threads:
            ours, theirs = figures.get(("raymod", config, t)), figures.get(("mxnet", config, t))
            print(f"| {config} | {t} | {ours:,.0f} | "
                  f"{'-' if theirs is None else f'{theirs:,.0f}'} |")


if __name__ == "__main__":
    main()
