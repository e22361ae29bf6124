"""`raymod im2rec`: lists and packs folders of images as MXNet's tools/im2rec.py does."""
import io

import numpy as np
import pytest
from PIL import Image

from raymod import recordio
from raymod.cli import main


def make_folder(root):
    rng = np.random.default_rng(0)
    files = {}
    for label, cls in enumerate(["cat", "dog"]):
        (root / cls).mkdir(parents=True)
        for i in range(3):
            img = rng.integers(0, 255, size=(10 + i, 14, 3), dtype=np.uint8)
            path = root / cls / f"{i}.png"
            Image.fromarray(img).save(path)
            files[f"{cls}/{i}.png"] = (label, img)
    (root / "notes.txt").write_text("not an image")
    return files


def test_list_then_pack_pass_through(tmp_path, capsys):
    files = make_folder(tmp_path / "img")
    prefix = str(tmp_path / "train")
    assert main(["im2rec", "--list", "--recursive", "--no-shuffle", prefix,
                 str(tmp_path / "img")]) == 0
    lines = (tmp_path / "train.lst").read_text().splitlines()
    assert lines == [f"{i}\t{files[p][0]:f}\t{p}" for i, p in enumerate(sorted(files))]
    assert main(["im2rec", "--pass-through", prefix, str(tmp_path / "img")]) == 0
    assert "6 records" in capsys.readouterr().out
    rec = recordio.MXIndexedRecordIO(prefix + ".idx", prefix + ".rec", "r")
    assert rec.keys == list(range(6))
    for i, rel in enumerate(sorted(files)):
        header, payload = recordio.unpack(rec.read_idx(i))
        assert header.label == files[rel][0] and header.id == i
        assert payload == (tmp_path / "img" / rel).read_bytes()


def test_pack_resizes_and_reencodes(tmp_path):
    files = make_folder(tmp_path / "img")
    prefix = str(tmp_path / "all")
    main(["im2rec", "--list", "--recursive", prefix, str(tmp_path / "img")])
    assert main(["im2rec", "--resize", "8", "--encoding", ".png", "--num-thread", "2", prefix,
                 str(tmp_path / "img")]) == 0
    rec = recordio.MXIndexedRecordIO(prefix + ".idx", prefix + ".rec", "r")
    listed = {int(line.split("\t")[0]): line.split("\t")[-1]
              for line in (tmp_path / "all.lst").read_text().splitlines()}
    for key in rec.keys:
        header, img = recordio.unpack_img(rec.read_idx(key))
        h, w, _ = files[listed[key]][1].shape
        assert img.shape == (8, w * 8 // h, 3)  # shorter edge (height) to 8
        assert header.label == files[listed[key]][0]
        _, payload = recordio.unpack(rec.read_idx(key))
        assert Image.open(io.BytesIO(payload)).format == "PNG"


def test_errors_are_one_line(tmp_path, capsys):
    assert main(["im2rec", str(tmp_path / "x"), str(tmp_path / "missing")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    (tmp_path / "img").mkdir()
    assert main(["im2rec", str(tmp_path / "x"), str(tmp_path / "img")]) == 2
    assert "no list to pack" in capsys.readouterr().err
    (tmp_path / "x.lst").write_text("0\tcat.png\n")
    assert main(["im2rec", str(tmp_path / "x"), str(tmp_path / "img")]) == 1
    assert "x.lst:1: expected" in capsys.readouterr().err
