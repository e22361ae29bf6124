"""fit checkpoints on an object store and on disk: a step is complete once its manifest is
written; killed saves are ignored and cleaned up; bad locations fail at once, in one line.

The object store is a real S3-compatible server (moto's) on 127.0.0.1, started here; nothing
else on the network is ever contacted (credentials come from the environment, the region and
endpoint from the URI, and EC2's metadata service is switched off).
"""
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pyarrow.fs as pafs
import pytest

import raymod as rm
from raymod.base import MXNetError
from raymod.module.fit_checkpoint import (CheckpointConfig, CheckpointLocationError,
                                          FitCheckpointer, scan_steps)

BUCKET = "ckpt"

# One training run, shared by this process and the subprocess the SIGKILL test starts: a
# small MLP in process, 10 steps an epoch, a checkpoint every 3 steps and at each epoch end.
TRAIN = textwrap.dedent('''
    import posixpath
    import sys
    import time

    import numpy as np
    import raymod as rm


    class Died(Exception):
        """Stands for the driver dying: the module and everything in memory are dropped."""


    def train(uri, resume=False, die_at=None, every=3, keep=2):
        data = rm.sym.Variable("data")
        h = rm.sym.Activation(rm.sym.FullyConnected(data, num_hidden=16, name="fc1"),
                              act_type="relu")
        net = rm.sym.SoftmaxOutput(rm.sym.FullyConnected(h, num_hidden=4, name="fc2"),
                                   name="softmax")
        rng = np.random.default_rng(0)
        x = rng.standard_normal((200, 8)).astype(np.float32)
        y = x[:, :4].argmax(axis=1).astype(np.float32)
        rm.random.seed(1)
        steps = []

        def maybe_die(param):
            steps.append(param.nbatch)
            if len(steps) == die_at:
                raise Died()

        mod = rm.mod.Module(net)
        mod.fit(rm.io.NDArrayIter(x, y, batch_size=20, shuffle=True, seed=2), num_epoch=3,
                optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
                initializer=rm.init.Xavier(), batch_end_callback=maybe_die, resume=resume,
                checkpoint=None if uri is None else rm.CheckpointConfig(
                    uri, every_n_steps=every, keep=keep))
        return {k: np.array(v) for k, v in mod.get_params()[0].items()}


    if __name__ == "__main__":  # train, and stop for good inside the save of step argv[2]
        from raymod.module.fit_checkpoint import FitCheckpointer

        stall = f"step-{int(sys.argv[2]):010d}"
        write = FitCheckpointer._write

        def write_then_stall(self, folder, name, payload):
            write(self, folder, name, payload)
            if posixpath.basename(folder) == stall:
                print("wrote", name, "of", stall, flush=True)
                time.sleep(120)  # the test kills the process here

        FitCheckpointer._write = write_then_stall
        train(sys.argv[1])
        print("finished without stalling", flush=True)
''')
_ns: dict = {}
exec(compile(TRAIN, "train_fit_checkpoint", "exec"), _ns)  # noqa: S102 - our own source
train, Died = _ns["train"], _ns["Died"]


class _Store:
    """The moto server's endpoint, an admin filesystem and URIs under one bucket."""

    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self.fs = pafs.S3FileSystem(endpoint_override=endpoint, scheme="http",
                                    access_key="testing", secret_key="testing",
                                    region="us-east-1", allow_bucket_creation=True)

    def uri(self, prefix: str, bucket: str = BUCKET) -> str:
        return (f"s3://{bucket}/{prefix}?endpoint_override={self.endpoint}&scheme=http"
                f"&region=us-east-1")

    def files(self, prefix: str) -> dict:
        """``{relative path: size}`` of every object under ``prefix``."""
        root = f"{BUCKET}/{prefix}"
        infos = self.fs.get_file_info(pafs.FileSelector(root, recursive=True,
                                                        allow_not_found=True))
        return {i.path[len(root) + 1:]: i.size for i in infos if i.type == pafs.FileType.File}

    def put(self, path: str, payload: bytes) -> None:
        with self.fs.open_output_stream(f"{BUCKET}/{path}") as f:
            f.write(payload)


