"""``raymod plot``: training curves from a JSON-lines metrics file."""
from __future__ import annotations

import argparse
import json
import math
import os
from typing import Any

from .errors import CLIError, one_line as _one_line



def _read_metrics(path: str) -> tuple[list[list[dict]], int]:
    """The runs of a JSON-lines metrics file (a new run starts where the epoch goes back)
    and the number of lines that were not JSON objects."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except (OSError, UnicodeDecodeError) as err:
        raise CLIError(f"cannot read metrics file {path}: {_one_line(err)}") from None
    runs: list[list[dict]] = [[]]
    bad, last_epoch = 0, None
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
        if record.get("event", "epoch") == "epoch":
            if last_epoch is not None and epoch <= last_epoch and runs[-1]:
                runs.append([])  # epochs went back: an appended second run
            last_epoch = epoch
        runs[-1].append(record)
    runs = [r for r in runs if r]
    return runs, bad


_RESERVED_KEYS = {"event", "epoch", "nbatch", "time", "kind", "rank", "workers", "pid",
                  "split"}
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
    if not -len(runs) <= args.run < len(runs):
        raise CLIError(f"--run {args.run}: {args.metrics} holds {len(runs)} run(s)", 2)
    run = runs[args.run]
    if not args.batches:
        run = [r for r in run if r.get("event") != "batch"]
    panels, speed, membership = _series(run)
    if not panels and not speed:
        raise CLIError(f"{args.metrics} has no numeric metrics to plot")
    try:
        import matplotlib
    except ImportError:
        raise CLIError("raymod plot needs matplotlib: pip install 'raymod[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    names = list(panels) + (["throughput"] if speed else [])
    cols = min(2, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 3.8 * rows), squeeze=False)
    styles = {"train": {"marker": "o"}, "val": {"marker": "s"}, "eval": {"marker": "s"},
              "train (batches)": {"linewidth": 0.8, "alpha": 0.5, "color": "tab:gray"}}
    for ax, name in zip(axes.flat, names):
        if name == "throughput":
            if "samples_per_sec" in speed:
                xs, ys = zip(*speed["samples_per_sec"])
                ax.plot(xs, ys, marker="o", label="samples/s")
                ax.set_ylabel("samples / s")
            if "time_cost" in speed:
                twin = ax.twinx() if "samples_per_sec" in speed else ax
                xs, ys = zip(*speed["time_cost"])
                twin.plot(xs, ys, marker="^", color="tab:orange", label="epoch time (s)")
                twin.set_ylabel("epoch time (s)")
                if twin is not ax:
                    h1, l1 = ax.get_legend_handles_labels()
                    h2, l2 = twin.get_legend_handles_labels()
                    ax.legend(h1 + h2, l1 + l2, loc="best", fontsize="small")
            ax.set_title("throughput")
        else:
            for label, points in panels[name].items():
                xs, ys = zip(*points)
                ax.plot(xs, ys, label=label, **styles.get(label, {"marker": "o"}))
            ax.set_title(name)
            ax.legend(loc="best", fontsize="small")
        for ev in membership:
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
    title = args.title or os.path.basename(args.metrics)
    if len(runs) > 1:
        title += f" (run {args.run % len(runs) + 1} of {len(runs)})"
    if membership:
        title += f"; dotted: {len(membership)} worker membership events"
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
    epochs = len([r for r in run if r.get("event", "epoch") == "epoch"])
    note = f", {bad} unreadable lines skipped" if bad else ""
    print(f"wrote {output}: {len(names)} panels, {epochs} epochs{note}")
    return 0


# ---- the parser ---------------------------------------------------------------------------------
