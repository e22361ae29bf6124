"""cluster.yaml (AWS) and cluster-local.yaml (127.0.0.1) against Ray's own cluster-config schema.

The schema checks use what `ray up` itself runs before it touches a provider:
``prepare_config`` (merge with the provider's defaults.yaml) and ``validate_config`` (Ray's
``ray-schema.json`` plus its cross-field checks), so nothing here needs AWS or a network.

The last test runs ``ray up`` / ``ray submit`` / ``ray down`` on cluster-local.yaml. It needs an
SSH server on 127.0.0.1 with passwordless login, rsync, and a machine where ``ray stop`` (which
``ray up`` and ``ray down`` run) may stop every Ray process of this user; it is skipped, with
the reason, unless all hold and ``RAYMOD_TEST_RAY_UP=1``.
"""
import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("ray.autoscaler")

from ray.autoscaler._private.util import prepare_config, validate_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CLOUD = ROOT / "cluster.yaml"
LOCAL = ROOT / "cluster-local.yaml"


def load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def ray_schema():
    import ray.autoscaler

    with open(Path(ray.autoscaler.__file__).parent / "ray-schema.json") as f:
        return json.load(f)


@pytest.mark.parametrize("path", [CLOUD, LOCAL], ids=["cluster.yaml", "cluster-local.yaml"])
def test_config_as_written_matches_ray_schema(path):
    jsonschema.validate(load(path), ray_schema())


@pytest.mark.parametrize("path", [CLOUD, LOCAL], ids=["cluster.yaml", "cluster-local.yaml"])
def test_config_passes_ray_up_validation(path):
    prepared = prepare_config(load(path))
    validate_config(prepared)  # raises on a schema or cross-field error
    assert prepared["head_node_type"] in prepared["available_node_types"]


def test_ray_validation_is_not_vacuous():
    broken = load(CLOUD)
    del broken["available_node_types"]["ray.worker.gpu"]["resources"]
    with pytest.raises(jsonschema.ValidationError):
        validate_config(prepare_config(broken))
    too_small = load(CLOUD)
    too_small["max_workers"] = 1  # below the node types' summed min_workers
    with pytest.raises(ValueError, match="max_workers"):
        validate_config(prepare_config(too_small))


def test_cloud_config_node_types_and_install():
    config = load(CLOUD)
    assert config["provider"]["type"] == "aws"
    types = config["available_node_types"]
    head = types[config["head_node_type"]]
    assert head["resources"].get("CPU") == 0  # worker actors stay off the head
    cpu = [t for name, t in types.items() if t is not head and not t["resources"].get("GPU")]
    gpu = [t for t in types.values() if t["resources"].get("GPU", 0) >= 1]
    assert cpu and gpu
    for node_type in cpu + gpu:
        assert 0 <= node_type["min_workers"] <= node_type["max_workers"]
    assert sum(t["max_workers"] for t in cpu + gpu) <= config["max_workers"]

    # raymod comes from this checkout, synced to ~/raymod and installed editable
    assert config["file_mounts"]["~/raymod"] == "."
    def installs_raymod(commands, extra):
        return any("pip install -e" in c and "raymod[" in c and extra in c for c in commands)
    assert installs_raymod(config["setup_commands"], "data")
    # a node type's own worker_setup_commands replace the global ones: the GPU type must
    # install raymod (with CuPy) and Ray itself
    for node_type in gpu:
        commands = node_type["worker_setup_commands"]
        assert installs_raymod(commands, "gpu")
        assert any('"ray[default]==' in c for c in commands)
    pins = [c for c in config["setup_commands"] if '"ray[default]==' in c]
    assert len(pins) == 1


def test_local_config_is_loopback_only():
    config = load(LOCAL)
    provider = config["provider"]
    assert provider == {"type": "local", "head_ip": "127.0.0.1", "worker_ips": []}
    prepared = prepare_config(config)
    [node_type] = prepared["available_node_types"].values()
    assert (node_type["min_workers"], node_type["max_workers"]) == (0, 0)
    start = " ".join(prepared["head_start_ray_commands"])
    assert "--node-ip-address=127.0.0.1" in start and "--dashboard-host=127.0.0.1" in start
    assert "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0" in start


@pytest.mark.parametrize("path", [CLOUD, LOCAL], ids=["cluster.yaml", "cluster-local.yaml"])
def test_file_mount_sources_exist_in_the_repo(path):
    for source in load(path)["file_mounts"].values():
        assert (ROOT / source).exists(), source


