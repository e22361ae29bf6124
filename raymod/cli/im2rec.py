"""``raymod im2rec``: make an image list or pack one into RecordIO, as MXNet's im2rec.py does.

    raymod im2rec --list --recursive data/train images/      # data/train.lst, one label per folder
    raymod im2rec data/train images/ --resize 64             # data/train.rec + data/train.idx

A ``.lst`` line is ``index<TAB>label[<TAB>label...]<TAB>relative path``. Packing writes every
line's image as one record keyed by its index, with an :class:`~raymod.recordio.IRHeader`
holding the first label (all of them with ``--pack-label``); images are re-encoded with
Pillow unless ``--pass-through`` copies their bytes as they are.
"""
from __future__ import annotations

import argparse
import io
import os
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

from .argtypes import nonnegative_int, positive_int
from .errors import CLIError, one_line

EXTS = (".jpeg", ".jpg", ".png")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``im2rec`` subcommand's options (MXNet's names)."""
    p = sub.add_parser(
        "im2rec", help="make a .lst of a folder of images, or pack a .lst into .rec/.idx",
        description="With --list, write PREFIX.lst listing the images under ROOT; without, "
                    "pack PREFIX.lst (or every PREFIX*.lst) into PREFIX.rec and PREFIX.idx.")
    p.add_argument("prefix", metavar="PREFIX", help="the .lst/.rec path without extension")
    p.add_argument("root", metavar="ROOT", help="the folder the images are in")
    p.add_argument("--list", action="store_true", help="make the list instead of packing")
    p.add_argument("--exts", nargs="+", default=list(EXTS), help="image extensions to list")
    p.add_argument("--recursive", action="store_true",
                   help="walk sub-folders, one label per sub-folder (sorted names)")
    p.add_argument("--no-shuffle", dest="shuffle", action="store_false",
                   help="keep the listed order (default: shuffled, seed 100)")
    p.add_argument("--train-ratio", type=float, default=1.0,
                   help="share of images in PREFIX_train.lst when below 1 (default 1)")
    p.add_argument("--test-ratio", type=float, default=0.0,
                   help="share of images in PREFIX_test.lst (default 0)")
    p.add_argument("--pass-through", action="store_true",
                   help="pack the image files' bytes as they are")
    p.add_argument("--resize", type=nonnegative_int, default=0,
                   help="resize the shorter edge to this many pixels (0: keep)")
    p.add_argument("--center-crop", action="store_true", help="crop the centre square")
    p.add_argument("--quality", type=nonnegative_int, default=95,
                   help="JPEG quality, or PNG compression level 0-9 (default 95)")
    p.add_argument("--num-thread", type=positive_int, default=1,
                   help="encoding threads (default 1)")
    p.add_argument("--color", type=int, default=1, choices=(-1, 0, 1),
                   help="1 colour, 0 grayscale, -1 as stored (default 1)")
    p.add_argument("--encoding", default=".jpg", choices=(".jpg", ".png"))
    p.add_argument("--pack-label", action="store_true",
                   help="store every label of a line (default: only the first)")
    p.set_defaults(func=_cmd_im2rec)


def list_images(root: str, recursive: bool, exts: tuple) -> Iterator[tuple[int, str, float]]:
    """``(index, relative path, label)`` of every image under ``root``: with ``recursive``,
    one label per sub-folder in sorted order; else every file of ``root`` with label 0."""
    exts = tuple(e.lower() for e in exts)
    i = 0
    if not recursive:
        for name in sorted(os.listdir(root)):
            if os.path.isfile(os.path.join(root, name)) and name.lower().endswith(exts):
                yield i, name, 0.0
                i += 1
        return
    labels: dict[str, int] = {}
    for folder, dirs, files in os.walk(root, followlinks=True):
        dirs.sort()
        for name in sorted(files):
            if name.lower().endswith(exts):
                label = labels.setdefault(os.path.relpath(folder, root), len(labels))
                yield i, os.path.relpath(os.path.join(folder, name), root), float(label)
                i += 1


def write_list(path: str, items: list) -> None:
    """Write ``(index, path, label...)`` items as ``.lst`` lines."""
    with open(path, "w") as f:
        for index, rel, *labels in items:
            f.write("\t".join([str(index), *(f"{x:f}" for x in labels), rel]) + "\n")


def _make_lists(args: argparse.Namespace) -> None:
    items = list(list_images(args.root, args.recursive, tuple(args.exts)))
    if not items:  # an empty .lst would only fail later, at packing or training
        where = "under" if args.recursive else "directly in (without --recursive)"
        raise CLIError(f"no image {where} ROOT {args.root!r} has an extension of --exts "
                       f"{' '.join(args.exts)}: no list written", status=2)
    if args.shuffle:
        random.Random(100).shuffle(items)
    n = len(items)
    n_test = int(n * args.test_ratio)
    n_train = int(n * args.train_ratio)
    if args.test_ratio:
        write_list(args.prefix + "_test.lst", items[:n_test])
    if n_test + n_train < n:
        write_list(args.prefix + "_val.lst", items[n_test + n_train:])
    write_list(args.prefix + ("_train.lst" if args.train_ratio < 1 else ".lst"),
               items[n_test:n_test + n_train])


def encode_item(args: argparse.Namespace, index: int, rel: str, labels: list[float]) -> bytes:
    """One ``.lst`` line's record: its header and its (re-encoded) image."""
    from .. import recordio
    Image = recordio.pillow()
    label = labels if args.pack_label and len(labels) > 1 else labels[0]
    header = recordio.IRHeader(0, label, index, 0)
    with open(os.path.join(args.root, rel), "rb") as f:
        raw = f.read()
    if args.pass_through:
        return recordio.pack(header, raw)
    img = Image.open(io.BytesIO(raw))
    img = img.convert({1: "RGB", 0: "L"}.get(args.color, img.mode))
    if args.center_crop:
        side = min(img.size)
        left, top = (img.width - side) // 2, (img.height - side) // 2
        img = img.crop((left, top, left + side, top + side))
    if args.resize:
        w, h = img.size
        size = ((args.resize, h * args.resize // w) if w < h else
                (w * args.resize // h, args.resize))
        img = img.resize(size, Image.BILINEAR)
    out = io.BytesIO()
    if args.encoding == ".jpg":
        img.save(out, "JPEG", quality=args.quality)
    else:
        img.save(out, "PNG", compress_level=min(args.quality, 9))
    return recordio.pack(header, out.getvalue())


def _pack(args: argparse.Namespace, lst: str) -> int:
    from .. import recordio
    prefix = lst[:-len(".lst")]
    try:
        items = [(index, rel, labels) for index, labels, rel in recordio.read_image_list(lst)]
    except ValueError as err:
        raise CLIError(str(err)) from None
    rec = recordio.MXIndexedRecordIO(prefix + ".idx", prefix + ".rec", "w")
    try:
        with ThreadPoolExecutor(args.num_thread) as pool:
            # map keeps the list's order, so the file is the same however many threads
            for (index, _, _), record in zip(items, pool.map(
                    lambda item: encode_item(args, *item), items)):
                rec.write_idx(index, record)
    except (OSError, ValueError) as err:
        raise CLIError(f"packing {lst}: {one_line(err)}") from None
    finally:
        rec.close()
    print(f"{prefix}.rec: {len(items)} records")
    return len(items)


def _cmd_im2rec(args: argparse.Namespace) -> int:
    if not os.path.isdir(args.root):
        raise CLIError(f"ROOT {args.root!r} is not a folder", status=2)
    if args.list:
        _make_lists(args)
        return 0
    folder, base = os.path.split(os.path.abspath(args.prefix))
    if os.path.isfile(args.prefix + ".lst"):
        lists = [args.prefix + ".lst"]
    else:
        lists = sorted(os.path.join(folder, n) for n in os.listdir(folder or ".")
                       if n.startswith(base) and n.endswith(".lst"))
    if not lists:
        raise CLIError(f"no list to pack: {args.prefix}.lst is missing (make one with --list)",
                       status=2)
    for lst in lists:
        _pack(args, lst)
    return 0
