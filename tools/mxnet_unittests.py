"""Count how many of MXNet 1.9.1's own unit tests pass with ``mxnet`` meaning raymod.

    python tools/mxnet_unittests.py /tmp/mxnet-1.9.1/tests/python/unittest
    python tools/mxnet_unittests.py TESTS_DIR --files test_module test_io --json out.json

Runs each test file of MXNet's ``tests/python/unittest`` (default: the Module-era files listed
in FILES) with pytest in its own process, with ``import mxnet`` resolving to raymod's
compatibility layer (a pytest plugin written to a temporary folder installs it; nothing of
MXNet's is copied into raymod). MXNet's test helpers need ``nose`` (a small stand-in is
provided when it is not installed) and two support files of MXNet's tree,
``tests/python/common/models.py`` and ``tests/python/train/test_bucketing.py``; when a file
is absent, a stand-in raises on use, so only the tests that need it fail (a file that is there
is imported by the tests as it is, and any error importing it shows).

MNIST-sized idx files with synthetic pixels are written where test_MNISTIter looks.

Each test is counted once as passed, failed, or not applicable: MXNet skipped it, or it
failed on a feature raymod leaves out (the compatibility layer's NotSupportedError names it:
Gluon, autograd, ...). Sparse storage is provided, so a sparse test that fails counts as
failed (``--files test_sparse_ndarray test_sparse_operator``). Prints a table per file and
the failures' first lines.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import numpy as np

FILES = ["test_module", "test_kvstore", "test_optimizer", "test_metric", "test_init",
         "test_rnn", "test_executor", "test_io", "test_model_parallel",
         "test_contrib_svrg_module", "test_contrib_svrg_optimizer"]

# what the pytest plugin does in each test process, before MXNet's test file is imported
PLUGIN = r'''
import os, sys, types
import raymod.compat
raymod.compat.install()
TESTS = os.environ["MXCOMPAT_TESTS"]
sys.path[:0] = [TESTS, os.path.join(TESTS, "..", "common"), os.path.join(TESTS, "..", "train")]

def _stand_in(name, what):
    mod = types.ModuleType(name)
    def __getattr__(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        def missing(*args, **kwargs):
            raise RuntimeError(f"MXNet's support file {what} is missing: {name}.{attr}")
        return missing
    mod.__getattr__ = __getattr__
    sys.modules[name] = mod

# a stand-in only for a support file that is absent: one that is there is left for the tests
# to import themselves, so an error in importing it shows as it is
for _name, _what, _folder in (("models", "tests/python/common/models.py", "common"),
                              ("test_bucketing", "tests/python/train/test_bucketing.py", "train")):
    if not os.path.isfile(os.path.join(TESTS, "..", _folder, _name + ".py")):
        _stand_in(_name, _what)

try:
    import nose.tools  # noqa: F401
except ImportError:  # nose does not install on Python 3.10+: the names MXNet's tests use
    import functools, unittest, pytest
    nose = types.ModuleType("nose"); tools = types.ModuleType("nose.tools")
    def raises(*exc):
        def deco(f):
            @functools.wraps(f)
            def wrapper(*a, **k):
                with pytest.raises(exc):
                    f(*a, **k)
            return wrapper
        return deco
    def make_decorator(func):
        def deco(newfunc):
            return functools.wraps(func)(newfunc)
        return deco
    _tc = unittest.TestCase()
    tools.raises, tools.make_decorator = raises, make_decorator
    tools.assert_raises, tools.assert_equal, tools.assert_true = (
        _tc.assertRaises, _tc.assertEqual, _tc.assertTrue)
    tools.ok_ = lambda expr, msg=None: _tc.assertTrue(expr, msg)
    tools.eq_ = lambda a, b, msg=None: _tc.assertEqual(a, b, msg)
    tools.with_setup = lambda setup=None, teardown=None: (lambda f: f)
    nose.tools = tools
    sys.modules["nose"], sys.modules["nose.tools"] = nose, tools
'''

_NOT_SUPPORTED = re.compile(r"(\S+): (.+?) is not supported by raymod's MXNet compatibility")


def _run_file(tests: str, name: str, work: str, timeout: int) -> str:
    """Run one test file; the path of its JUnit XML report."""
    report = os.path.join(work, f"{name}.xml")
    env = {**os.environ, "MXCOMPAT_TESTS": tests,
           "PYTHONPATH": os.pathsep.join([work, os.environ.get("PYTHONPATH", "")]),
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "pytest", os.path.join(tests, f"{name}.py"), "-q",
           "-p", "mxcompat_plugin", "-p", "no:cacheprovider", "--rootdir", work,
           "-c", os.path.join(work, "pytest.ini"), f"--junitxml={report}",
           f"--timeout={timeout}"]
    with open(os.path.join(work, f"{name}.log"), "w") as log:
        subprocess.run(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                       timeout=timeout * 40)
    return report


def _classify(case: ET.Element) -> tuple[str, str]:
    """(outcome, reason) of one JUnit test case."""
    for tag in ("failure", "error"):
        node = case.find(tag)
        if node is not None:
            text = (node.get("message") or "") + "\n" + (node.text or "")
            hit = _NOT_SUPPORTED.search(text)
            if hit:
                return "n/a", hit.group(2)
            if "MXNet's support file" in text:
                return "n/a", "MXNet support file missing from the tests folder"
            first = (node.get("message") or text.strip()).strip().splitlines()
            return "failed", (first[0] if first else tag)[:160]
    node = case.find("skipped")
    if node is not None:
        return "n/a", "skipped by MXNet's test: " + (node.get("message") or "")[:80]
    return "passed", ""


def _write_mnist(folder: str) -> None:
    """MNIST-sized idx-ubyte files (60000 / 10000 rows of 28x28; synthetic pixels) where
    MXNet's tests look for them, so that test_MNISTIter runs offline."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    for prefix, rows in (("train", 60000), ("t10k", 10000)):
        images = rng.integers(0, 256, size=(rows, 28, 28), dtype=np.uint8)
        labels = (np.arange(rows) % 10).astype(np.uint8)
        for kind, array in (("images-idx3", images), ("labels-idx1", labels)):
            with open(os.path.join(folder, f"{prefix}-{kind}-ubyte"), "wb") as f:
                f.write(bytes([0, 0, 0x08, array.ndim]))
                f.write(struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes())


