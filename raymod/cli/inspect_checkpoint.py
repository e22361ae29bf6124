"""``raymod inspect``: summarise a checkpoint without unpickling anything."""
from __future__ import annotations

import argparse
import json
import math
import os
import posixpath
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from .errors import CLIError, one_line as _one_line

_PARAMS_RE = re.compile(r"^(?P<prefix>.+)-(?P<epoch>\d+)\.params$")
_STATES_RE = re.compile(r"^(?P<prefix>.+)-(?P<epoch>\d+)\.states$")
_SYMBOL_SUFFIX = "-symbol.json"
_STEP_PREFIX = "step-"
_FIT_FILES = ("model-symbol.json", "model-0000.params", "model-0000.states",
              "position.json")


class _Files:
    """Reads local paths or ``pyarrow.fs`` URIs (``s3://``, ``file://``...)."""

    def __init__(self, location: str):
        import pyarrow.fs as pafs

        self._pafs = pafs
        if "://" in location:
            try:
                self.fs, self.path = pafs.FileSystem.from_uri(location)
            except (ValueError, OSError) as err:
                raise CLIError(f"cannot open {location!r}: {_one_line(err)}") from None
        else:
            self.fs, self.path = pafs.LocalFileSystem(), os.path.abspath(location)

    def kind(self, path: str) -> str:
        """'file', 'dir' or 'missing'."""
        info = self.fs.get_file_info(path)
        if info.type == self._pafs.FileType.File:
            return "file"
        if info.type == self._pafs.FileType.Directory:
            return "dir"
        return "missing"

    def listdir(self, path: str) -> list[tuple[str, str]]:
        """(base name, 'file' | 'dir') of the entries of ``path``."""
        infos = self.fs.get_file_info(self._pafs.FileSelector(path, allow_not_found=True))
        return [(i.base_name, "dir" if i.type == self._pafs.FileType.Directory else "file")
                for i in infos]

    def read(self, path: str) -> bytes:
        try:
            with self.fs.open_input_stream(path) as f:
                return f.read()
        except (OSError, ValueError) as err:
            raise CLIError(f"cannot read {path}: {_one_line(err)}") from None

    def size(self, path: str) -> int:
        return int(self.fs.get_file_info(path).size or 0)


def _locate(files: _Files, epoch: int | None) -> dict:
    """What the CHECKPOINT argument names: a ``{"kind": "module"|"fit", ...}`` dict of paths."""
    path = files.path
    kind = files.kind(path)
    if kind == "dir":
        return _locate_dir(files, path, epoch)
    if kind == "file":
        base, parent = posixpath.basename(path), posixpath.dirname(path)
        if base in _FIT_FILES:
            return _fit_files(files, parent)
        for regex in (_PARAMS_RE, _STATES_RE):
            m = regex.match(path)
            if m:
                if epoch is not None and epoch != int(m["epoch"]):
                    raise CLIError(f"{path} is epoch {int(m['epoch'])}, not {epoch}", 2)
                return _module_files(files, m["prefix"], int(m["epoch"]))
        if path.endswith(_SYMBOL_SUFFIX):
            return _module_files(files, path[:-len(_SYMBOL_SUFFIX)], epoch)
        if path.endswith(".params"):  # a lone parameter file, not named PREFIX-NNNN.params
            return {"kind": "params", "params": path, "symbol": None, "states": None,
                    "position": None, "label": path}
        raise CLIError(f"{path} is not a checkpoint file (expected PREFIX-NNNN.params, "
                       "PREFIX-symbol.json, PREFIX-NNNN.states or a step-* folder)", 2)
    return _module_files(files, path, epoch)  # a prefix


def _locate_dir(files: _Files, path: str, epoch: int | None) -> dict:
    entries = dict(files.listdir(path))
    if "model-0000.params" in entries:
        return _fit_files(files, path)
    if any(k == "dir" and n.startswith(_STEP_PREFIX) for n, k in entries.items()):
        return _newest_step(files, path)
    prefixes = sorted({m["prefix"] for n in entries
                       for m in [_PARAMS_RE.match(n)] if m})
    if len(prefixes) == 1:
        return _module_files(files, posixpath.join(path, prefixes[0]), epoch)
    if prefixes:
        raise CLIError(f"{path} holds checkpoints of several prefixes ({', '.join(prefixes)}): "
                       "name one, e.g. " + posixpath.join(path, prefixes[0]), 2)
    raise CLIError(f"no checkpoint in {path} (no PREFIX-NNNN.params, no step-* folder)")


