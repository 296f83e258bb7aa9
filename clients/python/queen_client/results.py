"""Results as small dataclasses. Each keeps ``raw``: the broker's JSON object as decoded (values exact),
for members a dataclass does not name."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, TypedDict

__all__ = ["GetResult", "WriteResult", "Row", "GetManyResult", "PrefixPage", "PushResult", "Message",
           "PopResult", "AckResult", "LeaseResult", "ConfigureResult", "TxResult", "ConsumeStats",
           "QueueOptions"]


class QueueOptions(TypedDict, total=False):
    """``configure``'s options, as the wire names them (sql/log_queues.sql, _log_queue_option_specs_v1,
    is the list; a name not there is refused by the broker). None resets one to its default."""
    priority: Optional[int]
    leaseTime: Optional[int]
    retryLimit: Optional[int]
    retryDelay: Optional[int]
    maxSize: Optional[int]
    ttl: Optional[int]
    deadLetterQueue: Optional[bool]
    dlqAfterMaxRetries: Optional[bool]
    delayedProcessing: Optional[int]
    windowBuffer: Optional[int]
    retentionSeconds: Optional[int]
    completedRetentionSeconds: Optional[int]
    retentionEnabled: Optional[bool]
    encryptionEnabled: Optional[bool]
    maxWaitTimeSeconds: Optional[int]
    minPopWaitTime: Optional[int]
    dedupWindowSeconds: Optional[int]
    retentionSinkHold: Optional[str]
    retentionSinkHoldMaxSeconds: Optional[int]


def _int(v: Any, default: int = 0) -> int:
    return int(v) if v is not None else default


@dataclass
class GetResult:
    key: str
    found: bool
    value: Any = None
    version: int = 0
    expires_at: Optional[str] = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, d: dict[str, Any]) -> "GetResult":
        return cls(d.get("key", ""), bool(d.get("found")), d.get("value"), _int(d.get("version")), d.get("expiresAt"), d)


@dataclass
class WriteResult:
    """A put, putIfAbsent, delete or incr: ``applied``, else ``reason`` (exists, absent, version, limit)
    with the live ``version`` and ``value``."""
    op: str
    key: str
    applied: bool
    reason: Optional[str] = None
    version: int = 0
    value: Any = None
    expires_at: Optional[str] = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, d: dict[str, Any]) -> "WriteResult":
        return cls(d.get("op", ""), d.get("key", ""), bool(d.get("applied")), d.get("reason"), _int(d.get("version")),
                   d.get("value"), d.get("expiresAt"), d)


@dataclass
class Row:
    key: str
    value: Any = None
    version: int = 0
    expires_at: Optional[str] = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, d: dict[str, Any]) -> "Row":
        return cls(d.get("key", ""), d.get("value"), _int(d.get("version")), d.get("expiresAt"), d)


@dataclass
class GetManyResult:
    rows: list[Row]
    missing: list[str]
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, d: dict[str, Any]) -> "GetManyResult":
        return cls([Row.of(r) for r in d.get("rows") or []], list(d.get("missing") or []), d)


@dataclass
class PrefixPage:
    rows: list[Row]
    truncated: bool
    next_after: Optional[str] = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, d: dict[str, Any]) -> "PrefixPage":
        return cls([Row.of(r) for r in d.get("rows") or []], bool(d.get("truncated")), d.get("nextAfter"), d)


@dataclass
class PushResult:
    index: int
    status: str
    transaction_id: Optional[str] = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, d: dict[str, Any]) -> "PushResult":
        return cls(_int(d.get("index")), d.get("status", ""), d.get("transaction_id", d.get("transactionId")), d)


@dataclass
class Message:
    transaction_id: str
    partition_id: str
    lease_id: Optional[str]
    data: Any = None
    queue: Optional[str] = None
    partition: Optional[str] = None
    delivery_attempt: int = 1
    consumer_group: Optional[str] = None
    producer: Optional[str] = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, d: dict[str, Any], body: dict[str, Any]) -> "Message":
        return cls(str(d.get("transactionId") or ""), str(d.get("partitionId") or body.get("partitionId") or ""),
                   d.get("leaseId") or body.get("leaseId"), d.get("data"), d.get("queue", body.get("queue")),
                   d.get("partition", body.get("partition")), _int(d.get("deliveryAttempt"), 1),
                   d.get("consumerGroup", body.get("consumerGroup")), d.get("producer"), d)

    def ack_item(self, status: Optional[str] = None, error: Optional[str] = None) -> dict[str, Any]:
        """The wire ack naming this message."""
        item: dict[str, Any] = {"transactionId": self.transaction_id, "partitionId": self.partition_id}
        if self.lease_id is not None:
            item["leaseId"] = self.lease_id
        if status is not None:
            item["status"] = status
        if error is not None:
            item["error"] = error
        return item


@dataclass
class PopResult:
    messages: list[Message]
    lease_id: Optional[str] = None
    partition_id: Optional[str] = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, d: dict[str, Any]) -> "PopResult":
        return cls([Message.of(m, d) for m in d.get("messages") or []], d.get("leaseId"), d.get("partitionId"), d)


@dataclass
class AckResult:
    index: int
    success: bool
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, d: dict[str, Any]) -> "AckResult":
        return cls(_int(d.get("index")), bool(d.get("success")), d)


@dataclass
class LeaseResult:
    lease_id: str
    renewed: bool
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, d: dict[str, Any]) -> "LeaseResult":
        return cls(d.get("leaseId", ""), bool(d.get("renewed")), d)


@dataclass
class ConfigureResult:
    """A configure's answer: the queue as it now is, ``options`` every option with its effective value (as
    the wire names them), ``stored_only`` the names stored and echoed that this broker does not act on."""
    queue: str
    queue_id: str
    namespace: Optional[str] = None
    task: Optional[str] = None
    options: dict[str, Any] = field(default_factory=dict)
    stored_only: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, d: dict[str, Any]) -> "ConfigureResult":
        return cls(d.get("queue", ""), str(d.get("queueId") or ""), d.get("namespace"), d.get("task"),
                   dict(d.get("options") or {}), list(d.get("storedOnly") or []), d)


@dataclass
class TxResult:
    """A transaction's outcome. ``success`` False is a rollback (``reason``, and for a lost kv marker
    ``failed_index``/``kv_reason``): a result, not an error."""
    success: bool
    transaction_id: Optional[str] = None
    results: list[dict[str, Any]] = field(default_factory=list)
    reason: Optional[str] = None
    failed_index: Optional[int] = None
    kv_reason: Optional[str] = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, d: dict[str, Any]) -> "TxResult":
        fi = d.get("failedIndex")
        return cls(bool(d.get("success")), d.get("transactionId"), list(d.get("results") or []), d.get("reason"),
                   int(fi) if fi is not None else None, d.get("kvReason"), d)


@dataclass
class ConsumeStats:
    """What a consume loop did before it stopped."""
    handled: int = 0
    failed: int = 0