@pytest.fixture(scope="module")
def aws_env():
    """Test credentials in the environment, and no way for the AWS SDK to look elsewhere
    (profiles, EC2's metadata service, proxies); the SIGKILL test's subprocess inherits it."""
    with pytest.MonkeyPatch.context() as mp:
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
                     "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION", "HTTP_PROXY",
                     "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            mp.delenv(name, raising=False)
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        mp.setenv("AWS_CONFIG_FILE", os.devnull)
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
        yield


@pytest.fixture(scope="module")
def s3(aws_env):
    """A moto S3 server on 127.0.0.1 (a free port) with one bucket, for this module."""
    server_mod = pytest.importorskip("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        store = _Store(f"{host}:{port}")
        store.fs.create_dir(BUCKET)
        yield store
    finally:
        server.stop()


@pytest.fixture(scope="module")
def reference():
    """The parameters after an uninterrupted run, without checkpoints."""
    return train(None)


def _assert_same(got, want):
    assert sorted(got) == sorted(want)
    for name in want:
        assert np.array_equal(got[name], want[name]), name


def _steps(files: dict) -> dict:
    """``{step folder: sorted file names}`` from a ``{relative path: size}`` listing."""
    folders: dict = {}
    for path in files:
        top, _, name = path.partition("/")
        folders.setdefault(top, []).append(name)
    return {k: sorted(v) for k, v in sorted(folders.items())}


def _complete(names) -> bool:
    return "manifest.json" in names and "model-0000.params" in names


# ---- on S3 ----------------------------------------------------------------------------------
def test_s3_fit_saves_prunes_and_resumes_bit_identically(s3, reference):
    uri = s3.uri("prune")
    with pytest.raises(Died):  # after step 17: the checkpoints of steps 12 and 15 remain
        train(uri, die_at=17)
    folders = _steps(s3.files("prune"))
    assert list(folders) == ["step-0000000012", "step-0000000015"]
    assert all(_complete(names) for names in folders.values())
    manifest = json.loads(s3.fs.open_input_stream(
        f"{BUCKET}/prune/step-0000000015/manifest.json").read())
    sizes = s3.files("prune/step-0000000015")
    assert manifest["step"] == 15 and manifest["format"] == 1
    assert manifest["files"] == {n: s for n, s in sizes.items() if n != "manifest.json"}
    assert set(manifest["files"]) == {"model-symbol.json", "model-0000.params",
                                      "model-0000.states", "position.json"}
    _assert_same(train(uri, resume=True), reference)
    # the epoch-end save at step 30 rewrote the periodic one; two complete ones are kept
    folders = _steps(s3.files("prune"))
    assert list(folders) == ["step-0000000027", "step-0000000030"]
    assert all(_complete(names) for names in folders.values())
    position = json.loads(s3.fs.open_input_stream(
        f"{BUCKET}/prune/step-0000000030/position.json").read())
    assert (position["epoch"], position["nbatch"], position["step"]) == (3, 0, 30)


def test_s3_resume_ignores_and_removes_a_killed_save(s3, reference):
    uri = s3.uri("killed")
    with pytest.raises(Died):
        train(uri, die_at=17)
    # a save killed after two files (no manifest), newer than anything the run will write,
    # and a temporary folder of the layout before manifests
    params = s3.fs.open_input_stream(f"{BUCKET}/killed/step-0000000015/model-0000.params")
    s3.put("killed/step-0000000099/model-0000.params", params.read())
    s3.put("killed/step-0000000099/model-symbol.json", b"{}")
    s3.put("killed/.tmp-xyz/model-0000.params", b"partial")
    checkpointer = FitCheckpointer(CheckpointConfig(uri, keep=2))
    assert [f.rsplit("/", 1)[1] for f in checkpointer.list()] == [
        "step-0000000012", "step-0000000015"]
    _assert_same(train(uri, resume=True), reference)
    assert list(_steps(s3.files("killed"))) == ["step-0000000027", "step-0000000030"]


def test_s3_driver_sigkilled_inside_a_save_resumes_bit_identically(s3, reference, tmp_path):
    uri = s3.uri("sigkill")
    script = tmp_path / "train_fit.py"
    script.write_text(TRAIN)
    with open(tmp_path / "stderr.txt", "w") as stderr:
        proc = subprocess.Popen([sys.executable, str(script), uri, "15"],
                                stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 45)
        line = proc.stdout.readline() if ready else ""
        assert line.startswith("wrote model-symbol.json of step-0000000015"), \
            f"{line!r}; stderr: {(tmp_path / 'stderr.txt').read_text()[-2000:]}"
        os.kill(proc.pid, signal.SIGKILL)  # inside the save: one file written, no manifest
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    folders = _steps(s3.files("sigkill"))
    assert folders["step-0000000015"] == ["model-symbol.json"]
    assert [k for k, names in folders.items() if _complete(names)] == [
        "step-0000000010", "step-0000000012"]
    _assert_same(train(uri, resume=True), reference)  # from step 12, mid-epoch 1
    folders = _steps(s3.files("sigkill"))
    assert list(folders) == ["step-0000000027", "step-0000000030"]
    assert all(_complete(names) for names in folders.values())


# ---- bad locations: one line, at once, before training --------------------------------------
def _fit_with(path):
    net = rm.sym.SoftmaxOutput(rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=2),
                               name="softmax")
    it = rm.io.NDArrayIter(np.zeros((4, 3), np.float32), np.zeros(4, np.float32), batch_size=2)
    mod = rm.mod.Module(net)
    started = time.monotonic()
    with pytest.raises(CheckpointLocationError) as info:
        mod.fit(it, num_epoch=1, checkpoint=CheckpointConfig(path), resume=True)
    assert time.monotonic() - started < 3
    assert not mod.binded  # refused before anything was bound, let alone trained
    message = str(info.value)
    assert "\n" not in message
    assert isinstance(info.value, ValueError) and isinstance(info.value, MXNetError)
    return message