def _newest_step(files: _Files, path: str) -> dict:
    """The newest complete ``step-*`` folder of a fit checkpoint root (its manifest vouches
    for it; see :mod:`raymod.module.fit_checkpoint`), naming the older complete ones."""
    from ..module.fit_checkpoint import scan_steps

    try:
        found = scan_steps(files.fs, path)
    except OSError as err:
        raise CLIError(f"cannot list {path}: {_one_line(err)}") from None
    names = [posixpath.basename(folder) for folder in found.folders]
    if not names:
        raise CLIError(f"no complete checkpoint in {path}: its {len(found.stale)} step folder(s) "
                       "have no manifest (saves that did not finish)")
    located = _fit_files(files, posixpath.join(path, names[-1]))
    located["others"] = names[:-1]
    return located


def _fit_files(files: _Files, folder: str) -> dict:
    found = {"kind": "fit", "label": folder, "folder": folder}
    for key, name in zip(("symbol", "params", "states", "position"), _FIT_FILES):
        full = posixpath.join(folder, name)
        found[key] = full if files.kind(full) == "file" else None
    if found["params"] is None:
        raise CLIError(f"{folder} is not a complete fit checkpoint: model-0000.params is missing")
    return found


def _module_files(files: _Files, prefix: str, epoch: int | None) -> dict:
    parent, base = posixpath.dirname(prefix), posixpath.basename(prefix)
    pattern = re.compile(re.escape(base) + r"-(\d+)\.params$")
    epochs = sorted(int(m.group(1)) for n, k in files.listdir(parent) if k == "file"
                    for m in [pattern.match(n)] if m)
    if not epochs:
        raise CLIError(f"no checkpoint at {prefix} (looked for {prefix}-NNNN.params)")
    if epoch is None:
        epoch = epochs[-1]
    elif epoch not in epochs:
        listed = ", ".join(str(e) for e in epochs)
        raise CLIError(f"{prefix} has no epoch {epoch} (epochs saved: {listed})")
    names = {"symbol": f"{prefix}{_SYMBOL_SUFFIX}", "params": "%s-%04d.params" % (prefix, epoch),
             "states": "%s-%04d.states" % (prefix, epoch)}
    found: dict[str, Any] = {"kind": "module", "label": prefix, "prefix": prefix,
                             "epoch": epoch, "epochs": epochs, "position": None}
    for key, full in names.items():
        found[key] = full if files.kind(full) == "file" else None
    if found["params"] is None:  # written with another width than %04d
        found["params"] = posixpath.join(parent, next(
            n for n, _ in files.listdir(parent)
            for m in [pattern.match(n)] if m and int(m.group(1)) == epoch))
    return found


# ---- inspect: reading ---------------------------------------------------------------------------
def _norm(array: Any) -> float:
    """The L2 norm in float64 (NaN for non-numeric arrays)."""
    import numpy as np

    a = np.asarray(array)
    if a.dtype.kind not in "biufc":
        return float("nan")
    return float(np.linalg.norm(a.astype(np.complex128 if a.dtype.kind == "c"
                                          else np.float64).ravel()))


def _array_info(array: Any) -> dict:
    import numpy as np

    a = np.asarray(array)
    return {"shape": list(a.shape), "dtype": str(a.dtype), "size": int(a.size),
            "bytes": int(a.nbytes), "norm": _norm(a)}


