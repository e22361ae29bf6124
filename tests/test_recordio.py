"""rm.recordio against files MXNet 1.9.1 wrote (tests/fixtures/mxnet/recordio, made by
tools/make_mxnet_recordio_fixtures.py) and, when its venv is here, against MXNet itself."""
import hashlib
import json
import os
import pickle
import subprocess
from pathlib import Path

import numpy as np
import pytest

from raymod import recordio

FIXTURES = Path(__file__).parent / "fixtures" / "mxnet" / "recordio"
MXNET_PYTHON = "/tmp/mxvenv/bin/python"
EXPECTED = json.loads((FIXTURES / "records.json").read_text())


@pytest.mark.parametrize("name", ["images", "multilabel"])
def test_reads_mxnet_written_records_byte_for_byte(name):
    rec = recordio.MXIndexedRecordIO(str(FIXTURES / f"{name}.idx"),
                                     str(FIXTURES / f"{name}.rec"), "r")
    assert rec.keys == [e["key"] for e in EXPECTED[name]]
    for expected in EXPECTED[name]:
        s = rec.read_idx(expected["key"])
        assert hashlib.sha256(s).hexdigest() == expected["sha256"]
        header, payload = recordio.unpack(s)
        assert hashlib.sha256(payload).hexdigest() == expected["payload_sha256"]
        assert (header.flag, header.id, header.id2) == (expected["flag"], expected["id"],
                                                        expected["id2"])
        np.testing.assert_array_equal(np.ravel(header.label).astype(np.float32),
                                      np.float32(expected["label"]))
    rec.close()


def test_records_holding_the_magic_word_read_and_write_as_mxnet_does(tmp_path):
    payloads = [bytes.fromhex(h) for h in EXPECTED["magic"]]
    reader = recordio.MXRecordIO(str(FIXTURES / "magic.rec"), "r")
    assert [reader.read() for _ in payloads] == payloads
    assert reader.read() is None
    writer = recordio.MXRecordIO(str(tmp_path / "m.rec"), "w")
    for p in payloads:
        writer.write(p)
    writer.close()
    assert (tmp_path / "m.rec").read_bytes() == (FIXTURES / "magic.rec").read_bytes()


@pytest.mark.parametrize("name", ["images", "multilabel"])
def test_rewriting_gives_mxnets_bytes(tmp_path, name):
    """The same records written here give MXNet's .rec and .idx files exactly, so MXNet
    reads what raymod writes."""
    src = recordio.MXIndexedRecordIO(str(FIXTURES / f"{name}.idx"),
                                     str(FIXTURES / f"{name}.rec"), "r")
    out = recordio.MXIndexedRecordIO(str(tmp_path / "o.idx"), str(tmp_path / "o.rec"), "w")
    for key in src.keys:
        header, payload = recordio.unpack(src.read_idx(key))
        out.write_idx(key, recordio.pack(header, payload))
    out.close()
    assert (tmp_path / "o.rec").read_bytes() == (FIXTURES / f"{name}.rec").read_bytes()
    assert (tmp_path / "o.idx").read_bytes() == (FIXTURES / f"{name}.idx").read_bytes()


def test_pack_unpack_labels_of_every_width():
    rng = np.random.default_rng(0)
    for width in (1, 2, 7):
        label = rng.uniform(size=width).astype(np.float32)
        header, s = recordio.unpack(recordio.pack((0, label, 3, 4), b"content"))
        assert header.flag == width and (header.id, header.id2) == (3, 4) and s == b"content"
        np.testing.assert_array_equal(header.label, label)
    header, s = recordio.unpack(recordio.pack(recordio.IRHeader(0, 2.5, 1, 0), b""))
    assert header == recordio.IRHeader(0, 2.5, 1, 0) and s == b""


def test_pack_img_and_unpack_img_keep_opencv_channel_order():
    img = np.zeros((6, 8, 3), np.uint8)
    img[..., 0] = 200  # blue, in OpenCV's BGR order
    s = recordio.pack_img((0, 1.0, 0, 0), img, img_fmt=".png")
    header, back = recordio.unpack_img(s)
    np.testing.assert_array_equal(back, img)
    _, gray = recordio.unpack_img(s, iscolor=0)
    assert gray.shape == (6, 8)
    _, lossy = recordio.unpack_img(recordio.pack_img((0, 1.0, 0, 0), img, quality=95))
    assert np.abs(lossy.astype(int) - img).max() <= 3


def test_pickled_reader_reopens_at_the_start():
    rec = recordio.MXIndexedRecordIO(str(FIXTURES / "images.idx"),
                                     str(FIXTURES / "images.rec"), "r")
    first = rec.read_idx(0)
    rec.read()
    copy = pickle.loads(pickle.dumps(rec))
    assert copy.read() == first and copy.read_idx(5) == rec.read_idx(5)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="flag must be 'r' or 'w'"):
        recordio.MXRecordIO("x.rec", "a")
    with pytest.raises(ValueError, match="magic"):
        recordio.MXRecordIO(str(FIXTURES / "table.csv"), "r").read()
    rec = recordio.MXIndexedRecordIO(str(FIXTURES / "images.idx"),
                                     str(FIXTURES / "images.rec"), "r")
    with pytest.raises(KeyError, match="key 999"):
        rec.read_idx(999)
    with pytest.raises(ValueError, match="open for reading"):
        rec.write(b"x")


def test_reads_a_pyarrow_fs_uri():
    rec = recordio.MXIndexedRecordIO(f"file://{FIXTURES}/images.idx",
                                     f"file://{FIXTURES}/images.rec", "r")
    assert hashlib.sha256(rec.read_idx(3)).hexdigest() == EXPECTED["images"][3]["sha256"]


@pytest.mark.skipif(not os.path.exists(MXNET_PYTHON), reason="needs MXNet 1.9.1's venv")
def test_mxnet_reads_what_raymod_writes(tmp_path):
    rng = np.random.default_rng(1)
    rec = recordio.MXIndexedRecordIO(str(tmp_path / "r.idx"), str(tmp_path / "r.rec"), "w")
    expected = []
    for i in range(30):
        label = float(i) if i % 2 else rng.uniform(size=3).astype(np.float32)
        payload = rng.bytes(int(rng.integers(0, 40))) + (b"\x0a\x23\xd7\xce" if i % 3 else b"")
        rec.write_idx(i, recordio.pack((0, label, i, 0), payload))
        expected.append((np.ravel(label).tolist(), payload.hex()))
    rec.close()
    script = (
        "import json, sys, numpy as np, mxnet as mx\n"
        f"r = mx.recordio.MXIndexedRecordIO({str(tmp_path / 'r.idx')!r}, "
        f"{str(tmp_path / 'r.rec')!r}, 'r')\n"
        "out = []\n"
        "for k in r.keys:\n"
        "    h, s = mx.recordio.unpack(r.read_idx(k))\n"
        "    out.append((np.ravel(h.label).tolist(), s.hex()))\n"
        "print(json.dumps(out))\n")
    got = subprocess.run([MXNET_PYTHON, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    got = json.loads(got.strip().splitlines()[-1])
    assert len(got) == len(expected)
    for (g_label, g_payload), (e_label, e_payload) in zip(got, expected):
        np.testing.assert_allclose(g_label, e_label, rtol=1e-6)
        assert g_payload == e_payload
