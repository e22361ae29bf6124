"""A local cluster whose dashboard port is taken between raymod choosing it and Ray binding it
(another cluster starting on the machine) starts anyway, on another port."""
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import socket
    import raymod as rm
    from raymod.cluster import local

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    taken = held.getsockname()[1]
    choices = iter([taken])
    real = local._dashboard_port
    local._dashboard_port = lambda preferred=local.DASHBOARD_PORT: next(choices, None) or real(0)
    info = rm.cluster.init(num_cpus=1)
    port = int(info["dashboard_url"].rsplit(":", 1)[1])
    assert port != taken, (port, taken)
    print("dashboard on", port, "not", taken)
    rm.cluster.shutdown()
""")


def test_a_taken_dashboard_port_is_replaced_by_a_free_one():
    # a process of its own: the suite's session cluster is already up in this one
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "dashboard on" in done.stdout