def test_unknown_scheme_is_one_clear_line():
    message = _fit_with("bogus://x")
    assert message.startswith("CheckpointConfig(path='bogus://x'): cannot open it: ")
    assert "bogus" in message.split(": ", 1)[1]


def test_unreachable_endpoint_fails_fast(aws_env):
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    uri = (f"s3://bucket/run?endpoint_override=127.0.0.1:{port}&scheme=http"
           "&region=us-east-1")
    message = _fit_with(uri)
    assert message.startswith(f"CheckpointConfig(path={uri!r}): cannot reach it: ")


def test_missing_bucket_and_file_in_the_way(s3, tmp_path):
    assert "nobucket does not exist" in _fit_with(s3.uri("run", bucket="nobucket"))
    (tmp_path / "taken").write_text("not a folder")
    message = _fit_with(str(tmp_path / "taken" / "run"))
    assert f"{tmp_path / 'taken'} is a file, not a folder" in message


def test_secret_key_in_the_uri_is_masked():
    with pytest.raises(CheckpointLocationError) as info:
        FitCheckpointer(CheckpointConfig("bogus://key:hunter2@x/run"))
    assert "hunter2" not in str(info.value) and "key:***@x" in str(info.value)


# ---- on a local disk ------------------------------------------------------------------------
def _module():
    net = rm.sym.SoftmaxOutput(rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=3,
                                                     name="fc"), name="softmax")
    mod = rm.mod.Module(net)
    mod.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (4,))])
    mod.init_params(initializer=rm.init.Xavier())
    mod.init_optimizer(optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    return mod


def _position(step, epoch=0):
    return {"epoch": epoch, "nbatch": step, "step": step, "sampler": None, "bucket_keys": [],
            "membership": []}


def _names(root):
    return sorted(p.name for p in root.iterdir())


def test_local_incomplete_steps_are_ignored_and_cleaned_up(tmp_path):
    root = tmp_path / "run"
    mod, ckpt = _module(), FitCheckpointer(CheckpointConfig(str(root), keep=2))
    for step in (1, 2, 3):
        ckpt.save(mod, _position(step))
    assert _names(root) == ["step-0000000002", "step-0000000003"]
    killed = root / "step-0000000004"  # files, but no manifest
    killed.mkdir()
    (killed / "model-symbol.json").write_text("{}")
    (killed / "manifest.json.0123.tmp").write_text("{")
    torn = root / "step-0000000005"  # a manifest whose files do not match it
    torn.mkdir()
    for path in (root / "step-0000000003").iterdir():
        (torn / path.name).write_bytes(path.read_bytes())
    (torn / "manifest.json").write_text(json.dumps(
        json.loads((torn / "manifest.json").read_text()) | {"step": 5}))
    (torn / "model-0000.params").write_bytes(b"short")
    (root / ".tmp-abc").mkdir()
    (root / "step-notes").mkdir()  # not a checkpoint folder: left alone
    assert [os.path.basename(f) for f in ckpt.list()] == ["step-0000000002", "step-0000000003"]
    assert scan_steps(ckpt.fs, ckpt.root).stale == [
        str(root / ".tmp-abc"), str(killed), str(torn)]
    saved = ckpt.load_latest()
    assert saved["folder"] == str(root / "step-0000000003") and saved["position"]["step"] == 3
    assert saved["states"] is not None
    assert _names(root) == ["step-0000000002", "step-0000000003", "step-notes"]


def test_local_save_fsyncs_then_renames_the_manifest_last(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", fd)), real_fsync(fd)))
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", b)),
                                                     real_replace(a, b)))
    ckpt = FitCheckpointer(CheckpointConfig(str(tmp_path / "run")))
    folder = ckpt.save(_module(), _position(7))
    replaces = [i for i, (kind, _) in enumerate(events) if kind == "replace"]
    assert [events[i][1] for i in replaces] == [os.path.join(folder, "manifest.json")]
    # the root, four files, the folder and the manifest before the rename; the folder after
    assert sum(kind == "fsync" for kind, _ in events[:replaces[0]]) == 7
    assert events[replaces[0] + 1:] and all(kind == "fsync" for kind, _ in
                                           events[replaces[0] + 1:])
    manifest = json.loads(open(os.path.join(folder, "manifest.json")).read())
    on_disk = {n: os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder)
               if n != "manifest.json"}
    assert manifest == {"format": 1, "step": 7, "files": on_disk}


