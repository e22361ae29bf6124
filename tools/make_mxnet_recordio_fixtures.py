"""Make the RecordIO / CSV / LibSVM fixtures with MXNet 1.9.1 itself.

Runs under the Python that has MXNet 1.9.1 and Pillow (not raymod's environment):

    /tmp/mxvenv/bin/pip install Pillow
    OMP_NUM_THREADS=2 /tmp/mxvenv/bin/python tools/make_mxnet_recordio_fixtures.py

Writes tests/fixtures/mxnet/recordio/ (overwriting):

    images.rec, images.idx     200 small JPEGs (20x24, Pillow-encoded, quality 90), labels
                               i % 10, written by mx.recordio.MXIndexedRecordIO + mx.recordio.pack
    multilabel.rec/.idx        12 records with 3 float labels each (IRHeader flag 3)
    magic.rec                  records whose bytes hold the RecordIO magic word (written in parts)
    records.json               what MXNet reads back: headers, labels, sha256 of every record
    iter.npz, iter.json        ImageRecordIter batches without random augmentation, and the
                               statistics of its random augmentations (mirror rate, crop offsets)
    table.csv, table_label.csv, sparse.libsvm, sparse_label.libsvm, table.npz
                               CSVIter / LibSVMIter inputs and MXNet's batches of them

Every draw is seeded, so re-running gives the same files.
"""
import hashlib
import io
import json
import os

import numpy as np
import mxnet as mx
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "mxnet", "recordio")
NUM_IMAGES, HEIGHT, WIDTH = 200, 20, 24
MAGIC = (0xced7230a).to_bytes(4, "little")


