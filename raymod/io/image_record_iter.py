"""``ImageRecordIter``: batches of decoded, augmented images from a RecordIO file.

The iterator is a :class:`~raymod.io.base.RowSource` whose rows are *draws*: draw
``epoch * n + i`` is record ``i`` of this part as epoch ``epoch`` sees it, and its random
augmentation comes from a generator seeded with ``(seed_aug, draw)``. So a draw gives the
same pixels wherever and whenever it is decoded: in this process, on any Ray worker, or
again on a survivor after a worker is lost. A worker is sent an :class:`ImageRecordReader`
(the file's path or URI, the records' byte offsets and the arguments), reads and decodes its
own records with ``preprocess_threads`` threads; no image bytes pass through the driver.
"""
from __future__ import annotations

import dataclasses
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import numpy as np

from .. import recordio
from .base import DeferredRows, RowReader
from .image_aug import AugParams, augment, normalize
from .native_batches import NativeIter

_MAX_SPAN = 1 << 24  # bytes read ahead for one record at most
_AUG_FIELDS = {f for f in AugParams.__dataclass_fields__ if f != "data_shape"}
# MXNet arguments that steer its C++ machinery and mean nothing here
_IGNORED = ("aug_seq", "verbose", "device_id", "shuffle_chunk_size", "shuffle_chunk_seed",
            "prefetch_buffer", "ctx")


def decode(payload: bytes, channels: int) -> np.ndarray:
    """JPEG/PNG bytes as an ``(h, w, channels)`` uint8 RGB(A) or gray image."""
    img = recordio.decode_image(payload, 0 if channels == 1 else 1, bgr=False)
    return img[:, :, None] if img.ndim == 2 else img


class RecordFile:
    """Random access to one ``.rec`` by byte offset (a path or a ``pyarrow.fs`` URI), safe
    for several threads at once; opened on first use in the process that reads."""

    def __init__(self, uri: str):
        # absolute, so that a worker started in another folder finds the same file
        self.uri = uri if "://" in uri else os.path.abspath(uri)
        self._pread = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {"uri": self.uri}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["uri"])

    def read(self, offset: int, size_hint: int = 0) -> bytes:
        """The record at byte ``offset`` (in one read when it spans at most ``size_hint``
        bytes)."""
        if self._pread is None:
            with self._lock:
                if self._pread is None:
                    self._pread = self._open()
        return recordio.read_record_at(self._pread, offset, size_hint)

    def _open(self) -> Any:
        if "://" in self.uri:
            import pyarrow.fs as pafs
            fs, path = pafs.FileSystem.from_uri(self.uri)
            f = fs.open_input_file(path)
            return lambda n, offset: f.read_at(n, offset)
        fd = os.open(self.uri, os.O_RDONLY)
        return lambda n, offset: os.pread(fd, n, offset)