def test_local_rewrite_of_a_step_replaces_it(tmp_path):
    mod, ckpt = _module(), FitCheckpointer(CheckpointConfig(str(tmp_path / "run"), keep=1))
    ckpt.save(mod, _position(10))  # the periodic save at an epoch's last step ...
    ckpt.save(mod, dict(_position(10), epoch=1, nbatch=0))  # ... then the epoch-end one
    saved = ckpt.load_latest()
    assert (saved["position"]["epoch"], saved["position"]["nbatch"]) == (1, 0)
    assert _names(tmp_path / "run") == ["step-0000000010"]


def test_local_layout_before_manifests_is_read_then_adopted(tmp_path):
    root = tmp_path / "run"
    mod, ckpt = _module(), FitCheckpointer(CheckpointConfig(str(root), keep=3))
    for step in (1, 2):
        ckpt.save(mod, _position(step))
    for folder in root.iterdir():  # as the rename scheme wrote them
        (folder / "manifest.json").unlink()
    (root / ".tmp-0f0f").mkdir()  # a save it never renamed
    (root / ".tmp-0f0f" / "model-0000.params").write_bytes(b"partial")
    no_position = root / "step-0000000000"  # not of that layout: it lacks position.json
    no_position.mkdir()
    (no_position / "model-0000.params").write_bytes(b"x")
    found = scan_steps(ckpt.fs, ckpt.root)
    assert found.legacy and [os.path.basename(f) for f in found.folders] == [
        "step-0000000001", "step-0000000002"]
    assert ckpt.load_latest()["position"]["step"] == 2
    assert _names(root) == ["step-0000000001", "step-0000000002"]
    ckpt.save(mod, _position(3))  # gives the old folders manifests: all three are kept
    found = scan_steps(ckpt.fs, ckpt.root)
    assert not found.legacy and not found.stale
    assert [os.path.basename(f) for f in found.folders] == [
        "step-0000000001", "step-0000000002", "step-0000000003"]