def _symbol_report(text: str, param_names: Iterable[str]) -> dict:
    """Op counts from the JSON itself; arguments/outputs from raymod's loader when it can."""
    try:
        graph = json.loads(text)
        nodes = graph["nodes"]
    except (ValueError, KeyError, TypeError) as err:
        raise CLIError(f"symbol file is not MXNet symbol JSON ({_one_line(err)})") from None
    counts: dict[str, int] = {}
    for node in nodes:
        if node.get("op", "null") != "null":
            counts[node["op"]] = counts.get(node["op"], 0) + 1
    report: dict[str, Any] = {"ops": sum(counts.values()), "op_counts": dict(sorted(
        counts.items())), "variables": sum(1 for n in nodes if n.get("op", "null") == "null")}
    try:
        from ..symbol import load_json

        sym = load_json(text)
        report.update(arguments=list(sym.list_arguments()), outputs=list(sym.list_outputs()),
                      auxiliary_states=list(sym.list_auxiliary_states()))
    except Exception as err:  # an op raymod lacks: fall back to the graph's own lists
        report["load_error"] = _one_line(err)
        names = [n.get("name") for n in nodes]
        report.update(arguments=[names[i] for i in graph.get("arg_nodes", [])],
                      outputs=[f"{names[h[0]]}_output" for h in graph.get("heads", [])],
                      auxiliary_states=[])
    params = set(param_names)
    report["inputs"] = [a for a in report["arguments"] if a not in params]
    return report


def _state_arrays(state: Any, path: str = "") -> list[tuple[str, Any]]:
    """(path, array-or-scalar) leaves of a nested optimizer state."""
    if state is None:
        return []
    if isinstance(state, (tuple, list)):
        return [leaf for i, s in enumerate(state) for leaf in _state_arrays(s, f"{path}[{i}]")]
    return [(path or "state", state)]