def synthetic_image(rng, i):
    """A smooth colour pattern plus a little noise, so JPEG keeps it close."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, size=3)
    img = np.stack([127 + 100 * np.sin(x / (3 + c) + y / (4 + i % 5) + phase[c])
                    for c in range(3)], axis=-1)
    img += rng.normal(0, 6, size=img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def jpeg(img):
    out = io.BytesIO()
    Image.fromarray(img).save(out, "JPEG", quality=90)
    return out.getvalue()


def write_images():
    rng = np.random.default_rng(26)
    rec = mx.recordio.MXIndexedRecordIO(os.path.join(OUT, "images.idx"),
                                        os.path.join(OUT, "images.rec"), "w")
    for i in range(NUM_IMAGES):
        header = mx.recordio.IRHeader(0, float(i % 10), i, 0)
        rec.write_idx(i, mx.recordio.pack(header, jpeg(synthetic_image(rng, i))))
    rec.close()
    rec = mx.recordio.MXIndexedRecordIO(os.path.join(OUT, "multilabel.idx"),
                                        os.path.join(OUT, "multilabel.rec"), "w")
    for i in range(12):
        label = rng.uniform(-1, 1, size=3).astype(np.float32)
        rec.write_idx(i, mx.recordio.pack(mx.recordio.IRHeader(0, label, i, 7),
                                          jpeg(synthetic_image(rng, i))))
    rec.close()
    # the magic word at aligned and unaligned places, at the start, the end, twice in a row
    payloads = [MAGIC, b"ab" + MAGIC + b"cd", b"abcd" + MAGIC + b"xyz", MAGIC + MAGIC,
                b"1234" + MAGIC + b"5678" + MAGIC, b"", b"x", b"abc" + MAGIC + b"abcd" + MAGIC]
    rec = mx.recordio.MXRecordIO(os.path.join(OUT, "magic.rec"), "w")
    for p in payloads:
        rec.write(p)
    rec.close()
    return payloads


def read_back(payloads):
    out = {"images": [], "multilabel": [], "magic": [p.hex() for p in payloads]}
    for name in ("images", "multilabel"):
        rec = mx.recordio.MXIndexedRecordIO(os.path.join(OUT, f"{name}.idx"),
                                            os.path.join(OUT, f"{name}.rec"), "r")
        for key in rec.keys:
            s = rec.read_idx(key)
            header, img = mx.recordio.unpack(s)
            out[name].append({"key": key, "flag": header.flag, "id": header.id,
                              "id2": header.id2, "sha256": hashlib.sha256(s).hexdigest(),
                              "payload_sha256": hashlib.sha256(img).hexdigest(),
                              "label": np.asarray(header.label, np.float64).ravel().tolist()})
    rec = mx.recordio.MXRecordIO(os.path.join(OUT, "magic.rec"), "r")
    assert [rec.read() for _ in payloads] == payloads and rec.read() is None
    return out


# ImageRecordIter without random augmentation: name -> arguments
PLAIN = {
    "full": dict(data_shape=(3, HEIGHT, WIDTH)),
    "center": dict(data_shape=(3, 16, 16)),
    "resize": dict(data_shape=(3, 12, 12), resize=14),
    "normalized": dict(data_shape=(3, 16, 20), mean_r=123.68, mean_g=116.28, mean_b=103.53,
                       std_r=58.395, std_g=57.12, std_b=57.375),
    "scaled": dict(data_shape=(3, 16, 16), scale=1 / 255.0, mean_r=10, mean_g=20, mean_b=30),
    "pad": dict(data_shape=(3, 24, 28), pad=2, fill_value=7),
    "gray": dict(data_shape=(1, 16, 16)),
}


def image_iter(**kwargs):
    args = dict(path_imgrec=os.path.join(OUT, "images.rec"),
                path_imgidx=os.path.join(OUT, "images.idx"), batch_size=50, shuffle=False,
                preprocess_threads=1, prefetch_buffer=1)
    args.update(kwargs)
    return mx.io.ImageRecordIter(**args)


def all_batches(it):
    data, label, pads = [], [], []
    for batch in it:
        data.append(batch.data[0].asnumpy())
        label.append(batch.label[0].asnumpy())
        pads.append(batch.pad)
    return np.concatenate(data), np.concatenate(label), pads


def iter_fixtures():
    arrays, meta = {}, {"plain": {}, "stats": {}}
    for name, kwargs in PLAIN.items():
        data, label, pads = all_batches(image_iter(**kwargs))
        # the first two batches (fixture size); whole pixel values as uint8
        exact = np.array_equal(data, np.round(data)) and data.min() >= 0 and data.max() <= 255
        arrays[f"{name}_data"] = data[:100].astype(np.uint8) if exact else data[:100]
        arrays[f"{name}_label"] = label
        meta["plain"][name] = {"args": kwargs, "pads": pads}
    full = all_batches(image_iter(**PLAIN["full"]))[0]
    # mirror: which outputs equal the flipped input, over 4 epochs
    it = image_iter(data_shape=(3, HEIGHT, WIDTH), rand_mirror=True, seed=1)
    flips = []
    for _ in range(4):
        data, _, _ = all_batches(it)
        flips.extend(bool(np.array_equal(d, f[:, :, ::-1]) and not np.array_equal(d, f))
                     for d, f in zip(data, full))
        it.reset()
    meta["stats"]["mirror_rate"] = float(np.mean(flips))
    meta["stats"]["mirror_samples"] = len(flips)
    # random crop of 16x16 out of 20x24: where each crop came from
    it = image_iter(data_shape=(3, 16, 16), rand_crop=True, seed=2)
    offsets = []
    for _ in range(4):
        data, _, _ = all_batches(it)
        for d, f in zip(data, full):
            hits = [(y, x) for y in range(HEIGHT - 15) for x in range(WIDTH - 15)
                    if np.array_equal(d, f[:, y:y + 16, x:x + 16])]
            offsets.append(hits[0] if len(hits) == 1 else None)
        it.reset()
    found = [o for o in offsets if o is not None]
    meta["stats"]["crop_offsets"] = [list(map(int, o)) for o in found]
    meta["stats"]["crop_samples"] = len(offsets)
    # same seed, same batches (MXNet's own claim)
    a = all_batches(image_iter(data_shape=(3, 16, 16), rand_crop=True, rand_mirror=True,
                               seed_aug=5))[0]
    b = all_batches(image_iter(data_shape=(3, 16, 16), rand_crop=True, rand_mirror=True,
                               seed_aug=5))[0]
    meta["stats"]["seed_aug_repeats"] = bool(np.array_equal(a, b))
    np.savez_compressed(os.path.join(OUT, "iter.npz"), **arrays)
    with open(os.path.join(OUT, "iter.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def table_fixtures():
    rng = np.random.default_rng(7)
    table = rng.integers(-50, 50, size=(23, 6)).astype(np.float32) / 4
    labels = rng.integers(0, 3, size=(23, 2)).astype(np.float32)
    np.savetxt(os.path.join(OUT, "table.csv"), table, delimiter=",", fmt="%g")
    np.savetxt(os.path.join(OUT, "table_label.csv"), labels, delimiter=",", fmt="%g")
    lines, label_lines = [], []
    for i in range(17):
        cols = sorted(rng.choice(9, size=rng.integers(0, 5), replace=False))
        lines.append(" ".join([f"{i % 4}"] + [f"{c}:{rng.integers(1, 9) / 2:g}" for c in cols]))
        cols = sorted(rng.choice(3, size=rng.integers(0, 3), replace=False))
        label_lines.append(" ".join(["0"] + [f"{c}:{rng.integers(1, 9):g}" for c in cols]))
    for name, text in (("sparse.libsvm", lines), ("sparse_label.libsvm", label_lines)):
        with open(os.path.join(OUT, name), "w") as f:
            f.write("\n".join(text) + "\n")
    arrays = {}
    cases = {
        "csv_b5": mx.io.CSVIter(data_csv=os.path.join(OUT, "table.csv"), data_shape=(6,),
                                label_csv=os.path.join(OUT, "table_label.csv"),
                                label_shape=(2,), batch_size=5),
        "csv_b5_noround": mx.io.CSVIter(data_csv=os.path.join(OUT, "table.csv"),
                                        data_shape=(2, 3), batch_size=5, round_batch=False),
        "csv_part1of2": mx.io.CSVIter(data_csv=os.path.join(OUT, "table.csv"), data_shape=(6,),
                                      batch_size=4, part_index=1, num_parts=2),
        "libsvm_b4": mx.io.LibSVMIter(data_libsvm=os.path.join(OUT, "sparse.libsvm"),
                                      data_shape=(9,), batch_size=4),
        "libsvm_labels_b5": mx.io.LibSVMIter(
            data_libsvm=os.path.join(OUT, "sparse.libsvm"), data_shape=(9,),
            label_libsvm=os.path.join(OUT, "sparse_label.libsvm"), label_shape=(3,),
            batch_size=5),
    }
    meta = {}
    for name, it in cases.items():
        for epoch in range(2):
            data, label, pads = [], [], []
            for batch in it:
                data.append(batch.data[0].asnumpy())
                label.append(batch.label[0].asnumpy())
                pads.append(batch.pad)
            arrays[f"{name}_e{epoch}_data"] = np.stack(data)
            arrays[f"{name}_e{epoch}_label"] = np.stack(label)
            meta[f"{name}_e{epoch}"] = pads
            it.reset()
    np.savez_compressed(os.path.join(OUT, "table.npz"), **arrays)
    with open(os.path.join(OUT, "table.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def main():
    os.makedirs(OUT, exist_ok=True)
    payloads = write_images()
    with open(os.path.join(OUT, "records.json"), "w") as f:
        json.dump(read_back(payloads), f, indent=0)
        f.write("\n")
    iter_fixtures()
    table_fixtures()
    print("wrote", OUT, sorted(os.listdir(OUT)))


if __name__ == "__main__":
    main()