class ImageRecordReader(RowReader):
    """Decodes and augments draws of a record file: what a worker holds of an
    :class:`ImageRecordIter` (no pixels; the file is opened where it is read)."""

    def __init__(self, uri: str, offsets: np.ndarray, params: AugParams, seed_aug: int,
                 label_width: int, threads: int, dtype: np.dtype,
                 mean_img: np.ndarray | None, labels: dict | None):
        self.file = RecordFile(uri)
        self.offsets = np.asarray(offsets, np.int64)
        # the bytes to the next record: one read per record (0, no hint, for the last one
        # and where the records are not in file order or far apart)
        spans = np.diff(self.offsets, append=self.offsets[-1:])
        self.spans = np.where((spans > 8) & (spans <= _MAX_SPAN), spans, 0)
        self.params, self.seed_aug = params, int(seed_aug)
        self.label_width, self.threads = int(label_width), max(1, int(threads))
        self.dtype, self.mean_img, self.labels = dtype, mean_img, labels
        self._pool: ThreadPoolExecutor | None = None
        #: images decoded by this process (0 on a driver whose Ray workers decode)
        self.decoded = 0

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_pool"] = None
        state["decoded"] = 0
        return state

    def take(self, rows: Any) -> tuple[list, list]:
        """Data ``(n, C, H, W)`` and labels of draws ``rows``.

        Each image is normalised straight into its slot of the batch. With
        ``preprocess_threads`` > 1 the threads take the next image as they finish one (OpenCV
        and numpy release the GIL inside their calls, so they decode in parallel)."""
        draws = np.asarray(rows, np.int64)
        if draws.ndim != 1 or (draws.size and draws.min() < 0):
            raise ValueError(f"draws must be a 1-d array of ints >= 0; got {rows!r}")
        n = len(draws)
        _, height, width = self.params.data_shape
        # what decode hands over: gray for one channel, else RGB
        data = np.empty((n, 1 if self.params.channels == 1 else 3, height, width), np.float32)
        labels: list = [None] * n
        todo = iter(range(n))  # shared: next() on it is atomic under the GIL

        def work() -> None:
            for i in todo:
                labels[i] = self.one(int(draws[i]), out=data[i])[1]

        threads = min(self.threads, n)
        if threads > 1:  # this thread is one of them
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads - 1, "decode")
            helpers = [self._pool.submit(work) for _ in range(threads - 1)]
            try:
                work()
            except BaseException:
                for _ in todo:  # the helpers stop at their next image
                    pass
                raise
            finally:
                for helper in helpers:
                    helper.result()
        else:
            work()
        self.decoded += n
        label = np.stack(labels) if n else np.empty((0, self.label_width), np.float32)
        return ([data.astype(self.dtype, copy=False)],
                [label[:, 0] if self.label_width == 1 else label])

    def one(self, draw: int, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """One draw's ``(C, H, W)`` image (written into ``out`` when given) and its labels."""
        record = draw % len(self.offsets)
        header, payload = recordio.unpack(self.file.read(int(self.offsets[record]),
                                                         int(self.spans[record])))
        rng = np.random.default_rng([self.seed_aug, draw])
        img = augment(decode(payload, self.params.channels), self.params, rng)
        return normalize(img, self.params, rng, self.mean_img, out), self._label(header)

    def _label(self, header: recordio.IRHeader) -> np.ndarray:
        if self.labels is not None:
            label = self.labels.get(int(header.id))
            if label is None:
                raise KeyError(f"record id {header.id} is not in path_imglist")
        else:
            label = np.ravel(np.asarray(header.label, np.float32))
        if label.size < self.label_width:
            raise ValueError(f"label_width is {self.label_width} but record {header.id} holds "
                             f"{label.size} label(s)")
        return label[:self.label_width]


def part_rows(offsets: list[int], total_bytes: int | None, part_index: int,
              num_parts: int) -> slice:
    """The records of part ``part_index`` of ``num_parts``: equal record counts with an
    index (``total_bytes`` None), else equal byte ranges (4-byte aligned), as MXNet splits."""
    n = len(offsets)
    if total_bytes is None:
        step = -(-n // num_parts)
        return slice(min(step * part_index, n), min(step * (part_index + 1), n))
    step = -(-total_bytes // num_parts)
    step = -(-step // 4) * 4
    starts = np.asarray(offsets)
    lo, hi = step * part_index, step * (part_index + 1)
    return slice(int(np.searchsorted(starts, lo)), int(np.searchsorted(starts, hi)))


class ImageRecordIter(DeferredRows, NativeIter):
    """Batches of images from a RecordIO ``.rec`` file, decoded and augmented as MXNet's
    ``ImageRecordIter`` does, with its arguments: with OpenCV as MXNet, or with Pillow and
    numpy where ``cv2`` is missing (:mod:`raymod.io._cv`).

    Parameters
    ----------
    path_imgrec : str
        The ``.rec`` file: a local path or a ``pyarrow.fs`` URI.
    data_shape : tuple of int
        ``(channels, height, width)`` of one image; 1 channel decodes as grayscale.
    batch_size : int
        Images per batch.
    path_imgidx : str, optional
        Its ``.idx`` file. Without one the record offsets are found by reading the file's
        record headers once.
    path_imglist : str, optional
        A ``.lst`` file whose labels replace the records' own (matched by record id).
    label_width : int, default 1
        Labels per image.
    shuffle : bool, default False
        Visit the records in a new order each epoch (seeded by ``seed``).
    seed : int, default 0
        Seed of the shuffle.
    seed_aug : int, optional
        Seed of the random augmentations (default: ``seed``). Draw ``k`` of the iterator
        always gets the same augmentation, whichever process or thread decodes it.
    round_batch : bool, default True
        Fill the last batch from the start and begin the next epoch after the records so
        used (MXNet's rule); otherwise it is short and ``pad`` says by how much.
    part_index, num_parts : int, default 0 and 1
        Read only part ``part_index`` of ``num_parts`` (equal record counts with an index,
        equal byte ranges without, as MXNet splits).
    preprocess_threads : int, default 4
        Decoding threads (of the process that reads: this one, or each Ray worker). With
        OpenCV they run in parallel (its calls release the GIL; its own thread pool is set
        to one thread so that it does not compete with them).
    dtype : str, optional
        Output data type (default float32).
    mean_img : str, optional
        An MXNet ``.bin``/``.nd`` file holding the mean image, subtracted instead of
        ``mean_r/g/b``; when it does not exist it is computed over this part's records (with
        the crop and no random draws) and saved there, as MXNet does.
    data_name, label_name : str, default 'data' and 'softmax_label'
        Input names.
    **augmentation
        MXNet's augmentation and normalisation arguments, with its defaults: ``resize``,
        ``rand_crop``, ``random_resized_crop``, ``max_rotate_angle``, ``rotate``,
        ``max_aspect_ratio``, ``min_aspect_ratio``, ``max_shear_ratio``, ``max_crop_size``,
        ``min_crop_size``, ``max_random_scale``, ``min_random_scale``, ``max_random_area``,
        ``min_random_area``, ``max_img_size``, ``min_img_size``, ``brightness``,
        ``contrast``, ``saturation``, ``pca_noise``, ``random_h``, ``random_s``,
        ``random_l``, ``fill_value``, ``inter_method``, ``pad``, ``mirror``,
        ``rand_mirror``, ``mean_r/g/b/a``, ``std_r/g/b/a``, ``scale``,
        ``max_random_contrast``, ``max_random_illumination`` (see :class:`AugParams`).

    Notes
    -----
    Without random augmentation the batches equal MXNet's on the test fixture with OpenCV,
    and are within one pixel value of them with Pillow (its bilinear resize rounds
    differently). Random draws follow MXNet's distributions, not its generator, so augmented
    batches repeat per seed here (under either backend) but differ from MXNet's.
    ``prefetch_buffer``, ``ctx``, ``aug_seq`` and MXNet's other engine arguments are
    accepted and have no effect.
    """

    def __init__(self, path_imgrec: str, data_shape: Sequence[int], batch_size: int,
                 path_imgidx: str = "", path_imglist: str = "", label_width: int = 1,
                 shuffle: bool = False, seed: int = 0, seed_aug: int | None = None,
                 round_batch: bool = True, part_index: int = 0, num_parts: int = 1,
                 preprocess_threads: int = 4, dtype: Any = None, mean_img: str = "",
                 data_name: str = "data", label_name: str = "softmax_label",
                 **kwargs: Any):
        unknown = sorted(set(kwargs) - _AUG_FIELDS - set(_IGNORED))
        if unknown:
            raise TypeError(f"ImageRecordIter got unexpected arguments {unknown}")
        if not path_imgrec:
            raise ValueError("ImageRecordIter needs path_imgrec (the .rec file)")
        self._check_part(part_index, num_parts)
        if int(label_width) < 1:
            raise ValueError(f"label_width must be >= 1; got {label_width}")
        self.params = AugParams(data_shape=tuple(data_shape),
                                **{k: v for k, v in kwargs.items() if k in _AUG_FIELDS})
        self.data_shape = self.params.data_shape
        self.label_width = int(label_width)
        self.label_shape = (self.label_width,)
        self.dtype = np.dtype("float32" if dtype is None else dtype)
        self.label_dtype = np.dtype(np.float32)
        self.path_imgrec = os.fspath(path_imgrec)
        offsets, total = self._offsets(self.path_imgrec, path_imgidx)
        part = part_rows(offsets, total, int(part_index), int(num_parts))
        self.offsets = np.asarray(offsets[part], np.int64)
        if len(self.offsets) == 0:
            raise ValueError(f"part {part_index} of {num_parts} of {self.path_imgrec} holds "
                             "no records")
        mean = self._mean_image(mean_img) if mean_img else None
        labels = None if not path_imglist else {
            index: np.float32(lab) for index, lab, _ in recordio.read_image_list(path_imglist)}
        self.seed_aug = int(seed if seed_aug is None else seed_aug)
        self._reader = ImageRecordReader(self.path_imgrec, self.offsets, self.params,
                                         self.seed_aug, self.label_width, preprocess_threads,
                                         self.dtype, mean, labels)
        self._data_name, self._label_name = data_name, label_name
        self._init_wrap_around(batch_size, shuffle, round_batch, int(seed))

    @staticmethod
    def _offsets(uri: str, idx: str) -> tuple[list[int], int | None]:
        """Record offsets in file order, and the file's size when there is no index."""
        if idx:
            return sorted(recordio.read_index(os.fspath(idx)).values()), None
        offsets = recordio.record_offsets(uri)
        if "://" in uri:
            import pyarrow.fs as pafs
            fs, path = pafs.FileSystem.from_uri(uri)
            return offsets, fs.get_file_info(path).size
        return offsets, os.path.getsize(uri)

    def _mean_image(self, path: str) -> np.ndarray:
        """The mean image in ``path``; made (and saved there) when missing, as MXNet does:
        the mean of every record of this part through the crop without random draws."""
        from ..ndarray_io import load, save
        if not os.path.isfile(path):
            plain = dataclasses.replace(
                AugParams(data_shape=self.data_shape), resize=self.params.resize,
                pad=self.params.pad, fill_value=self.params.fill_value,
                inter_method=self.params.inter_method)
            reader = ImageRecordReader(self.path_imgrec, self.offsets, plain, 0, 1, 1,
                                       np.dtype(np.float32), None, None)
            total = np.zeros(self.data_shape, np.float64)
            for start in range(0, len(self.offsets), 256):
                rows = np.arange(start, min(start + 256, len(self.offsets)))
                total += reader.take(rows)[0][0].sum(axis=0)
            save(path, {"mean_img": (total / len(self.offsets)).astype(np.float32)})
        arrays = load(path)
        mean = next(iter(arrays.values())) if isinstance(arrays, dict) else arrays[0]
        mean = np.asarray(mean, np.float32)
        if mean.shape != self.data_shape:
            raise ValueError(f"mean_img holds shape {mean.shape}; data_shape is "
                             f"{self.data_shape}")
        return mean

    # --- RowSource: rows are draws (epoch * n + record) ---------------------------------
    @property
    def num_rows(self) -> int:
        """Records in this part."""
        return len(self.offsets)

    def take(self, rows: Any) -> tuple[list, list]:
        """Decoded, augmented images and labels of draws ``rows``."""
        return self._reader.take(rows)

    def reader(self) -> ImageRecordReader:
        """What a Ray worker is sent: the file's location, offsets and arguments."""
        return self._reader

    def _draws(self, rows: np.ndarray, pad: int) -> np.ndarray:
        """Record positions of this batch as draws of the current epoch (rows that fill a
        round batch belong to the next epoch)."""
        n = self.num_rows
        draws = np.asarray(rows, np.int64) + self.sampler.epoch * n
        if pad and self.sampler.round_batch:
            draws[-pad:] += n
        return draws

    def iter_next(self) -> bool:
        """Move to the next batch; False at the end of the epoch."""
        if not super().iter_next():
            return False
        self._rows = self._draws(self._rows, self._pad)
        return True

    def next_rows(self) -> tuple[np.ndarray, int]:
        """Advance without decoding: ``(draws, pad)`` of the next batch."""
        rows, pad = super().next_rows()
        self._rows = self._draws(rows, pad)
        return self._rows, pad