def _states_report(blob: bytes, param_order: list[str]) -> dict:
    """Load with ``Updater.set_states`` (npz + JSON, no pickle) and summarise."""
    from ..optimizer import Optimizer, Updater
    from ..optimizer.optimizer import registered_name

    placeholder = Optimizer()
    updater = Updater(placeholder)
    try:
        updater.set_states(blob)
    except (ValueError, KeyError, TypeError) as err:
        raise CLIError(f"optimizer states are not raymod's (npz + JSON) format: "
                       f"{_one_line(err)}") from None
    opt = updater.optimizer
    saved_opt = opt is not placeholder
    idx2name = dict(getattr(opt, "idx2name", {}) or {}) if saved_opt else {}
    keys = list(updater.states)
    int_keys = [k for k in keys if isinstance(k, int)]
    per_name = 1
    if int_keys and param_order and not idx2name and (max(int_keys) + 1) % len(param_order) == 0:
        per_name = (max(int_keys) + 1) // len(param_order)
    counts = getattr(opt, "_all_index_update_counts", {}) or {}
    entries = []
    for key in keys:
        if isinstance(key, str):
            name, source = key, "key"
        elif key in idx2name:
            name, source = idx2name[key], "optimizer"
        elif param_order and isinstance(key, int) and key // per_name < len(param_order):
            name = param_order[key // per_name]
            if per_name > 1:
                name += f" (device {key % per_name})"
            source = "order"
        else:
            name, source = None, None
        leaves = []
        for path, value in _state_arrays(updater.states[key]):
            if hasattr(value, "shape"):
                leaves.append({"path": path, **_array_info(value)})
            else:
                leaves.append({"path": path, "value": value})
        updates = {int(dev): int(c[key]) for dev, c in counts.items() if key in c}
        # a kvstore keys its states by parameter name: those have no index
        entries.append({"index": None if isinstance(key, str) else key, "name": name,
                        "name_from": source,
                        "updates": updates.get(0, max(updates.values(), default=None)),
                        "arrays": leaves})
    report: dict[str, Any] = {"num_update": int(opt.num_update), "count": len(entries),
                              "optimizer": registered_name(type(opt)) if saved_opt else None,
                              "states": entries}
    if saved_opt:
        report["config"] = {k: v for k, v in opt.get_config().items()
                            if isinstance(v, (int, float, str, bool, type(None)))}
    return report


def _inspect(location: str, epoch: int | None) -> dict:
    from ..base import MXNetError
    from ..ndarray_io import load_frombuffer

    files = _Files(location)
    found = _locate(files, epoch)
    report: dict[str, Any] = {"checkpoint": {k: v for k, v in found.items()}, "warnings": []}
    report["checkpoint"]["sizes"] = {k: files.size(found[k]) for k in
                                     ("symbol", "params", "states", "position") if found.get(k)}
    try:
        saved = load_frombuffer(files.read(found["params"]))
    except MXNetError as err:
        raise CLIError(f"{found['params']} is not an MXNet parameter file: "
                       f"{_one_line(err)}") from None
    if not isinstance(saved, dict):
        saved = {f"[{i}]": a for i, a in enumerate(saved)}
    params = []
    for key, value in saved.items():
        kind, sep, name = key.partition(":")
        if not sep or kind not in ("arg", "aux"):
            kind, name = "", key
        params.append({"name": name, "kind": kind, **_array_info(value)})
    report["params"] = params
    names = {p["name"] for p in params}

    if found.get("symbol"):
        report["symbol"] = _symbol_report(files.read(found["symbol"]).decode("utf-8"), names)
        sym = report["symbol"]
        if "load_error" in sym:
            report["warnings"].append(f"raymod cannot load the symbol: {sym['load_error']}")
        args = set(sym["arguments"]) | set(sym["auxiliary_states"])
        extra = sorted(names - args)
        if extra:
            report["warnings"].append(f"parameters not in the symbol: {', '.join(extra)}")
        order = [a for a in sym["arguments"] if a in names]
    else:
        report["symbol"] = None
        if found["kind"] != "params":
            report["warnings"].append("no symbol file")
        order = [p["name"] for p in params if p["kind"] in ("arg", "")]

    report["optimizer"] = None
    if found.get("states"):
        try:
            report["optimizer"] = _states_report(files.read(found["states"]), order)
        except CLIError as err:
            report["warnings"].append(f"{found['states']}: {err}")
            report["optimizer_error"] = str(err)
        else:
            shapes = {p["name"]: p["shape"] for p in params}
            for entry in report["optimizer"]["states"]:
                want = shapes.get((entry["name"] or "").split(" (device")[0])
                got = [a["shape"] for a in entry["arrays"] if "shape" in a]
                if want is not None and any(g != want for g in got):
                    report["warnings"].append(
                        f"optimizer state {entry['index']} ({entry['name']}) has shape "
                        f"{_fmt_shape(got[0])}, its parameter {_fmt_shape(want)}: the names "
                        "inferred from the parameter order may be wrong")

    report["position"] = None
    if found.get("position"):
        try:
            report["position"] = json.loads(files.read(found["position"]).decode("utf-8"))
        except ValueError as err:
            report["warnings"].append(f"{found['position']} is not JSON: {_one_line(err)}")
    return report


# ---- inspect: printing --------------------------------------------------------------------------
def _fmt_float(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _fmt_shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n} B"  # pragma: no cover


def _table(rows: list[list[str]], headers: list[str], indent: str = "  ") -> list[str]:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = [indent + "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    for row in rows:
        lines.append(indent + "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    return lines


def _wrap_names(names: Sequence[str], indent: str = "    ", width: int = 96) -> list[str]:
    lines, line = [], indent
    for i, name in enumerate(names):
        piece = name + (", " if i < len(names) - 1 else "")
        if len(line) + len(piece) > width and line.strip():
            lines.append(line.rstrip())
            line = indent
        line += piece
    if line.strip():
        lines.append(line.rstrip())
    return lines or [indent + "none"]


def _render(report: dict) -> str:
    out: list[str] = []
    ck = report["checkpoint"]
    if ck["kind"] == "module":
        epochs = ck["epochs"]
        out.append(f"checkpoint {ck['prefix']}, epoch {ck['epoch']} (Module.save_checkpoint; "
                   f"epochs saved: {', '.join(str(e) for e in epochs)})")
    elif ck["kind"] == "fit":
        others = ck.get("others") or []
        extra = f"; {len(others)} older: {', '.join(others)}" if others else ""
        out.append(f"checkpoint {ck['folder']} (fit(checkpoint=...){extra})")
    else:
        out.append(f"parameter file {ck['params']}")
    for key in ("symbol", "params", "states", "position"):
        if ck.get(key):
            out.append(f"  {key + ':':<10}{ck[key]}  ({_fmt_bytes(ck['sizes'][key])})")
        elif ck["kind"] != "params" and not (key == "position" and ck["kind"] == "module"):
            out.append(f"  {key + ':':<10}(none)")

    sym = report.get("symbol")
    if sym:
        ops = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in sym["op_counts"].items())
        out += ["", f"symbol: {sym['ops']} ops ({ops}), {sym['variables']} variables"]
        out.append(f"  arguments ({len(sym['arguments'])}):")
        out += _wrap_names(sym["arguments"])
        out.append("  inputs (arguments without saved values): "
                   f"{', '.join(sym['inputs']) or 'none'}")
        out.append(f"  outputs: {', '.join(sym['outputs']) or 'none'}")
        out.append(f"  auxiliary states: {', '.join(sym['auxiliary_states']) or 'none'}")

    params = report["params"]
    total = sum(p["size"] for p in params)
    nbytes = sum(p["bytes"] for p in params)
    out += ["", f"parameters: {len(params)} arrays, {total:,} values, {_fmt_bytes(nbytes)}"]
    if params:
        rows = [[p["name"], p["kind"], _fmt_shape(p["shape"]), p["dtype"], _fmt_float(p["norm"])]
                for p in params]
        out += _table(rows, ["name", "kind", "shape", "dtype", "L2 norm"])

    opt = report.get("optimizer")
    if opt is not None:
        who = (f"optimizer {opt['optimizer']}" if opt["optimizer"] else
               "optimizer not saved in the file")
        named = {e["name_from"] for e in opt["states"]}
        how = " (names from the symbol's parameter order)" if "order" in named else ""
        out += ["", (f"optimizer states: {opt['count']} indices, num_update "
                     f"{opt['num_update']}, {who}{how}")]
        if opt.get("config"):
            out.append("  settings: " + ", ".join(f"{k}={_fmt_float(v)}"
                                                 for k, v in sorted(opt["config"].items())))
        rows = []
        for e in opt["states"]:
            if not e["arrays"]:
                desc = "none (stateless)"
            else:
                desc = "; ".join(
                    (f"{a['path']} {_fmt_shape(a['shape'])} {a['dtype']} "
                     f"norm {_fmt_float(a['norm'])}") if "shape" in a
                    else f"{a['path']} = {_fmt_float(a['value'])}" for a in e["arrays"])
            index = "-" if e["index"] is None else str(e["index"])
            rows.append([index, e["name"] or "?", _fmt_float(e["updates"]), desc])
        if rows:
            out += _table(rows, ["index", "name", "updates", "state"])
    elif report.get("optimizer_error"):
        out += ["", f"optimizer states: unreadable ({report['optimizer_error']})"]
    elif ck["kind"] != "params":
        out += ["", "optimizer states: none saved"]

    pos = report.get("position")
    if pos is not None:
        out += ["", (f"position: epoch {pos.get('epoch')}, batch {pos.get('nbatch')} "
                     f"(batches done in the epoch), global step {pos.get('step')}")]
        sampler = pos.get("sampler")
        if sampler:
            carry = sampler.get("carry") or []
            leftover = sampler.get("leftover")
            out.append(f"  sampler: epoch {sampler.get('epoch')}, cursor {sampler.get('cursor')},"
                       f" seed {sampler.get('seed')}, {len(carry)} carried rows, "
                       f"{'no' if leftover is None else len(leftover)} leftover rows")
        else:
            out.append("  sampler: none (the iterator is skipped forward batch by batch)")
        if pos.get("bucket_keys"):
            out.append(f"  bucket keys: {', '.join(str(k) for k in pos['bucket_keys'])}")
        if "random" in pos:
            out.append(f"  random state: {pos['random'].get('bit_generator', 'saved')}")
        events = pos.get("membership") or []
        out.append(f"  membership log: {len(events)} events")
        for ev in events:
            extra = {k: v for k, v in ev.items() if k not in ("event", "rank", "time",
                                                              "workers", "pid")}
            detail = ", ".join(f"{k} {_fmt_float(v)}" for k, v in extra.items())
            parts = ([f"rank {ev['rank']}"] if "rank" in ev else []) + \
                ([f"{ev['workers']} alive"] if "workers" in ev else []) + \
                ([detail] if detail else [])  # recoveries name no rank
            out.append(f"    {ev.get('event', '?'):<20} {', '.join(parts)}")

    if report["warnings"]:
        out.append("")
        out += [f"warning: {w}" for w in report["warnings"]]
    return "\n".join(out)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and not hasattr(value, "shape"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def _cmd_inspect(args: argparse.Namespace) -> int:
    report = _inspect(args.checkpoint, args.epoch)
    if args.json:
        print(json.dumps(_json_safe(report), indent=1))
    else:
        print(_render(report))
    if report.get("optimizer_error"):
        print(f"raymod inspect: error: {report['optimizer_error']}", file=sys.stderr)
        return 1
    return 0


