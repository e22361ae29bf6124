"""A local cluster asked for a dashboard port that another process holds (another cluster
starting on the machine) starts anyway: the next try lets Ray's dashboard bind a port itself."""
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import socket
    import raymod as rm

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    taken = held.getsockname()[1]
    info = rm.cluster.init(num_cpus=1, dashboard_port=taken)
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
