"""Which operators MXNet's example networks use, and which of them raymod lacks today.

Reads tests/fixtures/mxnet/zoo/index.json (written by tools/make_mxnet_zoo_fixtures.py) and
raymod's operator registry, and prints two Markdown tables:

    python tools/zoo_ops.py            # per network, then per missing operator
    python tools/zoo_ops.py --json     # the same as JSON

A network that uses MXNet's ``Custom`` op also needs ``raymod.operator`` (CustomOp,
CustomOpProp, register) for its Python operator; that is listed like a missing op.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INDEX = os.path.join(ROOT, "tests", "fixtures", "mxnet", "zoo", "index.json")
CUSTOM = "raymod.operator (Custom)"


def survey(index: dict, known: set, has_custom: bool) -> dict:
    """``{net: {"ops": [...], "missing": [...]}}`` for every indexed network."""
    out = {}
    for net, e in index["networks"].items():
        ops = e["ops"]
        missing = [op for op in ops if op not in known]
        if "Custom" in ops and not has_custom:
            missing.append(CUSTOM)
        out[net] = {"ops": ops, "missing": missing}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    a = ap.parse_args(argv)
    sys.path.insert(0, ROOT)
    import raymod
    from raymod.ops import OPS
    with open(INDEX) as f:
        index = json.load(f)
    table = survey(index, set(OPS.names()), hasattr(raymod, "operator"))
    by_op: dict[str, list[str]] = {}
    for net, row in table.items():
        for op in row["missing"]:
            by_op.setdefault(op, []).append(net)
    if a.json:
        print(json.dumps({"networks": table, "missing_ops": by_op}, indent=1))
        return 0
    print("| network | operators | raymod lacks |")
    print("|---|---|---|")
    for net, row in table.items():
        print(f"| {net} | {', '.join(row['ops'])} | {', '.join(row['missing']) or '-'} |")
    print()
    print("| missing operator | used by |")
    print("|---|---|")
    for op in sorted(by_op):
        print(f"| {op} | {', '.join(by_op[op])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
