"""The shared streams scenarios (clients/conformance/streams/*.json, format in its README.md) turned into
Python pipelines: the expression language evaluated here, each pipeline op mapped to the Stream call."""
from __future__ import annotations

import json
import os
from decimal import Decimal
from typing import Any, Callable

from harness import HERE
from queen_client.streams import GateContext, Stream, js_number

DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "conformance", "streams")


def scenarios() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for n in sorted(os.listdir(DIR)):
        if n.endswith(".json") and n[:1].isdigit():  # NN_name.json; hash_vectors.json is not one
            with open(os.path.join(DIR, n), encoding="utf-8") as f:
                out.append((n, json.load(f, parse_float=Decimal)))
    return out


def _text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    return js_number(v)


def ev(e: Any, env: dict[str, Any]) -> Any:
    """One expression of the scenario language against env (value, acc, ctx, state)."""
    if not isinstance(e, dict):
        if isinstance(e, list):
            raise ValueError("a list literal is written {\"list\": [...]}")
        return e
    (op, a), = e.items()
    if op == "var":
        head, *rest = str(a).split(".")
        cur = env.get(head)
        for part in rest:
            cur = cur.get(part) if isinstance(cur, dict) else None
        return cur
    if op == "obj":
        return {k: ev(x, env) for k, x in a.items()}
    if op == "list":
        return [ev(x, env) for x in a]
    if op == "str":
        return _text(ev(a, env))
    if op == "concat":
        return "".join(_text(ev(x, env)) for x in a)
    if op == "not":
        return not ev(a, env)
    if op == "if":
        return ev(a[1], env) if ev(a[0], env) else ev(a[2], env)
    vals = [ev(x, env) for x in a]
    if op == "add":
        acc = vals[0]
        for v in vals[1:]:
            acc = acc + v
        return acc
    if op == "sub":
        return vals[0] - vals[1]
    if op == "mul":
        return vals[0] * vals[1]
    if op == "mod":
        return vals[0] % vals[1]
    if op == "eq":
        return vals[0] == vals[1]
    if op == "gt":
        return vals[0] > vals[1]
    if op == "lt":
        return vals[0] < vals[1]
    if op == "and":
        return all(vals)
    if op == "or":
        return any(vals)
    raise ValueError(f"unknown expression {op}")


def _fn1(e: Any) -> Callable[[Any, dict[str, Any]], Any]:
    return lambda v, ctx: ev(e, {"value": v, "ctx": ctx})


def _counter_gate(limit: int) -> Callable[[Any, GateContext], bool]:
    def gate(v: Any, ctx: GateContext) -> bool:
        n = int(ctx.state.get("count", 0))
        if n >= limit:
            return False
        ctx.state["count"] = n + 1
        return True
    return gate


def build(source: str, pipeline: list[dict[str, Any]]) -> Stream:
    s = Stream.from_(source)
    for op in pipeline:
        kind = op["op"]
        win = {"grace_period": op.get("gracePeriod", 0), "allowed_lateness": op.get("allowedLateness", 0),
               "event_time": (lambda e: (lambda v: ev(e, {"value": v})))(op["eventTime"])
               if "eventTime" in op else None}
        if kind == "map":
            s = s.map(_fn1(op["fn"]))
        elif kind == "filter":
            s = s.filter(_fn1(op["fn"]))
        elif kind == "flatMap":
            s = s.flat_map(_fn1(op["fn"]))
        elif kind == "keyBy":
            s = s.key_by((lambda e: lambda v: ev(e, {"value": v}))(op["fn"]))
        elif kind == "windowTumbling":
            s = s.window_tumbling(op["seconds"], **win)
        elif kind == "windowSliding":
            s = s.window_sliding(op["size"], op["slide"], **win)
        elif kind == "windowCron":
            s = s.window_cron(op["every"], **win)
        elif kind == "windowSession":
            s = s.window_session(op["gap"], **win)
        elif kind == "reduce":
            s = s.reduce((lambda e: lambda acc, v: ev(e, {"acc": acc, "value": v}))(op["fn"]), op.get("initial"))
        elif kind == "aggregate":
            s = s.aggregate({k: (lambda e: lambda v: ev(e, {"value": v}))(x) for k, x in op["fields"].items()})
        elif kind == "gate":
            s = s.gate(_counter_gate(int(op["counter"]["limit"])))
        elif kind == "to":
            p = op.get("partition")
            s = s.to(op["queue"], partition=(lambda e: lambda v: ev(e, {"value": v}))(p) if isinstance(p, dict)
                     else p)
        else:
            raise ValueError(f"unknown op {kind}")
    return s
