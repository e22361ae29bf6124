"""`ray job submit` of jobs/train_digits.py to a Ray head started with `ray start`, on loopback.

The head is this test's own: every port it opens is a free one picked here (none of Ray's
defaults, so neither the test session's in-process cluster nor anyone else's is touched), it
binds 127.0.0.1 only, keeps its files under its own --temp-dir, and uses token authentication
with a token made for it (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN: the ray CLI needs both).
It is stopped by signalling exactly its own processes: those of the session `ray start` ran in,
plus the job's driver and workers (found by their working directory under the temp dir).
Never `ray stop`, which would stop every Ray process of this user on the machine.

On the 2-core machine, loaded: `ray start` about 20 s, submit to final logs about 50 s, the
whole test 75-95 s.
"""
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.timeout(1200)]  # above the steps' own limits

ROOT = Path(__file__).resolve().parents[1]
RAY = [sys.executable, "-m", "ray.scripts.scripts"]  # the `ray` CLI of this Python

START_TIMEOUT = 180
START_TRIES = 3
JOB_TIMEOUT = 360
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


def free_ports(count):
    """``count`` distinct TCP ports free on 127.0.0.1 right now."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _proc_info(pid):
    """(state, session id, cwd, cmdline) of a process, or None when it is gone or not ours."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        state, sid = fields[0], int(fields[3])
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            cwd = ""
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        return state, sid, cwd, cmdline
    except (OSError, IndexError, ValueError):
        return None


