"""MXNet's RecordIO files, as ``mx.recordio``: ``.rec`` record files and their ``.idx`` index.

A ``.rec`` file is a sequence of records. Each record is written as one or more parts, every
part a 4-byte magic number ``0xced7230a``, a 4-byte little-endian word holding a 3-bit
continuation flag (top bits) and a 29-bit length, the part's bytes, and zero padding to a
multiple of 4 bytes. A record whose bytes contain the magic number at a 4-byte aligned
position is cut there into parts (flag 1 first, 2 middle, 3 last; 0 for a single part) and the
magic itself is left out, so a reader never mistakes data for a record start; reading puts it
back. The ``.idx`` file holds one ``key<TAB>byte offset`` line per record.

An image record (``pack`` / ``pack_img``) starts with an :class:`IRHeader` of 24 bytes
(``flag`` uint32, ``label`` float32, ``id`` and ``id2`` uint64); when ``flag`` is positive the
label is instead an array of ``flag`` float32 values that follows the header.

Files are local paths or ``pyarrow.fs`` URIs (``s3://...``, ``file://...``).
"""
from __future__ import annotations

import io
import numbers
import os
import struct
from collections import namedtuple
from typing import Any, Callable, Iterator

import numpy as np

from .io import _cv

__all__ = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img",
           "unpack_img", "RECORD_MAGIC"]

RECORD_MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", RECORD_MAGIC)
_LENGTH_BITS = 29
_MAX_LENGTH = (1 << _LENGTH_BITS) - 1
# continuation flags of a part: whole record, first, middle, last
_WHOLE, _FIRST, _MIDDLE, _LAST = 0, 1, 2, 3

IRHeader = namedtuple("IRHeader", ["flag", "label", "id", "id2"])
IRHeader.__doc__ = """The header of an image record.

Parameters
----------
flag : int
    0 for a single float label (in ``label``); n > 0 when ``n`` float32 labels follow the
    header (``label`` then holds them after :func:`unpack`).
label : float or numpy.ndarray
    The label(s).
id : int
    The record's id (im2rec writes the image's index).
id2 : int
    A second id, 0 unless set.
"""
_IR_FORMAT = "<IfQQ"
_IR_SIZE = struct.calcsize(_IR_FORMAT)


def _open_file(uri: str, mode: str) -> Any:
    """A binary file object for a local path or a ``pyarrow.fs`` URI (random access when read)."""
    if "://" not in uri:
        return open(uri, mode + "b")
    import pyarrow.fs as pafs
    fs, path = pafs.FileSystem.from_uri(uri)
    return fs.open_input_file(path) if mode == "r" else fs.open_output_stream(path)


def write_record(out: Any, buf: bytes) -> None:
    """Write ``buf`` as one record, in parts wherever it holds the magic number aligned."""
    size = len(buf)
    if size > _MAX_LENGTH:
        raise ValueError(f"a RecordIO record holds at most {_MAX_LENGTH} bytes; got {size}")
    start = 0
    hit = buf.find(_MAGIC_BYTES)
    while hit >= 0:
        if hit % 4 == 0 and hit + 4 <= size:
            flag = _FIRST if start == 0 else _MIDDLE
            out.write(_MAGIC_BYTES + struct.pack("<I", (flag << _LENGTH_BITS) | (hit - start)))
            out.write(buf[start:hit])
            start = hit + 4
            hit = buf.find(_MAGIC_BYTES, start)
        else:
            hit = buf.find(_MAGIC_BYTES, hit + 1)
    flag = _LAST if start else _WHOLE
    out.write(_MAGIC_BYTES + struct.pack("<I", (flag << _LENGTH_BITS) | (size - start)))
    out.write(buf[start:])
    out.write(b"\0" * (-size % 4))  # the parts before were whole words: pad the total


