"""Symbol graphs to and from MXNet 1.x's JSON layout. Parsing never executes code."""
from __future__ import annotations

import json
from typing import Any

from ..base import MXNetError
from ..ops.base import OPS
from .symbol import Node, Symbol

MXNET_VERSION = 10901


def to_json(symbol: Symbol) -> str:
    """``{"nodes", "arg_nodes", "node_row_ptr", "heads", "attrs"}`` as MXNet 1.x writes."""
    nodes = symbol.topo()
    index = {id(n): i for i, n in enumerate(nodes)}
    out_nodes, row_ptr = [], [0]
    for node in nodes:
        entry: dict[str, Any] = {"op": node.op.name if node.op else "null", "name": node.name}
        attrs = dict(node.op.given) if node.op else {}
        attrs.update(node.attrs)
        if attrs:
            entry["attrs"] = attrs
        entry["inputs"] = [[index[id(i)], k, 0] for i, k in node.inputs]
        out_nodes.append(entry)
        row_ptr.append(row_ptr[-1] + (len(node.op.list_outputs()) if node.op else 1))
    graph = {
        "nodes": out_nodes,
        "arg_nodes": [i for i, n in enumerate(nodes) if n.is_variable],
        "node_row_ptr": row_ptr,
        "heads": [[index[id(n)], k, 0] for n, k in symbol.outputs],
        "attrs": {"mxnet_version": ["int", MXNET_VERSION]},
    }
    return json.dumps(graph, indent=2)


def load_json(json_str: str) -> Symbol:
    """Build the graph described by MXNet symbol JSON."""
    try:
        graph = json.loads(json_str)
        raw_nodes = graph["nodes"]
        heads = graph["heads"]
    except (ValueError, KeyError, TypeError) as err:
        raise MXNetError(f"not a symbol JSON document: {err}") from None
    nodes: list[Node] = []
    for i, raw in enumerate(raw_nodes):
        # MXNet wrote "param" (0.8), then "attr", then "attrs" (1.x)
        attrs = dict(raw.get("attrs") or raw.get("attr") or {})
        attrs.update(raw.get("param") or {})
        inputs = []
        for ref in raw.get("inputs", []):
            if not 0 <= ref[0] < i:
                raise MXNetError(f"symbol JSON node {raw.get('name')!r} refers to node {ref[0]}")
            inputs.append((nodes[ref[0]], int(ref[1])))
        if raw["op"] == "null":
            nodes.append(Node(None, raw["name"], {k: str(v) for k, v in attrs.items()}))
            continue
        op_cls = OPS.get(raw["op"])
        takes = (lambda k: not (k.startswith("__") and k.endswith("__"))) if op_cls.any_attrs \
            else (lambda k: k in op_cls.params)
        op_attrs = {k: v for k, v in attrs.items() if takes(k)}
        node_attrs = {k: str(v) for k, v in attrs.items() if not takes(k)}
        bad = [k for k in node_attrs if not (k.startswith("__") and k.endswith("__"))]
        if bad:
            # let the op report unknown attributes with its own message
            op_cls(**op_attrs, **{k: attrs[k] for k in bad})
        nodes.append(Node(op_cls(**op_attrs), raw["name"], node_attrs, inputs))
    return Symbol([(nodes[h[0]], int(h[1])) for h in heads])
