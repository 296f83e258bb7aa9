"""JSON that keeps numbers exact.

Values travel between the application and the broker without passing through
a binary double: the parser reads a number with a fraction or an exponent as a
``decimal.Decimal`` and an integer as a Python ``int`` (unbounded), and the
writer renders both back as decimal text. ``0.1`` stays ``0.1`` and
``12345678901234567890`` stays exact. A ``float`` given by the application is
written as its shortest round-trip text (``repr``), so ``0.1`` goes out as
``0.1`` too.
"""
from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

__all__ = ["loads", "dumps", "number_text"]


def loads(text: str | bytes) -> Any:
    """Parse JSON text; fractions and exponents become Decimal, integers int."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return json.loads(text, parse_float=Decimal)


def number_text(value: int | float | Decimal) -> str:
    """The JSON text of a number; NaN and infinities have none (ValueError)."""
    if isinstance(value, bool):
        raise TypeError("a bool is not a number")
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} has no JSON form")
        return float.__repr__(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{value!r} has no JSON form")
        return str(value)
    raise TypeError(f"not a number: {value!r}")


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, (int, float, Decimal)):
        out.append(number_text(value))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"object member names are strings, not {type(k).__name__}")
            if not first:
                out.append(",")
            first = False
            out.append(json.dumps(k, ensure_ascii=False))
            out.append(":")
            _write(v, out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            _write(v, out)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not JSON")


def dumps(value: Any) -> str:
    """Compact JSON text of value, numbers written exactly."""
    out: list[str] = []
    _write(value, out)
    return "".join(out)