# ---- ray up / submit / down on 127.0.0.1 --------------------------------------------------------
def _ray_up_blocker():
    """Why the ray up / submit / down test cannot run here, or None."""
    if os.environ.get("RAYMOD_TEST_RAY_UP") != "1":
        return ("set RAYMOD_TEST_RAY_UP=1 to run it: ray up and ray down run `ray stop`, which "
                "stops every Ray process of this user on the machine (the test session's "
                "cluster and any other)")
    user = load(LOCAL)["auth"]["ssh_user"]
    if _ssh_probe(user).returncode != 0:
        failure = _start_loopback_sshd(user)
        if failure:
            return failure
    for tool in ("ssh", "rsync", "ray"):
        if shutil.which(tool) is None:
            return f"needs {tool} on PATH"
    probe = _ssh_probe(user)
    if probe.returncode != 0:
        return (f"needs passwordless ssh to {user}@127.0.0.1 with ray and raymod importable by "
                f"the login shell's python (ssh said: {probe.stderr.strip()[-200:]})")
    return None


def _ssh_probe(user):
    return subprocess.run(
        ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
         "ConnectTimeout=5", f"{user}@127.0.0.1", "python -c 'import ray, raymod'"],
        capture_output=True, text=True, timeout=30, check=False) \
        if shutil.which("ssh") else subprocess.CompletedProcess([], 255, "", "no ssh client")


def _start_loopback_sshd(user):
    """As root on Debian/Ubuntu: install openssh-server and rsync if missing, start sshd on
    127.0.0.1 only (keys, no passwords) and authorize a key of this user for itself.
    Returns why that cannot be done here, or None."""
    if os.geteuid() != 0 or user != "root":
        return "no ssh server on 127.0.0.1, and only root can install and start one"
    if not (shutil.which("sshd") or os.path.exists("/usr/sbin/sshd")) or not shutil.which("rsync"):
        if not shutil.which("apt-get"):
            return "no sshd or rsync, and no apt-get to install them"
        apt = subprocess.run(["apt-get", "install", "-y", "-q", "openssh-server", "rsync"],
                             env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"),
                             capture_output=True, text=True, timeout=600, check=False)
        if apt.returncode != 0:
            return f"installing openssh-server failed: {apt.stderr.strip()[-200:]}"
    home = Path.home() / ".ssh"
    home.mkdir(mode=0o700, exist_ok=True)
    key = home / "id_ed25519"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                       check=True, timeout=60)
    authorized = home / "authorized_keys"
    public = (home / "id_ed25519.pub").read_text()
    if public not in (authorized.read_text() if authorized.exists() else ""):
        with open(authorized, "a") as f:
            f.write(public)
    authorized.chmod(0o600)
    Path("/run/sshd").mkdir(exist_ok=True)
    subprocess.run(["ssh-keygen", "-A"], capture_output=True, timeout=60, check=False)
    sshd = subprocess.run(["/usr/sbin/sshd", "-o", "ListenAddress=127.0.0.1",
                           "-o", "PasswordAuthentication=no",
                           "-o", "PermitRootLogin=prohibit-password"],
                          capture_output=True, text=True, timeout=60, check=False)
    if sshd.returncode != 0:
        return f"starting sshd on 127.0.0.1 failed: {sshd.stderr.strip()[-200:]}"
    return None


@pytest.mark.ray
@pytest.mark.timeout(900)
def test_ray_up_submit_down_on_loopback(tmp_path):
    reason = _ray_up_blocker()
    if reason:
        pytest.skip(reason)
    config = copy.deepcopy(load(LOCAL))
    config["cluster_name"] = f"raymod-test-{os.getpid()}"
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(config))
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    env.pop("RAY_ADDRESS", None)

    def ray(*args, timeout=300):
        return subprocess.run(["ray", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=timeout, check=False)

    try:
        up = ray("up", str(path), "-y", "--no-config-cache", timeout=600)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        out = tmp_path / "run"
        submit = ray("submit", str(path), "jobs/train_digits.py", "--address", "auto",
                     "--epochs", "1", "--workers", "2", "--checkpoint", str(out / "d"),
                     "--metrics", str(out / "m.jsonl"))
        text = submit.stdout + submit.stderr
        assert submit.returncode == 0, text[-4000:]
        assert "final validation accuracy" in text
        assert (out / "d-0001.params").exists()
    finally:
        down = ray("down", str(path), "-y", timeout=300)
        print(down.stdout[-2000:], down.stderr[-2000:], file=sys.stderr)
