"""``raymod plot``: training curves from a JSON-lines metrics file.

A file that several runs appended to (the jobs' ``--metrics``: each line carries its run's
``"run"`` id) is drawn one run at a time, the newest by default; ``--run`` picks another by
index or id, or ``all`` draws them together.
"""
from __future__ import annotations

import argparse
import json
import math
import os
from typing import Any

from .argtypes import positive_int
from .errors import CLIError, one_line as _one_line



def _read_metrics(path: str) -> tuple[list[dict], int]:
    """The runs of a JSON-lines metrics file and the number of lines that were not JSON
    objects with an epoch.

    Lines are grouped by their ``"run"`` id, in the order the ids first appear (lines of
    the layout before run ids form their own groups, one after another); a group is cut
    again where the epoch goes back (a second model in one job, or an appended run without
    ids). Each run is ``{"id": str or None, "records": [...]}``.
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except (OSError, UnicodeDecodeError) as err:
        raise CLIError(f"cannot read metrics file {path}: {_one_line(err)}") from None
    runs: list[dict] = []
    open_runs: dict[Any, dict] = {}  # run id -> its newest run; None: the id-less lines
    bad = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if not isinstance(record, dict) or "epoch" not in record:
            bad += 1
            continue
        try:
            epoch = int(record["epoch"])
        except (TypeError, ValueError):
            bad += 1
            continue
        run_id = record.get("run") if isinstance(record.get("run"), str) else None
        run = open_runs.get(run_id)
        if run_id is None and runs and runs[-1] is not run:
            run = None  # id-less lines after other runs' lines: a new (appended) run
        is_epoch = record.get("event", "epoch") == "epoch"
        if run is not None and is_epoch and run["last_epoch"] is not None \
                and epoch <= run["last_epoch"]:
            run = None  # epochs went back: a second run under the same id (or none)
        if run is None:
            run = {"id": run_id, "records": [], "last_epoch": None}
            runs.append(run)
            open_runs[run_id] = run
        if is_epoch:
            run["last_epoch"] = epoch
        run["records"].append(record)
    return [{"id": r["id"], "records": r["records"]} for r in runs], bad


def run_selector(text: str) -> int | str:
    """``--run``: an index (0 the first, -1 the newest), a run id (or a unique start of
    one), or ``all``."""
    try:
        return int(text)
    except ValueError:
        return text.strip()


def _select(runs: list[dict], selector: int | str, path: str) -> list[int]:
    """The indexes of the runs ``--run`` names (CLIError, status 2, when none)."""
    if isinstance(selector, int):
        if -len(runs) <= selector < len(runs):
            return [selector % len(runs)]
        if selector < 0 or not any(r["id"] and r["id"].startswith(str(selector)) for r in runs):
            raise CLIError(f"--run {selector}: {path} holds {len(runs)} run(s)", 2)
        selector = str(selector)  # digits that start a run id (a date)
    if selector.lower() == "all":
        return list(range(len(runs)))
    chosen = [i for i, r in enumerate(runs) if r["id"] == selector]
    if not chosen:
        starts = {r["id"] for r in runs if r["id"] and r["id"].startswith(selector)}
        if len(starts) == 1:
            chosen = [i for i, r in enumerate(runs) if r["id"] in starts]
    if not chosen:
        ids = ", ".join(dict.fromkeys(r["id"] or "(no id)" for r in runs))
        raise CLIError(f"--run {selector!r}: no run with that id (or one start of an id) in "
                       f"{path}; its runs: {ids}", 2)
    return chosen


_RESERVED_KEYS = {"event", "epoch", "nbatch", "time", "kind", "rank", "workers", "pid",
                  "split", "run"}
_SPEED_KEYS = ("samples_per_sec", "time_cost")


def _series(run: list[dict]) -> tuple[dict, dict, list[dict]]:
    """``(panels, speed, membership)``: panel name -> label -> [(x, y)] for the metrics,
    speed key -> [(x, y)], and the membership events with their x."""
    epoch_lines = [r for r in run if r.get("event", "epoch") == "epoch"]
    batch_lines = [r for r in run if r.get("event") == "batch"]
    per_epoch: dict[int, int] = {}
    for r in batch_lines:
        if "nbatch" in r:
            per_epoch[int(r["epoch"])] = max(per_epoch.get(int(r["epoch"]), 0),
                                             int(r["nbatch"]) + 1)

    def batch_x(r: dict) -> float:
        n = per_epoch.get(int(r["epoch"])) or 1
        return int(r["epoch"]) + (int(r.get("nbatch", 0)) + 1) / n

    panels: dict[str, dict[str, list]] = {}
    speed: dict[str, list] = {}
    for r in epoch_lines:
        x = int(r["epoch"]) + 1  # the end of the epoch
        for key, value in r.items():
            if key in _RESERVED_KEYS or not _is_number(value):
                continue
            if key in _SPEED_KEYS:
                speed.setdefault(key, []).append((x, float(value)))
                continue
            for tag in ("train_", "val_", "eval_"):
                if key.startswith(tag):
                    base, label = key[len(tag):], tag[:-1]
                    break
            else:
                base, label = key, key
            panels.setdefault(base, {}).setdefault(label, []).append((x, float(value)))
    for r in batch_lines:
        x = batch_x(r)
        for key, value in r.items():
            if key in _RESERVED_KEYS or not _is_number(value):
                continue
            panels.setdefault(key, {}).setdefault("train (batches)", []).append((x, float(value)))
    membership = []
    for r in run:
        if r.get("event") == "membership":
            membership.append({**r, "x": batch_x(r) if "nbatch" in r else int(r["epoch"])})
    return panels, speed, membership


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _cmd_plot(args: argparse.Namespace) -> int:
    runs, bad = _read_metrics(args.metrics)
    if not runs:
        raise CLIError(f"{args.metrics} holds no metric lines (JSON objects with an 'epoch')")
    selector = args.run if isinstance(args.run, int) else run_selector(str(args.run))
    chosen = _select(runs, selector, args.metrics)
    drawn = []  # (label prefix, panels, speed, membership) per run drawn
    for i in chosen:
        run = runs[i]["records"]
        if not args.batches:
            run = [r for r in run if r.get("event") != "batch"]
        panels, speed, membership = _series(run)
        prefix = "" if len(chosen) == 1 else f"run {i + 1}"
        drawn.append((prefix, panels, speed, membership))
    if not any(panels or speed for _, panels, speed, _ in drawn):
        raise CLIError(f"{args.metrics} has no numeric metrics to plot")
    try:
        import matplotlib
    except ImportError:
        raise CLIError("raymod plot needs matplotlib: pip install 'raymod[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    names = list(dict.fromkeys(name for _, panels, _, _ in drawn for name in panels))
    if any(speed for _, _, speed, _ in drawn):
        names.append("throughput")
    cols = min(2, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 3.8 * rows), squeeze=False)
    styles = {"train": {"marker": "o"}, "val": {"marker": "s"}, "eval": {"marker": "s"},
              "train (batches)": {"linewidth": 0.8, "alpha": 0.5, "color": "tab:gray"}}
    membership_all = [ev for _, _, _, membership in drawn for ev in membership]
    for ax, name in zip(axes.flat, names):
        if name == "throughput":
            twin = None
            for prefix, _, speed, _ in drawn:
                tag = f"{prefix}: " if prefix else ""
                if "samples_per_sec" in speed:
                    xs, ys = zip(*speed["samples_per_sec"])
                    ax.plot(xs, ys, marker="o", label=f"{tag}samples/s")
                    ax.set_ylabel("samples / s")
                if "time_cost" in speed:
                    if "samples_per_sec" in speed and twin is None:
                        twin = ax.twinx()
                    target = twin if "samples_per_sec" in speed else ax
                    xs, ys = zip(*speed["time_cost"])
                    target.plot(xs, ys, marker="^", label=f"{tag}epoch time (s)",
                                **({} if prefix else {"color": "tab:orange"}))
                    target.set_ylabel("epoch time (s)")
            handles, labels = ax.get_legend_handles_labels()
            if twin is not None:
                h2, l2 = twin.get_legend_handles_labels()
                handles, labels = handles + h2, labels + l2
            if len(handles) > 1:
                ax.legend(handles, labels, loc="best", fontsize="small")
            ax.set_title("throughput")
        else:
            for prefix, panels, _, _ in drawn:
                for label, points in panels.get(name, {}).items():
                    xs, ys = zip(*points)
                    style = dict(styles.get(label, {"marker": "o"}))
                    if prefix:
                        style.pop("color", None)  # one colour per run and label
                    ax.plot(xs, ys, label=f"{prefix}: {label}" if prefix else label, **style)
            ax.set_title(name)
            ax.legend(loc="best", fontsize="small")
        for ev in membership_all:
            ax.axvline(ev["x"], color="tab:red", linestyle=":", linewidth=1)
            if ax is axes.flat[0]:
                ax.annotate(f"{ev.get('kind', '?')} {ev.get('rank', '')}".strip(),
                            xy=(ev["x"], 1.0), xycoords=("data", "axes fraction"),
                            xytext=(2, -10), textcoords="offset points", fontsize="x-small",
                            color="tab:red")
        ax.set_xlabel("epochs trained")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    which = _which(runs, chosen)
    title = args.title or os.path.basename(args.metrics)
    if which:
        title += f" ({which})"
    if membership_all:
        title += f"; dotted: {len(membership_all)} worker membership events"
    fig.suptitle(title)
    fig.tight_layout()
    output = args.output or (os.path.splitext(args.metrics)[0] + ".png")
    try:
        parent = os.path.dirname(output)
        if parent:
            os.makedirs(parent, exist_ok=True)
        fig.savefig(output, dpi=args.dpi)
    except (OSError, ValueError) as err:
        raise CLIError(f"cannot write {output}: {_one_line(err)}") from None
    finally:
        plt.close(fig)
    epochs = sum(1 for i in chosen for r in runs[i]["records"]
                 if r.get("event", "epoch") == "epoch")
    note = f", {bad} unreadable lines skipped" if bad else ""
    print(f"wrote {output}{f' ({which})' if which else ''}: {len(names)} panels, "
          f"{epochs} epochs{note}")
    return 0


def _which(runs: list[dict], chosen: list[int]) -> str:
    """Which runs a figure shows, for its title: empty for a file of one run without id."""
    if len(runs) == 1 and runs[0]["id"] is None:
        return ""
    if len(chosen) > 1:
        return f"runs {', '.join(str(i + 1) for i in chosen)} of {len(runs)}"
    i = chosen[0]
    run_id = runs[i]["id"]
    return f"run {i + 1} of {len(runs)}" + (f", {run_id}" if run_id else "")


# ---- the parser ---------------------------------------------------------------------------------
def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The ``plot`` subcommand's options (``--run`` takes an index, a run id or ``all``)."""
    plot = sub.add_parser(
        "plot", help="plot training curves from a JSON-lines metrics file",
        description="Plot the metrics of a JSON-lines file written by rm.callback."
                    "MetricsLogger (the jobs' --metrics): one panel per metric (train and "
                    "validation per epoch, running batch values), throughput, and worker "
                    "membership events as dotted lines. A file appended to by several runs "
                    "(each line carrying its run id) draws the newest, or those --run names. "
                    "Needs matplotlib (raymod[plot]).")
    plot.add_argument("metrics", metavar="METRICS.jsonl")
    plot.add_argument("-o", "--output", metavar="PNG",
                      help="image to write (default: METRICS with .png)")
    plot.add_argument("--no-batches", dest="batches", action="store_false",
                      help="leave out the batch lines' running values")
    plot.add_argument("--run", type=run_selector, default=-1, metavar="N|ID|all",
                      help="which run of a file appended to by several: an index (0 the "
                           "first, default -1: the newest), a run id (or the start of one), "
                           "or 'all' (drawn together)")
    plot.add_argument("--title", help="figure title (default: the file name)")
    plot.add_argument("--dpi", type=positive_int, default=100, help="(default %(default)s)")
    plot.set_defaults(func=_cmd_plot)
    return plot
