"""One exception hierarchy for everything a call can fail with.

``QueenError`` carries the broker's error envelope (status, code, reason,
detail) or, when no answer was had, the client's own (status 0, code
``unreachable``, ``timeout`` or ``transport``). ``to_dict`` gives the members
the conformance suite names (clients/conformance/README.md, "The typed error").
"""
from __future__ import annotations

from typing import Any, Optional

__all__ = [
    "QueenError", "QueenRefused", "QueenUnavailable", "PreconditionFailed", "QueenBadResponse", "BadRequest",
    "BadArgument", "AuthError", "NotFound", "Conflict", "RateLimited", "Unavailable", "ServerError",
    "TransportError", "error_class",
]


class QueenError(Exception):
    """Base of every error the client raises. ``kind`` is one of clients/API.md's error kinds (bad_request,
    auth, not_found, conflict, precondition, rate_limited, unavailable, server, transport); each kind has
    its class below."""

    kind = "server"

    def __init__(self, status: int, code: str, reason: str, detail: str, retry_after: int = 0,
                 attempts: int = 1) -> None:
        super().__init__(f"{status} {code}/{reason}: {detail}")
        self.status = status
        self.code = code
        self.reason = reason
        self.detail = detail
        #: the Retry-After seconds of the last answer, 0 when none
        self.retry_after = retry_after
        #: HTTP attempts made for the call, the first included
        self.attempts = attempts

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "code": self.code, "reason": self.reason, "detail": self.detail,
                "retryAfter": self.retry_after, "kind": self.kind}


class QueenRefused(QueenError):
    """The broker answered 4xx (not 429): the call as made will not succeed by repeating it."""

    kind = "bad_request"


class BadRequest(QueenRefused):
    """400, 413, 422 and any other 4xx: the input was refused; nothing was written."""

    kind = "bad_request"


class BadArgument(BadRequest, ValueError):
    """Refused by the client before anything was sent (status 0, code ``bad_argument``): a KV write without
    exactly one valid expiry, say."""

    def __init__(self, detail: str) -> None:
        super().__init__(0, "bad_argument", "bad_argument", detail, 0, 0)


class AuthError(QueenRefused):
    """401 or 403: no token, a bad one, or one that may not make this call."""

    kind = "auth"


class NotFound(QueenRefused):
    """404: no such queue, lease or route."""

    kind = "not_found"


class Conflict(QueenRefused):
    """409: a transaction id seen before, a lease not held."""

    kind = "conflict"


class ServerError(QueenError):
    """500 or another 5xx that is not 503: the broker failed; not a refusal of the input."""

    kind = "server"


class QueenUnavailable(QueenError):
    """Try later: a 429 or 503 answer (``retry_after`` from its header), or no whole answer at all
    (status 0: code ``unreachable`` when no URL accepted a connection, ``timeout``, ``transport``)."""

    kind = "unavailable"


class RateLimited(QueenUnavailable):
    """429: the tenant's rate or quota; ``retry_after`` says when."""

    kind = "rate_limited"


class Unavailable(QueenUnavailable):
    """503: the broker or its database cannot serve now."""

    kind = "unavailable"


class TransportError(QueenUnavailable):
    """No whole answer (status 0): code ``unreachable``, ``timeout`` or ``transport``."""

    kind = "transport"


class QueenBadResponse(QueenError):
    """The answer was not the JSON the route gives."""

    kind = "transport"


def error_class(status: int) -> type[QueenError]:
    """The class (and so the kind) of an answer's status: clients/API.md's table."""
    if status == 0:
        return TransportError
    if status in (401, 403):
        return AuthError
    if status == 404:
        return NotFound
    if status == 409:
        return Conflict
    if status == 429:
        return RateLimited
    if status == 503:
        return Unavailable
    if status >= 500:
        return ServerError
    return BadRequest


class PreconditionFailed(QueenError):
    """A ``required`` KV op lost: the broker's 200 verdict, nothing of the batch was written."""

    kind = "precondition"

    def __init__(self, failed_index: int, kv_reason: str, version: int, value: Any, value_omitted: bool = False,
                 value_bytes: Optional[int] = None, attempts: int = 1) -> None:
        super().__init__(200, "kv_precondition", "kv_precondition", f"op {failed_index} lost: {kv_reason}",
                         0, attempts)
        # clients/API.md's one wording, whatever the language
        self.args = (f"kv precondition failed at op {failed_index}: {kv_reason}",)
        #: the index of the op that lost, in the batch (or the transaction's flat kv index)
        self.failed_index = failed_index
        #: exists | absent | version | limit | type
        self.kv_reason = kv_reason
        #: the live version (0: no live row)
        self.version = version
        #: the live value, decoded (None when there is none or it was omitted for size)
        self.value = value
        self.value_omitted = value_omitted
        self.value_bytes = value_bytes

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d.update({"failedIndex": self.failed_index, "kvReason": self.kv_reason, "version": self.version})
        if self.value_omitted:
            d.update({"valueOmitted": True, "valueBytes": self.value_bytes})
        else:
            d["value"] = self.value
        return d

    @classmethod
    def from_verdict(cls, body: dict[str, Any], attempts: int = 1) -> "PreconditionFailed":
        return cls(int(body.get("failedIndex", 0)), str(body.get("kvReason", "")), int(body.get("version", 0) or 0),
                   body.get("value"), bool(body.get("valueOmitted", False)), body.get("valueBytes"), attempts)
