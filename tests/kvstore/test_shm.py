"""Shared-memory blocks: layout, sharing between mappings, clean-up of dead creators."""
import os
import subprocess
import sys

import numpy as np
import pytest

from raymod.kvstore import shm

pytestmark = pytest.mark.skipif(not shm.available(), reason="no writable /dev/shm here")


def test_arrays_are_shared_aligned_and_versioned():
    block = shm.SharedBlock.create({"<f4": 5, "<f8": 3})
    other = shm.SharedBlock(block.handle, created=False)  # a second mapping, as another process
    block.arrays["<f4"][:] = np.arange(5)
    other.arrays["<f8"][:] = 2.5
    np.testing.assert_array_equal(other.arrays["<f4"], np.arange(5, dtype=np.float32))
    np.testing.assert_array_equal(block.arrays["<f8"], 2.5)
    assert all(a.ctypes.data % 64 == 0 for a in block.arrays.values())
    block.version = 41
    assert other.version == 41
    block.unlink()
    assert not os.path.exists(os.path.join(shm.SHM_DIR, block.handle.name))
    with pytest.raises(FileNotFoundError):
        shm.SharedBlock.attach(shm.BlockHandle(block.handle.name + "x", block.handle.sizes))


def test_blocks_of_a_killed_process_are_swept():
    code = ("import os, sys; from raymod.kvstore import shm; "
            "b = shm.SharedBlock.create({'<f4': 10}); print(b.handle.name, flush=True); "
            "os._exit(0)")  # no atexit: as a SIGKILL would leave it
    name = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()
    path = os.path.join(shm.SHM_DIR, name)
    assert os.path.exists(path)
    mine = shm.SharedBlock.create({"<f4": 1})  # a live creator's block stays
    assert name in shm.sweep_stale()
    assert not os.path.exists(path)
    assert os.path.exists(os.path.join(shm.SHM_DIR, mine.handle.name))
    mine.unlink()


def test_a_normal_exit_removes_the_blocks_it_created():
    code = ("from raymod.kvstore import shm; "
            "print(shm.SharedBlock.create({'<f4': 10}).handle.name)")
    name = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert not os.path.exists(os.path.join(shm.SHM_DIR, name))


def test_attached_mappings_are_bounded_least_recently_used_first(monkeypatch):
    monkeypatch.setattr(shm, "_MAX_ATTACHED", 2)
    monkeypatch.setattr(shm, "_ATTACHED", {})
    blocks = [shm.SharedBlock.create({"<f4": 4}) for _ in range(3)]
    first = shm.SharedBlock.attach(blocks[0].handle)
    shm.SharedBlock.attach(blocks[1].handle)
    assert shm.SharedBlock.attach(blocks[0].handle) is first  # used again: now the newest
    shm.SharedBlock.attach(blocks[2].handle)  # evicts blocks[1], the least recently used
    assert list(shm._ATTACHED) == [blocks[0].handle.name, blocks[2].handle.name]
    for block in blocks:
        block.unlink()