def read_record(src: Any) -> bytes | None:
    """Read one record from the current position of ``src``; None at the end of the file."""
    parts = []
    while True:
        head = src.read(8)
        if not head and not parts:
            return None
        if len(head) < 8:
            raise ValueError("RecordIO file ends inside a record header")
        magic, word = struct.unpack("<II", head)
        if magic != RECORD_MAGIC:
            raise ValueError(f"not a RecordIO record: magic {magic:#010x}, expected "
                             f"{RECORD_MAGIC:#010x}")
        flag, length = word >> _LENGTH_BITS, word & _MAX_LENGTH
        data = src.read(length + (-length % 4))
        if len(data) < length:
            raise ValueError(f"RecordIO file ends inside a record: {length} bytes announced, "
                             f"{len(data)} there")
        parts.append(data[:length])
        if flag in (_WHOLE, _LAST):
            return _MAGIC_BYTES.join(parts)


class _At:
    """A ``read(n)`` view of a random-access file from ``offset`` on, through ``pread(n,
    offset)``: no shared position, so threads can read one file at once. ``ahead`` holds
    bytes already read from ``offset`` on, served first."""

    def __init__(self, pread: Callable[[int, int], bytes], offset: int, ahead: bytes = b""):
        self.pread, self.offset, self.ahead = pread, offset, memoryview(ahead)

    def read(self, n: int) -> bytes:
        data, self.ahead = self.ahead[:n], self.ahead[n:]
        if len(data) < n:
            data = bytes(data) + self.pread(n - len(data), self.offset + len(data))
        self.offset += len(data)
        return data


def read_record_at(pread: Callable[[int, int], bytes], offset: int,
                   size_hint: int = 0) -> bytes:
    """The record starting at byte ``offset``, read with ``pread(n, offset)``; with
    ``size_hint`` (the bytes it likely spans, its headers included) in one read when it
    does."""
    ahead = pread(size_hint, offset) if size_hint > 8 else b""
    record = read_record(_At(pread, offset, ahead))
    if record is None:
        raise ValueError(f"no record at byte {offset}: the file ends there")
    return bytes(record)


def record_offsets(uri: str) -> list[int]:
    """The byte offset of every record of a ``.rec`` file, read from the part headers only."""
    offsets = []
    with _open_file(uri, "r") as f:
        pos, in_record = 0, False
        while True:
            head = f.read(8)
            if not head:
                return offsets
            if len(head) < 8:
                raise ValueError(f"{uri}: the file ends inside a record header at byte {pos}")
            magic, word = struct.unpack("<II", head)
            if magic != RECORD_MAGIC:
                raise ValueError(f"{uri}: not a RecordIO record at byte {pos} (magic "
                                 f"{magic:#010x})")
            flag, length = word >> _LENGTH_BITS, word & _MAX_LENGTH
            if not in_record:
                offsets.append(pos)
            in_record = flag in (_FIRST, _MIDDLE)
            pos += 8 + length + (-length % 4)
            f.seek(pos)


