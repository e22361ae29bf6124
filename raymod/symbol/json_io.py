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
    refs = [_input_refs(raw_nodes, i) for i in range(len(raw_nodes))]
    nodes: list[Node | None] = [None] * len(raw_nodes)
    for i in _build_order(raw_nodes, refs):
        raw = raw_nodes[i]
        # MXNet wrote "param" (0.8), then "attr", then "attrs" (1.x)
        attrs = dict(raw.get("attrs") or raw.get("attr") or {})
        attrs.update(raw.get("param") or {})
        inputs = [(nodes[j], k) for j, k in refs[i]]
        if raw["op"] == "null":
            nodes[i] = Node(None, raw["name"], {k: str(v) for k, v in attrs.items()})
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
        nodes[i] = Node(op_cls(**op_attrs), raw["name"], node_attrs, inputs)
    outputs = []
    for h in heads:
        if not (isinstance(h, list) and h and _is_index(h[0], len(nodes))):
            raise MXNetError(f"symbol JSON head {h!r} does not name one of the "
                             f"{len(nodes)} nodes")
        outputs.append((nodes[h[0]], int(h[1]) if len(h) > 1 else 0))
    return Symbol(outputs)


def _is_index(value: Any, n: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < n


def _label(raw_nodes: list, i: int) -> str:
    raw = raw_nodes[i]
    return f"{raw.get('name') if isinstance(raw, dict) else None!r} (node {i})"


def _input_refs(raw_nodes: list, i: int) -> list[tuple[int, int]]:
    """``(node index, output index)`` of each input of node ``i``, checked to exist."""
    refs = []
    for ref in raw_nodes[i].get("inputs", []):
        if not (isinstance(ref, list) and len(ref) >= 2 and _is_index(ref[0], len(raw_nodes))):
            raise MXNetError(f"symbol JSON node {_label(raw_nodes, i)} has input {ref!r}, "
                             f"which does not refer to one of the {len(raw_nodes)} nodes")
        refs.append((ref[0], int(ref[1])))
    return refs


def _build_order(raw_nodes: list, refs: list) -> list[int]:
    """Node indices, each after its inputs: file order when the file lists inputs first, as
    MXNet writes it; an MXNetError naming the nodes of a cycle, which no graph can hold."""
    state = [0] * len(refs)  # 0 unseen, 1 on the current path, 2 done
    order: list[int] = []
    for root in range(len(refs)):
        if state[root]:
            continue
        state[root] = 1
        path, pending = [root], [iter(refs[root])]
        while path:
            step = next(pending[-1], None)
            if step is None:
                state[path[-1]] = 2
                order.append(path.pop())
                pending.pop()
                continue
            j = step[0]
            if state[j] == 1:
                loop = path[path.index(j):] + [j]
                raise MXNetError(
                    "symbol JSON has a cycle: " + " -> ".join(_label(raw_nodes, k) for k in loop)
                    + " (each node takes the next as an input); a symbol graph must be acyclic")
            if state[j] == 0:
                state[j] = 1
                path.append(j)
                pending.append(iter(refs[j]))
    return order
