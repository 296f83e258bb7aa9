// @queen/client: a client of the Queen broker (zero dependencies; Node 18+ and browsers).
export { Queen, Kv, Tx, Batch, QueueHandle } from './client.js';
export { QueenError, QueenRefused, QueenUnavailable, QueenBadResponse, PreconditionFailed, BadRequest, BadArgument,
  AuthError, NotFound, Conflict, ServerError, RateLimited, Unavailable, TransportError } from './errors.js';
export { JsonNumber, parse, stringify, decimalKey } from './json.js';
export { ops } from './calls.js';
export { Stream, StreamWorker, tokenBucketGate, canonicalConfig, configHash } from './streams.js';
