"""queen_client: a Python client of the Queen broker (standard library only).

``Queen`` blocks; ``AsyncQueen`` is the asyncio twin with the same names. Both keep connections alive, fail
over between several broker URLs, send a bearer token, retry only what is safe to repeat, and carry values
exactly (fractions as ``Decimal``, integers as ``int``)."""
from .aio import AsyncBatch, AsyncKv, AsyncQueen, AsyncQueueHandle, AsyncTx
from .client import Batch, Kv, Queen, QueueHandle, Tx
from .errors import (AuthError, BadArgument, BadRequest, Conflict, NotFound, PreconditionFailed, QueenBadResponse,
                     QueenError, QueenRefused, QueenUnavailable, RateLimited, ServerError, TransportError,
                     Unavailable)
from .results import (AckResult, ConfigureResult, ConsumeStats, GetManyResult, GetResult, LeaseResult, Message,
                      PopResult, PrefixPage, PushResult, QueueOptions, Row, TxResult, WriteResult)
from ._json import dumps, loads

__version__ = "0.1.0"

__all__ = [
    "Queen", "AsyncQueen", "Kv", "AsyncKv", "Batch", "AsyncBatch", "Tx", "AsyncTx", "QueueHandle",
    "AsyncQueueHandle", "QueenError", "QueenRefused", "QueenUnavailable", "PreconditionFailed", "QueenBadResponse",
    "BadRequest", "BadArgument", "AuthError", "NotFound", "Conflict", "RateLimited", "Unavailable", "ServerError",
    "TransportError", "QueueOptions",
    "GetResult", "WriteResult", "Row", "GetManyResult", "PrefixPage", "PushResult", "Message", "PopResult",
    "AckResult", "LeaseResult", "ConfigureResult", "TxResult", "ConsumeStats", "dumps", "loads", "__version__",
]
