// One error hierarchy for everything a call can fail with. QueenError carries the broker's error
// envelope (status, code, reason, detail) or, when no answer was had, the client's own (status 0, code
// unreachable, timeout or transport). toJSON gives the members the conformance suite names
// (clients/conformance/README.md, "The typed error").

export class QueenError extends Error {
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
    return { status: this.status, code: this.code, reason: this.reason, detail: this.detail, retryAfter: this.retryAfter };
  }
}

/** The broker answered 4xx or 500: the call as made will not succeed by repeating it. */
export class QueenRefused extends QueenError {}

/** Try later: a 429 or 503 answer, or no whole answer at all (status 0: unreachable, timeout, transport). */
export class QueenUnavailable extends QueenError {}

/** The answer was not the JSON the route gives. */
export class QueenBadResponse extends QueenError {}

/** A required KV op lost: the broker's 200 verdict; nothing of the batch was written. */
export class PreconditionFailed extends QueenError {
  /** @param {Record<string, any>} verdict */
  constructor(verdict, attempts = 1) {
    super(200, 'kv_precondition', 'kv_precondition', `op ${verdict.failedIndex} lost: ${verdict.kvReason}`, 0, attempts);
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
