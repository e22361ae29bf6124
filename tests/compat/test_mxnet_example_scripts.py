"""Acceptance: MXNet 1.9.1's own example scripts, unmodified, through raymod's runner, in
process and on two Ray workers.

Needs MXNet 1.9.1's ``example/`` folder (not part of raymod): set ``RAYMOD_MXNET_EXAMPLES`` to
it (e.g. ``/tmp/mxnet-1.9.1/example``); skipped otherwise. The examples, their arguments, data
and metrics are those of ``tools/run_mxnet_examples.py`` (``EXAMPLES``), which these tests
drive: each run copies the example's folder to a temporary one, writes the data its download
step looks for there (offline stand-ins from compat_data.py) and runs the script with
``python -m raymod.compat`` (in process) or ``python -m raymod.compat --workers 2`` (its
modules on two workers of a local Ray cluster that run starts and stops itself), in a process
of its own.

The scripts' files are not edited. They run through a wrapper the tool writes beside them,
which seeds ``random``, numpy and ``mx.random`` with 0 (most scripts do not seed; seeded, the
two runs start from the same weights and read the same batches) and then ``runpy``s the
script with its arguments. Where a script needs what this machine or today's libraries lack,
the wrapper also stands in for exactly one name:

* sequential_module.py, matrix_factorization/train.py and word_lm/train.py hard-code GPU
  contexts: ``mx.gpu(i)`` (and ``mx.context.gpu``) give ``mx.cpu(i)``;
* svm_mnist.py imports scikit-learn's ``fetch_mldata``, removed from scikit-learn: the wrapper
  puts a function of that name into ``sklearn.datasets`` (it raises if called; the script
  reads MNIST with ``mx.test_utils.get_mnist``).

(``np.int`` in custom_softmax.py and binary ``np.fromstring`` in train_mnist.py are given back
by the runner itself, for any script.) word_lm runs with ``--dropout 0``: dropout masks are
drawn per worker, so with dropout the two runs could not agree to the digit.

Every run is seeded, so the workers run must reach the in-process figure to within the
example's ``tolerance`` in the tool: 1e-3 relative (the two workers' slices' gradients sum to
the batch's, up to float32 rounding), looser for the two whose training carries that rounding
on (custom_softmax, lstm_bucketing; one worker repeats their in-process runs exactly).

The in-process reference numbers in REFERENCE were measured by running the same scripts on
the same files with MXNet 1.9.1 (pip wheel, CPU, its default seed); raymod must reach them to
within 1% or do better.
"""
import importlib.util
import math
import os
import sys
from pathlib import Path

import pytest

EXAMPLES = os.environ.get("RAYMOD_MXNET_EXAMPLES")
pytestmark = pytest.mark.skipif(
    not EXAMPLES or not os.path.isdir(str(EXAMPLES)),
    reason="set RAYMOD_MXNET_EXAMPLES to MXNet 1.9.1's example/ folder to run these")


def _load_tool():
    path = Path(__file__).resolve().parents[2] / "tools" / "run_mxnet_examples.py"
    spec = importlib.util.spec_from_file_location("run_mxnet_examples", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


tool = _load_tool()

# MXNet 1.9.1 on the files compat_data writes (same arguments), by the tool's metric labels:
# mnist_mlp's epoch 1 (its last) and svrg's epoch 9 (-e 10)
REFERENCE = {
    "mnist_mlp": {"Train-accuracy": (0.999527, True), "Validation-accuracy": (0.895254, True)},
    "svrg_linear_regression": {"Train-mse": (0.167077, False)},
}
WORKERS = 2
# each in-process run once per session: the workers test compares against it
_IN_PROCESS = {}


def _reaches(metrics, reference):
    """raymod reaches MXNet's number to within 1% of it (or does better). One-sided: MXNet's
    number comes from its own default seed, raymod's from seed 0 here; raymod's validation
    accuracy of mnist_mlp spans about 0.89-0.92 over seeds, so being better is no failure."""
    for label, (ref, higher_is_better) in reference.items():
        got = metrics[label]
        ok = got >= 0.99 * ref if higher_is_better else got <= 1.01 * ref
        assert ok, f"{label}: raymod {got}, MXNet {ref}"


def _params(timeout_factor):
    """One parameter per example, each with a pytest timeout covering its runs."""
    return [pytest.param(e.name, id=e.name,
                         marks=pytest.mark.timeout(int(timeout_factor * e.timeout) + 120))
            for e in tool.EXAMPLES]


def _in_process(name, tmp_path_factory):
    if name not in _IN_PROCESS:
        example = tool.BY_NAME[name]
        folder = tool.prepare(example, EXAMPLES, tmp_path_factory.mktemp(name), "-inproc")
        _IN_PROCESS[name] = tool.run(example, folder)
    return _IN_PROCESS[name]


def _check_finished(result):
    """Exit 0, the script's own end reached and every metric of the example found."""
    assert result.returncode == 0, (f"{result.name} ({result.mode}) exit {result.returncode}:"
                                    f"\n{result.stderr_tail}")
    assert result.end_reached, (f"{result.name} ({result.mode}) did not reach its end:"
                                f"\n{result.stderr_tail}")
    missing = set(tool.BY_NAME[result.name].metrics) - set(result.metrics)
    assert not missing, f"{result.name} ({result.mode}): no {sorted(missing)} in its output"
    assert all(math.isfinite(v) for v in result.metrics.values()), result.metrics


@pytest.mark.parametrize("name", _params(1))
def test_in_process(name, tmp_path_factory):
    result = _in_process(name, tmp_path_factory)
    _check_finished(result)
    if name in REFERENCE:
        _reaches(result.metrics, REFERENCE[name])


@pytest.mark.ray
@pytest.mark.parametrize("name", _params(2))
def test_on_two_workers_as_in_process(name, tmp_path_factory):
    example = tool.BY_NAME[name]
    folder = tool.prepare(example, EXAMPLES, tmp_path_factory.mktemp(name), "-workers")
    result = tool.run(example, folder, workers=WORKERS)
    _check_finished(result)
    reference = _in_process(name, tmp_path_factory)
    if not reference.ok:
        pytest.fail(f"{name}: the in-process run, to compare with, failed "
                    f"(exit {reference.returncode}):\n{reference.stderr_tail}")
    problems = tool.compare(example, reference, result)
    assert not problems, f"{name}: " + "; ".join(problems)
