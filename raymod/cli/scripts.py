"""``raymod train`` and ``raymod bench``: run a script of ``jobs/`` or ``bench/``."""
from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import CLIError



def _search_dirs(folder: str) -> list[Path]:
    """``./<folder>``, then ``<folder>`` beside the installed package (a source checkout)."""
    seen, dirs = set(), []
    for base in (Path.cwd(), Path(__file__).resolve().parents[2]):
        path = (base / folder).resolve()
        if path.is_dir() and path not in seen:
            seen.add(path)
            dirs.append(path)
    return dirs


def _scripts(folder: str, stem_prefix: str) -> dict[str, Path]:
    """Short name -> script for ``<folder>/<stem_prefix><name>.py`` (earlier folders win).

    Scripts starting with ``_`` are helpers and are skipped; with ``stem_prefix`` only the
    scripts whose name starts with it are listed (``bench_`` skips ``handwritten.py``).
    """
    found: dict[str, Path] = {}
    for directory in _search_dirs(folder):
        for path in sorted(directory.glob("*.py")):
            stem = path.stem
            if stem.startswith("_") or not stem.startswith(stem_prefix):
                continue
            name = stem[len(stem_prefix):] or stem
            found.setdefault(name, path)
    return found


def _resolve_script(name: str, known: dict[str, Path], stem_prefix: str) -> Path | None:
    """The script meant by ``name``: a short name, a file stem, or a path to a .py file."""
    if name in known:
        return known[name]
    stem = name.removesuffix(".py")
    if stem.startswith(stem_prefix) and stem[len(stem_prefix):] in known:
        return known[stem[len(stem_prefix):]]
    for path in known.values():
        if path.stem == stem:
            return path
    if name.endswith(".py") or os.sep in name or "/" in name:
        path = Path(name)
        if path.is_file():
            return path
    return None


def _summary_line(path: Path) -> str:
    """The first line of a script's docstring (read with ``ast``; the script is not run)."""
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    except (OSError, SyntaxError, ValueError):
        return ""
    return doc.strip().splitlines()[0] if doc else ""


def _display(path: Path) -> str:
    """``path`` relative to the current directory where it lies under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _list_scripts(title: str, scripts: dict[str, Path], out: Any = None) -> None:
    out = out or sys.stdout
    if not scripts:
        print(f"no {title} found (looked for jobs/ and bench/ in the current directory and "
              "beside the raymod package)", file=out)
        return
    print(f"{title}:", file=out)
    rows = [(name, _display(path), _summary_line(path)) for name, path in scripts.items()]
    width = max(len(r[0]) for r in rows)
    pwidth = max(len(r[1]) for r in rows)
    for name, shown, summary in rows:
        print(f"  {name:<{width}}  {shown:<{pwidth}}  {summary}".rstrip(), file=out)


def _run_python(script: Path, args: Sequence[str]) -> int:
    """Run ``python script args...`` in the current directory; its exit status.

    Ctrl-C reaches the child too (same process group): wait for it to finish its own
    clean-up (stopping its Ray workers) before returning.
    """
    proc = subprocess.Popen([sys.executable, str(script), *args])
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        try:
            code = proc.wait(timeout=60)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            proc.kill()
            code = proc.wait()
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as shells report


def _cmd_train(args: argparse.Namespace) -> int:
    jobs = _scripts("jobs", "train_")
    if args.job is None:
        _list_scripts("jobs", jobs)
        return 0
    script = _resolve_script(args.job, jobs, "train_")
    if script is None:
        known = ", ".join(jobs) or "none found"
        raise CLIError(f"unknown job {args.job!r}; known jobs: {known} (or a path to a .py "
                       "file)", status=2)
    return _run_python(script, args.job_args)


def _cmd_bench(args: argparse.Namespace) -> int:
    benches = _scripts("bench", "bench_")
    if args.name is None:
        _list_scripts("benchmarks", benches)
        return 0
    if args.name == "all":
        status = 0
        for name, script in benches.items():
            print(f"== raymod bench {name}", flush=True)
            code = _run_python(script, args.bench_args)
            status = status or code
        return status
    script = _resolve_script(args.name, benches, "bench_")
    if script is None:
        known = ", ".join(benches) or "none found"
        raise CLIError(f"unknown benchmark {args.name!r}; known benchmarks: {known}, all",
                       status=2)
    return _run_python(script, args.bench_args)