class LoopbackHead:
    """A `ray start --head` on 127.0.0.1 with its own ports, temp dir and token."""

    def __init__(self, num_cpus=4):
        self.temp_dir = tempfile.mkdtemp(prefix="rmhead-", dir="/tmp")  # short: socket paths
        (self.gcs_port, self.dashboard_port, *self.other_ports) = free_ports(9)
        self.dashboard = f"http://127.0.0.1:{self.dashboard_port}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
        self.env.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="token",
                        RAY_AUTH_TOKEN=secrets.token_hex(32), RAY_USAGE_STATS_ENABLED="0",
                        PYTHONUNBUFFERED="1")
        self.num_cpus = num_cpus
        self.sid = None

    def start(self, tries=START_TRIES):
        """`ray start --head`, tried again on fresh ports after a try that failed: under load
        its own 60 s wait for the node can run out (``node timed out during startup``), as
        raymod's starts allow for (raymod.cluster.local.START_TRIES)."""
        for attempt in range(1, tries + 1):
            try:
                return self._start_once()
            except AssertionError:
                if attempt == tries:
                    raise
                self._kill()  # this try's daemons, before the next takes new ports
                (self.gcs_port, self.dashboard_port, *self.other_ports) = free_ports(9)
                self.dashboard = f"http://127.0.0.1:{self.dashboard_port}"

    def _start_once(self):
        client, agent_http, agent_grpc, env_agent, metrics, node_mgr, obj_mgr = self.other_ports
        cmd = [*RAY, "start", "--head", "--node-ip-address=127.0.0.1",
               f"--port={self.gcs_port}", "--dashboard-host=127.0.0.1",
               f"--dashboard-port={self.dashboard_port}", "--include-dashboard=true",
               f"--num-cpus={self.num_cpus}", "--num-gpus=0", f"--temp-dir={self.temp_dir}",
               f"--ray-client-server-port={client}", f"--dashboard-agent-listen-port={agent_http}",
               f"--dashboard-agent-grpc-port={agent_grpc}", f"--runtime-env-agent-port={env_agent}",
               f"--metrics-export-port={metrics}", f"--node-manager-port={node_mgr}",
               f"--object-manager-port={obj_mgr}", "--disable-usage-stats"]
        # a session of its own: every daemon `ray start` leaves behind shares its id
        proc = subprocess.Popen(cmd, env=self.env, cwd=self.temp_dir, start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.sid = proc.pid
        try:
            out, _ = proc.communicate(timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            raise AssertionError(f"ray start took over {START_TIMEOUT} s:\n{out[-3000:]}")
        assert proc.returncode == 0, f"ray start failed:\n{out[-3000:]}"
        return out

    def ray(self, *args, timeout=120, check=False):
        """Run a `ray` CLI command against this head; the CompletedProcess."""
        result = subprocess.run([*RAY, *args], env=self.env, cwd=self.temp_dir, text=True,
                                capture_output=True, timeout=timeout, check=False)
        if check:
            assert result.returncode == 0, (f"ray {' '.join(args)} failed:\n"
                                            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        return result

    def processes(self):
        """Live processes of this head: its session's, and any working under its temp dir."""
        mine = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            info = _proc_info(int(entry))
            if info is None or info[0] == "Z":
                continue
            _, sid, cwd, cmdline = info
            if sid == self.sid or cwd.startswith(self.temp_dir) or self.temp_dir in cmdline:
                mine.append(int(entry))
        return mine

    def stop(self, grace=5.0):
        """SIGTERM this head's processes, SIGKILL what is left after ``grace`` seconds."""
        self._kill(grace)
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def _kill(self, grace=5.0):
        if self.sid is None:
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            pids = self.processes()
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            deadline = time.monotonic() + wait
            while pids and time.monotonic() < deadline:
                time.sleep(0.3)
                pids = self.processes()
            if not pids:
                break


def _job_status(head, job_id):
    """The job's status as `ray job status` words it (None if unrecognised), and its output."""
    result = head.ray("job", "status", "--address", head.dashboard, job_id, timeout=60)
    out = result.stdout + result.stderr
    if f"Job '{job_id}' succeeded" in out:
        return "SUCCEEDED", out
    if f"Job '{job_id}' failed" in out:
        return "FAILED", out
    if f"Job '{job_id}' was stopped" in out:
        return "STOPPED", out
    marker = f"Status for job '{job_id}': "
    for line in out.splitlines():
        if marker in line:
            return line.split(marker, 1)[1].strip(), out
    return None, out


@pytest.fixture
def loopback_head():
    if importlib.util.find_spec("aiohttp") is None:
        pytest.skip("ray job submit needs ray[default] (the dashboard's job server)")
    if not sys.platform.startswith("linux"):
        pytest.skip("the head's processes are found through /proc (Linux only)")
    head = LoopbackHead()
    try:
        head.start()
        yield head
    finally:
        head.stop()


def test_ray_job_submit_train_digits_on_two_workers(loopback_head, tmp_path):
    pytest.importorskip("sklearn")
    head = loopback_head
    started = time.monotonic()
    # what the job needs besides the installed raymod: the jobs/ scripts (a small upload)
    workdir = tmp_path / "workdir"
    (workdir / "jobs").mkdir(parents=True)
    for script in (ROOT / "jobs").glob("*.py"):
        shutil.copy(script, workdir / "jobs")
    out = tmp_path / "out"
    job_id = f"raymod-test-{uuid.uuid4().hex[:8]}"
    # the README's command: the job's driver and its Ray workers run this venv's python (a
    # head's own `python` may lack raymod's dependencies: ModuleNotFoundError)
    runtime_env = json.dumps({"py_executable": sys.executable})
    submit_args = ["job", "submit", "--address", head.dashboard, "--working-dir", str(workdir),
                   "--runtime-env-json", runtime_env, "--submission-id", job_id, "--no-wait",
                   "--", sys.executable, "jobs/train_digits.py", "--address", "auto",
                   "--epochs", "1",
                   "--workers", "2", "--checkpoint", str(out / "digits"),
                   "--metrics", str(out / "metrics.jsonl")]
    deadline = time.monotonic() + 90
    while True:  # the dashboard agent may need a few seconds more than `ray start`
        submitted = head.ray(*submit_args, timeout=120)
        text = submitted.stdout + submitted.stderr
        if submitted.returncode == 0 or "No available agent" not in text \
                or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert submitted.returncode == 0, text[-3000:]
    try:
        # --follow returns when the job ends
        head.ray("job", "logs", "--address", head.dashboard, "--follow", job_id,
                 timeout=JOB_TIMEOUT)
        status, status_text = _job_status(head, job_id)
        deadline = time.monotonic() + 60
        while status not in TERMINAL and time.monotonic() < deadline:
            time.sleep(2)
            status, status_text = _job_status(head, job_id)
        logs = head.ray("job", "logs", "--address", head.dashboard, job_id, timeout=60,
                        check=True).stdout
        assert status == "SUCCEEDED", f"{status_text[-2000:]}\n--- job logs ---\n{logs[-4000:]}"
    finally:
        if _job_status(head, job_id)[0] not in TERMINAL:
            head.ray("job", "stop", "--address", head.dashboard, job_id, timeout=60)

    # it joined this head (not a cluster of its own) and trained on 2 worker actors
    assert f"127.0.0.1:{head.gcs_port} (joined)" in logs, logs[-4000:]
    assert "on 2 Ray workers" in logs
    assert "Epoch[0] Validation-accuracy=" in logs
    final = [ln for ln in logs.splitlines() if ln.startswith("final validation accuracy")]
    assert len(final) == 1 and 0.0 < float(final[0].split()[-1]) <= 1.0, logs[-2000:]
    for name in ("digits-symbol.json", "digits-0001.params", "digits-0001.states",
                 "metrics.jsonl"):
        assert (out / name).stat().st_size > 0, name
    print(f"ray job submit round trip: {time.monotonic() - started:.1f} s", file=sys.stderr)