def count(tests: str, files: list[str], timeout: int = 300) -> dict:
    """Run ``files`` of MXNet's test folder ``tests``; per file: outcome counts and reasons."""
    work = tempfile.mkdtemp(prefix="mxcompat-")
    _write_mnist(os.path.join(work, "data"))
    with open(os.path.join(work, "mxcompat_plugin.py"), "w") as f:
        f.write(PLUGIN)
    with open(os.path.join(work, "pytest.ini"), "w") as f:
        f.write("[pytest]\naddopts = -ra\n")
    results = {}
    for name in files:
        report = _run_file(tests, name, work, timeout)
        cases = ET.parse(report).getroot().iter("testcase") if os.path.exists(report) else []
        outcomes = collections.Counter()
        reasons = collections.defaultdict(collections.Counter)
        for case in cases:
            outcome, reason = _classify(case)
            outcomes[outcome] += 1
            if reason:
                reasons[outcome][f"{case.get('name')}: {reason}" if outcome == "failed"
                                 else reason] += 1
        results[name] = {"passed": outcomes["passed"], "failed": outcomes["failed"],
                         "n/a": outcomes["n/a"],
                         "reasons": {k: dict(v) for k, v in reasons.items()}}
    results["_work"] = work
    return results


def _print(results: dict) -> None:
    print("| file | passed | failed | not applicable (reason: count) |")
    print("|---|---|---|---|")
    totals = collections.Counter()
    for name, r in results.items():
        if name.startswith("_"):
            continue
        na = "; ".join(f"{k}: {v}" for k, v in r["reasons"].get("n/a", {}).items())
        na = f" ({na})" if na else ""
        print(f"| {name} | {r['passed']} | {r['failed']} | {r['n/a']}{na} |")
        totals.update({k: r[k] for k in ("passed", "failed", "n/a")})
    print(f"| total | {totals['passed']} | {totals['failed']} | {totals['n/a']} |")
    print("\nfailures:")
    for name, r in results.items():
        if not name.startswith("_"):
            for reason in r["reasons"].get("failed", {}):
                print(f"  {name}::{reason}")
    print(f"\nlogs and JUnit reports: {results['_work']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tests", nargs="?",
                        default=os.environ.get("RAYMOD_MXNET_TESTS",
                                               "/tmp/mxnet-1.9.1/tests/python/unittest"),
                        help="MXNet's tests/python/unittest folder (default: "
                             "$RAYMOD_MXNET_TESTS or %(default)s)")
    parser.add_argument("--files", nargs="+", default=FILES, metavar="NAME",
                        help="test files to run, without .py (default: the Module-era ones)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per test")
    parser.add_argument("--json", metavar="PATH", help="also write the counts as JSON")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.tests):
        parser.error(f"tests folder {args.tests!r} does not exist")
    missing = [f for f in args.files if not os.path.isfile(os.path.join(args.tests, f + ".py"))]
    if missing:
        parser.error(f"no such test file(s) in {args.tests}: {', '.join(missing)}")
    results = count(os.path.abspath(args.tests), args.files, args.timeout)
    _print(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
