// One error hierarchy for everything a call can fail with. QueenError carries the broker's error
// envelope (status, code, reason, detail) or, when no answer was had, the client's own (status 0, code
// unreachable, timeout or transport). toJSON gives the members the conformance suite names
// (clients/conformance/README.md, "The typed error").

export class QueenError extends Error {
  /** clients/API.md's error kind; each class below is one kind. */
  get kind() { return 'server'; }

  /**
   * @param {number} status @param {string} code @param {string} reason @param {string} detail
   * @param {number} [retryAfter] @param {number} [attempts]
   */
  constructor(status, code, reason, detail, retryAfter = 0, attempts = 1) {
    super(`${status} ${code}/${reason}: ${detail}`);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.reason = reason;
    this.detail = detail;
    /** the Retry-After seconds of the last answer, 0 when none */
    this.retryAfter = retryAfter;
    /** HTTP attempts made for the call, the first included */
    this.attempts = attempts;
  }

  toJSON() {
    return { status: this.status, code: this.code, reason: this.reason, detail: this.detail, retryAfter: this.retryAfter,
      kind: this.kind };
  }
}

/** The broker refused the input (4xx but 429): the call as made will not succeed by repeating it. */
export class QueenRefused extends QueenError { get kind() { return 'bad_request'; } }
/** 400, 413 and any other 4xx: nothing was written. */
export class BadRequest extends QueenRefused { get kind() { return 'bad_request'; } }
/** Refused by the client before anything was sent (status 0, code bad_argument): an expiry that is not exactly one, say. */
export class BadArgument extends BadRequest {
  constructor(detail) { super(0, 'bad_argument', 'bad_argument', detail, 0, 0); }
}
/** 401, 403. */
export class AuthError extends QueenRefused { get kind() { return 'auth'; } }
/** 404. */
export class NotFound extends QueenRefused { get kind() { return 'not_found'; } }
/** 409: a transaction id seen before, a lease not held. */
export class Conflict extends QueenRefused { get kind() { return 'conflict'; } }
/** 500 and another 5xx but 503: the broker failed; not a refusal of the input. */
export class ServerError extends QueenError { get kind() { return 'server'; } }

/** Try later: a 429 or 503 answer, or no whole answer at all (status 0: unreachable, timeout, transport, aborted). */
export class QueenUnavailable extends QueenError { get kind() { return 'unavailable'; } }
/** 429: the tenant's rate or quota; retryAfter says when. */
export class RateLimited extends QueenUnavailable { get kind() { return 'rate_limited'; } }
/** 503. */
export class Unavailable extends QueenUnavailable { get kind() { return 'unavailable'; } }
/** No whole answer (status 0): unreachable, timeout, transport, or aborted by the call's signal. */
export class TransportError extends QueenUnavailable { get kind() { return 'transport'; } }

/** The answer was not the JSON the route gives. */
export class QueenBadResponse extends QueenError { get kind() { return 'transport'; } }

/** The class (and so the kind) of an answer's status: clients/API.md's table. */
export function errorClass(status) {
  if (status === 0) return TransportError;
  if (status === 401 || status === 403) return AuthError;
  if (status === 404) return NotFound;
  if (status === 409) return Conflict;
  if (status === 429) return RateLimited;
  if (status === 503) return Unavailable;
  if (status >= 500) return ServerError;
  return BadRequest;
}

/** A required KV op lost: the broker's 200 verdict; nothing of the batch was written. */
export class PreconditionFailed extends QueenError {
  get kind() { return 'precondition'; }
  /** @param {Record<string, any>} verdict */
  constructor(verdict, attempts = 1) {
    super(200, 'kv_precondition', 'kv_precondition', `op ${verdict.failedIndex} lost: ${verdict.kvReason}`, 0, attempts);
    // clients/API.md's one wording, whatever the language
    this.message = `kv precondition failed at op ${verdict.failedIndex ?? 0}: ${verdict.kvReason ?? ''}`;
    /** the index of the op that lost */
    this.failedIndex = Number(verdict.failedIndex ?? 0);
    /** exists | absent | version | limit | type */
    this.kvReason = verdict.kvReason ?? '';
    /** the live version (0: no live row) */
    this.version = verdict.version ?? 0;
    /** the live value, decoded exactly (null when none or omitted) */
    this.value = verdict.value ?? null;
    this.valueOmitted = verdict.valueOmitted === true;
    this.valueBytes = verdict.valueBytes;
  }

  toJSON() {
    const d = { ...super.toJSON(), failedIndex: this.failedIndex, kvReason: this.kvReason, version: this.version };
    if (this.valueOmitted) return { ...d, valueOmitted: true, valueBytes: this.valueBytes };
    return { ...d, value: this.value };
  }
}