class MXRecordIO:
    """Read or write a ``.rec`` file record by record.

    Parameters
    ----------
    uri : str
        Path or ``pyarrow.fs`` URI of the file.
    flag : {'r', 'w'}
        Read or write (writing truncates the file).

    Examples
    --------
    >>> w = MXRecordIO("data.rec", "w")          # doctest: +SKIP
    >>> w.write(b"record 0"); w.close()          # doctest: +SKIP
    >>> MXRecordIO("data.rec", "r").read()       # doctest: +SKIP
    b'record 0'
    """

    def __init__(self, uri: str, flag: str):
        if flag not in ("r", "w"):
            raise ValueError(f"flag must be 'r' or 'w'; got {flag!r}")
        self.uri = os.fspath(uri)
        self.flag = flag
        self.handle = None
        self.pid = None
        self.is_open = False
        self.open()

    @property
    def writable(self) -> bool:
        """True when open for writing."""
        return self.flag == "w"

    def open(self) -> None:
        """Open the file (at its start)."""
        self.handle = _open_file(self.uri, self.flag)
        self.pid = os.getpid()
        self.is_open = True

    def close(self) -> None:
        """Close the file; reading or writing afterwards needs :meth:`open` again."""
        if self.is_open:
            self.handle.close()
            self.is_open = False
            self.pid = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to close with
            pass

    def __enter__(self) -> "MXRecordIO":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> dict:
        # a pickled reader carries its path and reopens on arrival (no file handle travels)
        state = self.__dict__.copy()
        state["handle"] = None
        state["pid"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.is_open:
            self.open()

    def _check_pid(self, allow_reset: bool = False) -> None:
        """A forked child reopens its own handle (the parent's position is not its own)."""
        if not self.is_open:
            raise ValueError(f"{self.uri} is closed; call open() first")
        if self.pid != os.getpid():
            if not allow_reset:
                raise RuntimeError("a RecordIO writer cannot be used from a forked process")
            self.open()

    def reset(self) -> None:
        """Go back to the start of the file (reopening it)."""
        self.close()
        self.open()

    def write(self, buf: bytes) -> None:
        """Append one record holding ``buf``."""
        if not self.writable:
            raise ValueError(f"{self.uri} is open for reading (flag 'r'), not writing")
        self._check_pid()
        write_record(self.handle, bytes(buf))

    def read(self) -> bytes | None:
        """The next record's bytes, or None at the end of the file."""
        if self.writable:
            raise ValueError(f"{self.uri} is open for writing (flag 'w'), not reading")
        self._check_pid(allow_reset=True)
        return read_record(self.handle)

    def tell(self) -> int:
        """Byte offset where the next record starts."""
        return self.handle.tell()


def read_index(idx_path: str, key_type: Callable = int) -> dict:
    """The ``key -> byte offset`` map of a ``.idx`` file, in file order."""
    index = {}
    with _open_file(idx_path, "r") as f:
        text = f.read().decode("utf-8")
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.strip().split("\t")
        if fields == [""]:
            continue
        if len(fields) != 2:
            raise ValueError(f"{idx_path}:{number}: expected 'key<TAB>offset', got {line!r}")
        index[key_type(fields[0])] = int(fields[1])
    return index


class MXIndexedRecordIO(MXRecordIO):
    """A ``.rec`` file with its ``.idx`` index: read any record by key, write with a key.

    Parameters
    ----------
    idx_path : str
        Path or URI of the index (one ``key<TAB>offset`` line per record).
    uri : str
        Path or URI of the record file.
    flag : {'r', 'w'}
        Read or write.
    key_type : callable, default int
        Turns the index's key text into a key.

    Attributes
    ----------
    idx : dict
        Key to byte offset.
    keys : list
        Keys in file order.
    """

    def __init__(self, idx_path: str, uri: str, flag: str, key_type: Callable = int):
        self.idx_path = os.fspath(idx_path)
        self.idx: dict = {}
        self.keys: list = []
        self.key_type = key_type
        self.fidx = None
        super().__init__(uri, flag)

    def open(self) -> None:
        """Open the record file and read (or start writing) the index."""
        super().open()
        self.idx, self.keys = {}, []
        if self.writable:
            self.fidx = _open_file(self.idx_path, "w")
        else:
            self.fidx = None
            self.idx = read_index(self.idx_path, self.key_type)
            self.keys = list(self.idx)

    def close(self) -> None:
        """Close both files."""
        if self.is_open and self.fidx is not None:
            self.fidx.close()
            self.fidx = None
        super().close()

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["fidx"] = None
        return state

    def seek(self, idx: Any) -> None:
        """Move to the record of key ``idx``."""
        if self.writable:
            raise ValueError(f"{self.uri} is open for writing; seek needs flag 'r'")
        self._check_pid(allow_reset=True)
        if idx not in self.idx:
            raise KeyError(f"key {idx!r} is not in {self.idx_path}")
        self.handle.seek(self.idx[idx])

    def read_idx(self, idx: Any) -> bytes:
        """The record of key ``idx``."""
        self.seek(idx)
        return self.read()

    def write_idx(self, idx: Any, buf: bytes) -> None:
        """Append a record under key ``idx`` (and its index line)."""
        key = self.key_type(idx)
        pos = self.tell()
        self.write(buf)
        self.fidx.write(f"{key}\t{pos}\n".encode("utf-8"))
        self.idx[key] = pos
        self.keys.append(key)


def read_image_list(path: str) -> Iterator[tuple[int, list[float], str]]:
    """``(index, labels, relative path)`` of every line of an image list (``.lst``:
    ``index<TAB>label[<TAB>label...]<TAB>path``), as im2rec writes them."""
    with open(path) as f:
        for number, line in enumerate(f, 1):
            fields = line.rstrip("\n").split("\t")
            try:
                if len(fields) < 3:
                    raise ValueError("expected 'index<TAB>label...<TAB>path'")
                yield int(fields[0]), [float(x) for x in fields[1:-1]], fields[-1]
            except ValueError as err:
                raise ValueError(f"{path}:{number}: {err}, got {line.strip()!r}") from None


def pack(header: Any, s: bytes) -> bytes:
    """An image record's bytes: ``header`` (an :class:`IRHeader` or 4-tuple) then ``s``.

    A label that is not a single number is stored as float32 values after the header, with
    ``flag`` set to their count.
    """
    header = IRHeader(*header)
    if not isinstance(header.label, numbers.Number):
        label = np.asarray(header.label, dtype=np.float32).ravel()
        header = header._replace(flag=label.size, label=0)
        s = label.tobytes() + bytes(s)
    return struct.pack(_IR_FORMAT, *header) + bytes(s)


def unpack(s: bytes) -> tuple[IRHeader, bytes]:
    """Split an image record into its :class:`IRHeader` and payload (labels taken out)."""
    if len(s) < _IR_SIZE:
        raise ValueError(f"an image record starts with a {_IR_SIZE}-byte header; got "
                         f"{len(s)} bytes")
    header = IRHeader(*struct.unpack(_IR_FORMAT, s[:_IR_SIZE]))
    s = s[_IR_SIZE:]
    if header.flag > 0:
        header = header._replace(label=np.frombuffer(s, np.float32, header.flag))
        s = s[header.flag * 4:]
    return header, s


# MXNet's iscolor codes (OpenCV's imread flags): -1 as stored, 0 gray, 1 colour
_COLOR_MODES = {-1: None, 0: "L", 1: "RGB"}


def pillow() -> Any:
    """Pillow's ``Image`` module, or an ImportError saying how to install it."""
    try:
        from PIL import Image
    except ImportError as err:
        raise ImportError("decoding and encoding images needs Pillow (or OpenCV): pip install "
                          "'raymod[image]' (or pip install Pillow)") from err
    return Image


def decode_image(buf: bytes, iscolor: int = -1, bgr: bool = True) -> np.ndarray:
    """Decode JPEG/PNG bytes into an ``(h, w, c)`` or ``(h, w)`` uint8 array, with OpenCV
    (``cv2.imdecode``, as MXNet) or else Pillow (see :mod:`raymod.io._cv`).

    ``iscolor`` is OpenCV's flag: 1 colour, 0 gray, -1 as stored (gray, colour or colour
    with alpha). ``bgr`` gives OpenCV's channel order (what ``mx.recordio.unpack_img``
    returns). EXIF orientation is not applied.
    """
    if iscolor not in _COLOR_MODES:
        raise ValueError(f"iscolor must be -1, 0 or 1; got {iscolor!r}")
    cv2 = _cv.opencv()
    if cv2 is not None:
        arr = _cv_decode(cv2, buf, iscolor, bgr)
        if arr is not None:
            return arr
    return _pillow_decode(buf, iscolor, bgr)


def _cv_decode(cv2: Any, buf: bytes, iscolor: int, bgr: bool) -> np.ndarray | None:
    """OpenCV's decode; None where Pillow's rules apply instead (an image OpenCV cannot
    read, or one stored with more than 8 bits or with a gray alpha channel)."""
    data = np.frombuffer(buf, np.uint8)
    if iscolor == 1:
        rgb = getattr(cv2, "IMREAD_COLOR_RGB", None)  # newer OpenCV: RGB from the decoder
        if not bgr and rgb is not None:
            return cv2.imdecode(data, rgb | cv2.IMREAD_IGNORE_ORIENTATION)
        flag = cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION
    else:
        flag = cv2.IMREAD_GRAYSCALE | cv2.IMREAD_IGNORE_ORIENTATION if iscolor == 0 \
            else cv2.IMREAD_UNCHANGED
    arr = cv2.imdecode(data, flag)
    if arr is None or arr.dtype != np.uint8 or (arr.ndim == 3 and arr.shape[2] == 2):
        return None
    if not bgr and arr.ndim == 3:
        arr = cv2.cvtColor(arr, cv2.COLOR_BGR2RGB if arr.shape[2] == 3 else cv2.COLOR_BGRA2RGBA)
    return arr


def _pillow_decode(buf: bytes, iscolor: int, bgr: bool) -> np.ndarray:
    """Pillow's decode, kept to OpenCV's rules: a JPEG's gray is its luma, 16-bit samples
    give their top 8 bits, and transparency (alpha or a transparent colour) is kept as
    stored. (A colour PNG read as gray may still differ by one: libpng's weights.)"""
    Image = pillow()
    img = Image.open(io.BytesIO(buf))
    if iscolor == 0 and img.format == "JPEG":
        img.draft("L", img.size)  # libjpeg's own luma, as OpenCV decodes a JPEG to gray
    if img.mode == "I" or img.mode.startswith("I;16"):
        img = Image.fromarray((np.asarray(img) >> 8).astype(np.uint8))
    mode = _COLOR_MODES[iscolor]
    if mode is None and "transparency" in img.info:
        mode = "RGBA"
    elif mode is None and img.mode not in ("L", "RGB", "RGBA"):
        mode = "RGBA" if img.mode in ("LA", "PA") else "RGB"
    if mode is not None and img.mode != mode:
        img = img.convert(mode)
    arr = np.asarray(img)
    if bgr and arr.ndim == 3:
        arr = arr[:, :, 2::-1] if arr.shape[2] == 3 else arr[:, :, [2, 1, 0, 3]]
    return arr


def unpack_img(s: bytes, iscolor: int = -1) -> tuple[IRHeader, np.ndarray]:
    """Split an image record into its header and the decoded image (BGR, as OpenCV gives)."""
    header, s = unpack(s)
    return header, decode_image(s, iscolor)


_FORMATS = {".jpg": "JPEG", ".jpeg": "JPEG", ".png": "PNG"}


def encode_image(img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg",
                 bgr: bool = True) -> bytes:
    """Encode an ``(h, w[, c])`` uint8 array as JPEG or PNG bytes, with OpenCV
    (``cv2.imencode``, as MXNet) or else Pillow.

    ``quality`` is JPEG quality (1-100) or, for PNG, the compression level (0-9, clamped as
    OpenCV does: ``pack_img``'s default 95 is level 9), as in MXNet's ``pack_img``.
    """
    fmt = _FORMATS.get(img_fmt.lower())
    if fmt is None:
        raise ValueError(f"img_fmt must be one of {sorted(_FORMATS)}; got {img_fmt!r}")
    arr = np.ascontiguousarray(img, dtype=np.uint8)
    cv2 = _cv.opencv()
    if cv2 is not None:
        if not bgr and arr.ndim == 3 and arr.shape[2] in (3, 4):
            arr = cv2.cvtColor(arr, cv2.COLOR_RGB2BGR if arr.shape[2] == 3 else
                               cv2.COLOR_RGBA2BGRA)
        params = ([cv2.IMWRITE_JPEG_QUALITY, int(quality)] if fmt == "JPEG" else
                  [cv2.IMWRITE_PNG_COMPRESSION, min(max(int(quality), 0), 9)])
        ok, out = cv2.imencode(".jpg" if fmt == "JPEG" else ".png", arr, params)
        if not ok:
            raise ValueError(f"OpenCV could not encode an image of shape {arr.shape} as "
                             f"{img_fmt}")
        return out.tobytes()
    Image = pillow()
    if bgr and arr.ndim == 3 and arr.shape[2] in (3, 4):  # BGR(A) to Pillow's RGB(A)
        arr = np.ascontiguousarray(arr[:, :, [2, 1, 0, 3][:arr.shape[2]]])
    out = io.BytesIO()
    image = Image.fromarray(arr if arr.ndim == 2 or arr.shape[2] > 1 else arr[:, :, 0])
    if fmt == "JPEG":
        image.save(out, fmt, quality=int(quality))
    else:
        image.save(out, fmt, compress_level=min(max(int(quality), 0), 9))
    return out.getvalue()


def pack_img(header: Any, img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """An image record: ``header`` then ``img`` (BGR, as OpenCV holds it) encoded as
    ``img_fmt`` (``'.jpg'`` or ``'.png'``)."""
    return pack(header, encode_image(img, quality, img_fmt))
