// Type declarations of @queen/client (hand-written; checked by `tsc --noEmit` in the tests).

/** A JSON value as this client decodes it: numbers stay exact (see JsonNumber). */
export type Json = null | boolean | number | bigint | JsonNumber | string | Json[] | { [member: string]: Json };

/** A number no JS number holds exactly, kept as its JSON text. */
export class JsonNumber {
  constructor(text: string);
  readonly text: string;
  toString(): string;
  valueOf(): number;
  toJSON(): number;
}
/** Parse JSON text: a number is a JS number when it writes back to the same decimal value, a BigInt when
 * an integer beyond 2^53, else a JsonNumber. */
export function parse(text: string): Json;
/** Compact JSON text, numbers exact (BigInt as digits, JsonNumber as its text). */
export function stringify(value: unknown): string;
/** A number text's exact decimal value as a canonical key ("1.0" and "1" give the same). */
export function decimalKey(text: string): string;

export interface QueenOptions {
  /** Broker base URLs, tried in order for failover. None: QUEEN_URL (a comma-separated list). */
  urls?: string | string[];
  /** Called before every retry with the attempt that failed (1 for the first), its error and the wait. */
  onRetry?: (attempt: number, error: QueenError, waitMs: number) => void;
  /** Sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** Attempts per call, the first included (default 3). */
  maxAttempts?: number;
  /** Base of the jittered exponential backoff (default 50). */
  backoffMs?: number;
  /** Cap of one wait, Retry-After included (default 5000). */
  maxBackoffMs?: number;
  /** One attempt's whole time; a long poll adds its wait (default 30000). */
  timeoutMs?: number;
  /** Time to open a connection (default 3000). */
  connectTimeoutMs?: number;
  /** 'node' (node:http keep-alive agent; the default in Node) or 'fetch' (the default elsewhere). */
  transport?: 'node' | 'fetch';
}

export interface Tenanted {
  /** The tenant uuid, sent as x-queen-tenant (a broker behind a trusted proxy). */ tenant?: string;
  /** Aborting it ends the call (a waiting pop included): it rejects with TransportError, code aborted. */ signal?: AbortSignal;
}
/** A write's expiry: exactly one of a ttl (whole seconds > 0) and forever. A write without one does not
 * compile; at run time neither, both or a bad ttl rejects with BadArgument before anything is sent. */
export type Expiry = { ttlSeconds: number | bigint; forever?: false } | { forever: true; ttlSeconds?: undefined };
/** A key's version: a number, or a bigint beyond 2^53 (JSON numbers are read exactly); what expect takes. */
export type Version = number | bigint;
export type WriteOptions = Expiry & Tenanted & {
  /** Apply only while the key holds this version (0: absent). */
  expect?: Version;
  /** A lost precondition rejects with PreconditionFailed instead of answering applied: false. */
  required?: boolean;
};
export type IncrOptions = Expiry & Tenanted & { min?: Json; max?: Json; required?: boolean };

export interface GetResult { op: 'get'; key: string; found: boolean; value?: Json; version?: Version; expiresAt?: string | null; [member: string]: unknown }
export interface WriteResult {
  op: 'put' | 'putIfAbsent' | 'delete' | 'incr'; key: string; applied: boolean;
  /** Why not applied: exists, absent, version, limit. */
  reason?: string; version?: Version; value?: Json; expiresAt?: string | null; [member: string]: unknown;
}
export interface Row { key: string; value?: Json; version?: Version; expiresAt?: string | null; [member: string]: unknown }
export interface GetManyResult { op: 'getMany'; rows: Row[]; missing: string[]; [member: string]: unknown }
export interface PrefixPage { op: 'getPrefix'; rows: Row[]; truncated: boolean; nextAfter?: string | null; [member: string]: unknown }
export type KvOp = { op: string; ns: string; [member: string]: unknown };

/** The message: payload, or data as the reference client's users write it (not both). */
export type Payload = { payload: Json; data?: never } | { data: Json; payload?: never };
export type QueueItem = Payload & { partition?: string; transactionId?: string; [member: string]: unknown };
export type PushItem = QueueItem & { queue: string };
export interface PushResult { index: number; status: 'queued' | 'duplicate' | string; transaction_id?: string; [member: string]: unknown }
export interface Message {
  transactionId: string; partitionId: string; leaseId?: string; data: Json; deliveryAttempt?: number;
  queue?: string; partition?: string; producer?: string | null; [member: string]: unknown;
}
export interface PopResult { success: boolean; messages: Message[]; leaseId?: string; partitionId?: string; queue?: string; partition?: string; consumerGroup?: string; [member: string]: unknown }
export interface PopOptions extends Tenanted {
  /** wait: a long poll of up to timeoutMs; `signal` cancels it. */
  partition?: string; group?: string; batch?: number; wait?: boolean; timeoutMs?: number; leaseSeconds?: number; autoAck?: boolean;
}
export interface AckItem { transactionId: string; partitionId: string; leaseId?: string; status?: 'completed' | 'failed' | string; error?: string }
export interface AckResult { index: number; success: boolean; [member: string]: unknown }
export interface RenewResult { success: boolean; renewed: boolean; leaseId: string; [member: string]: unknown }
export interface TxResult {
  /** false: rolled back (reason, and for a lost kv op failedIndex/kvReason/value); a result, not an error. */
  success: boolean; transactionId?: string; results?: Array<Record<string, unknown>>; reason?: string;
  failedIndex?: number; kvReason?: string; value?: Json; [member: string]: unknown;
}
export interface ConsumeOptions extends Tenanted {
  concurrency?: number; group?: string; partition?: string; batch?: number; leaseSeconds?: number;
  /** A worker's long poll, and so the longest a stop waits for it (default 1000). */
  pollMs?: number;
  /** Aborting it stops the loop cleanly. */
  signal?: AbortSignal;
}
export interface ConsumeStats { handled: number; failed: number }
export type Handler = (message: Message, tx: Tx) => unknown | Promise<unknown>;

/** clients/API.md's error kinds, the same in every client. */
export type ErrorKind = 'bad_request' | 'auth' | 'not_found' | 'conflict' | 'precondition' | 'rate_limited' | 'unavailable' | 'server' | 'transport';
export class QueenError extends Error {
  readonly kind: ErrorKind;
  status: number; code: string; reason: string; detail: string;
  /** Retry-After seconds of the last answer, 0 when none. */
  retryAfter: number;
  attempts: number;
  toJSON(): { status: number; code: string; reason: string; detail: string; retryAfter: number; kind: ErrorKind };
}
/** The broker refused the input (4xx but 429). */
export class QueenRefused extends QueenError {}
/** 400, 413, other 4xx. */
export class BadRequest extends QueenRefused {}
/** Refused by the client before anything was sent: status 0, code bad_argument. */
export class BadArgument extends BadRequest { constructor(detail: string) }
/** 401, 403. */
export class AuthError extends QueenRefused {}
/** 404. */
export class NotFound extends QueenRefused {}
/** 409. */
export class Conflict extends QueenRefused {}
/** 500 and other 5xx but 503. */
export class ServerError extends QueenError {}
/** Try later: 429, 503, or no whole answer. */
export class QueenUnavailable extends QueenError {}
export class RateLimited extends QueenUnavailable {}
export class Unavailable extends QueenUnavailable {}
/** No whole answer (status 0): code unreachable, timeout, transport, aborted. */
export class TransportError extends QueenUnavailable {}
/** The answer was not the JSON the route gives (kind transport). */
export class QueenBadResponse extends QueenError {}
/** A required KV op lost (status 200, code kv_precondition). */
export class PreconditionFailed extends QueenError {
  failedIndex: number; kvReason: string; version: Json; value: Json; valueOmitted: boolean; valueBytes?: number;
}

/** Wire kv op builders. */
export const ops: {
  put(ns: string, key: string, value: Json, o: WriteOptions): KvOp;
  putIfAbsent(ns: string, key: string, value: Json, o: Expiry & { required?: boolean }): KvOp;
  delete(ns: string, key: string, o?: { expect?: Version; required?: boolean }): KvOp;
  incr(ns: string, key: string, delta: Json, o: IncrOptions): KvOp;
  get(ns: string, key: string): KvOp;
  getMany(ns: string, keys: Iterable<string>): KvOp;
  getPrefix(ns: string, prefix: string, o?: { after?: string; limit?: number; keysOnly?: boolean }): KvOp;
};

export class Tx {
  ack(message: Message | AckItem, o?: { status?: string; group?: string }): this;
  push(queue: string, items: Iterable<QueueItem>, o?: { partition?: string }): this;
  kv(op: KvOp): this;
  kvPut(ns: string, key: string, value: Json, o: WriteOptions): this;
  kvPutIfAbsent(ns: string, key: string, value: Json, o: Expiry & { required?: boolean }): this;
  kvDelete(ns: string, key: string, o?: { expect?: Version; required?: boolean }): this;
  kvIncr(ns: string, key: string, delta: Json, o: IncrOptions): this;
  requireLease(lease: string | Message): this;
  /** The wire body. */
  bundle(): { operations?: unknown[]; kv?: KvOp[]; requiredLeases?: string[] };
  commit(o?: Tenanted): Promise<TxResult>;
}

export class Batch {
  readonly ops: KvOp[];
  op(op: KvOp): this;
  get(ns: string, key: string): this;
  getMany(ns: string, keys: Iterable<string>): this;
  put(ns: string, key: string, value: Json, o: WriteOptions): this;
  putIfAbsent(ns: string, key: string, value: Json, o: Expiry & { required?: boolean }): this;
  delete(ns: string, key: string, o?: { expect?: Version; required?: boolean }): this;
  incr(ns: string, key: string, delta: Json, o: IncrOptions): this;
  apply(o?: Tenanted): Promise<Array<Record<string, unknown>>>;
}

export class Kv {
  get(ns: string, key: string, o?: Tenanted): Promise<GetResult>;
  getMany(ns: string, keys: Iterable<string>, o?: Tenanted): Promise<GetManyResult>;
  /** One page: rows, truncated, nextAfter. */
  getPrefix(ns: string, prefix: string, o?: Tenanted & { after?: string; limit?: number; keysOnly?: boolean }): Promise<PrefixPage>;
  /** Every row under prefix, page after page. */
  scan(ns: string, prefix: string, o?: Tenanted & { pageSize?: number; keysOnly?: boolean }): AsyncGenerator<Row, void, undefined>;
  put(ns: string, key: string, value: Json, o: WriteOptions): Promise<WriteResult>;
  putIfAbsent(ns: string, key: string, value: Json, o: Expiry & Tenanted & { required?: boolean }): Promise<WriteResult>;
  delete(ns: string, key: string, o?: Tenanted & { expect?: Version; required?: boolean }): Promise<WriteResult>;
  incr(ns: string, key: string, delta: Json, o: IncrOptions): Promise<WriteResult>;
  apply(ops: Iterable<KvOp>, o?: Tenanted): Promise<Array<Record<string, unknown>>>;
  batch(o?: Tenanted): Batch;
  namespaces(o?: Tenanted): Promise<unknown[]>;
}

export class QueueHandle {
  readonly name: string;
  readonly partition?: string;
  push(items: Iterable<QueueItem>): Promise<PushResult[]>;
  pop(o?: PopOptions): Promise<PopResult | null>;
  configure(options?: Record<string, Json>, extra?: { namespace?: string; task?: string }): Promise<Record<string, unknown>>;
  delete(): Promise<Record<string, unknown>>;
  consume(handler: Handler, o?: ConsumeOptions): Promise<ConsumeStats>;
}

export class Queen {
  /** The three streams routes as the wire has them (clients/STREAMS.md). */
  readonly streams: StreamsCalls;
  constructor(options?: QueenOptions | string | string[]);
  /** Attempts made beyond the first, by every call so far. */
  retries: number;
  readonly kv: Kv;
  close(): Promise<void>;
  health(o?: Tenanted): Promise<{ status: string; version: string; [member: string]: unknown }>;
  push(items: Iterable<PushItem>, o?: Tenanted): Promise<PushResult[]>;
  pop(queue: string, o?: PopOptions): Promise<PopResult | null>;
  /** One message gives one result; an array gives an array. */
  ack(acks: Message | AckItem, o?: Tenanted & { status?: string; error?: string; group?: string }): Promise<AckResult>;
  ack(acks: Array<Message | AckItem>, o?: Tenanted & { status?: string; error?: string; group?: string }): Promise<AckResult[]>;
  leaseExtend(lease: string | Message, seconds: number, o?: Tenanted): Promise<RenewResult>;
  configure(queue: string, options?: Record<string, Json>, extra?: Tenanted & { namespace?: string; task?: string }): Promise<Record<string, unknown>>;
  queues(o?: Tenanted): Promise<unknown[]>;
  queueDelete(queue: string, o?: Tenanted): Promise<Record<string, unknown>>;
  queue(name: string, o?: Tenanted & { partition?: string }): QueueHandle;
  tx(o?: Tenanted): Tx;
  consume(queue: string, handler: Handler, o?: ConsumeOptions): Promise<ConsumeStats>;
}

// ---- streams (clients/STREAMS.md; src/streams.js) --------------------------------------------------------

export type CallOptions = Tenanted & { signal?: AbortSignal };
export interface StreamsRegistered { query_id: string | number; fresh: boolean; reset: boolean; [member: string]: unknown }
export class StreamsCalls {
  /** POST /streams/v1/queries: {name, source_queue, sink_queue?, config_hash, reset?}. */
  register(body: { name: string; source_queue: string; sink_queue?: string | null; config_hash: string; reset?: boolean }, o?: CallOptions): Promise<StreamsRegistered>;
  /** POST /streams/v1/cycle: state ops, sink pushes and the source ack in one transaction (never repeated). */
  cycle(body: { [member: string]: unknown }, o?: CallOptions): Promise<{ [member: string]: unknown }>;
  /** POST /streams/v1/state/get. */
  stateGet(body: { query_id: string | number; partition_id: string; keys?: string[]; key_prefix?: string; [member: string]: unknown }, o?: CallOptions): Promise<{ rows: { key: string; value: Json }[]; [member: string]: unknown }>;
}
/** The context map, filter, flatMap and foreach see; a window's output adds its window. */
export interface StreamContext { partition: string; partitionId: string; key: string; windowStart?: number; windowEnd?: number; windowKey?: string }
export interface GateContext { state: { [member: string]: any }; streamTimeMs: number; key: string; partition: string; partitionId: string }
export type GateFn = (value: any, ctx: GateContext) => boolean | { allow: boolean };
export interface WindowOptions { gracePeriod?: number; allowedLateness?: number; eventTime?: (value: any) => number | string | Date }
export class Stream {
  static from(queue: string): Stream;
  readonly source: string;
  map(fn: (value: any, ctx: StreamContext) => any): Stream;
  filter(fn: (value: any, ctx: StreamContext) => unknown): Stream;
  flatMap(fn: (value: any, ctx: StreamContext) => Iterable<any> | null | undefined): Stream;
  keyBy(fn: (value: any) => unknown): Stream;
  windowTumbling(seconds: number, o?: WindowOptions): Stream;
  windowSliding(size: number, slide: number, o?: WindowOptions): Stream;
  windowCron(every: 'second' | 'minute' | 'hour' | 'day' | 'week', o?: WindowOptions): Stream;
  windowSession(gap: number, o?: WindowOptions): Stream;
  reduce(fn: (acc: any, value: any) => any, initial?: Json): Stream;
  aggregate(fields: { [name: string]: (value: any) => unknown }): Stream;
  gate(fn: GateFn): Stream;
  to(queue: string, o?: { partition?: string | ((value: any) => unknown) }): Stream;
  foreach(fn: (value: any, ctx: StreamContext) => unknown): Stream;
  canonicalConfig(): string;
  configHash(): string;
  worker(client: Queen, name: string, options?: StreamWorkerOptions): StreamWorker;
}
export interface StreamWorkerOptions { batch?: number; group?: string; leaseSeconds?: number; waitMs?: number; reset?: boolean; tenant?: string; clock?: () => number }
export interface StreamStats { cycles: number; messages: number; pushed: number; stateOps: number; late: number; denied: number; leaseLost: number; errors: number }
export class StreamWorker {
  constructor(stream: Stream, client: Queen, name: string, options?: StreamWorkerOptions);
  readonly name: string;
  readonly group: string;
  queryId: string | null;
  stats: StreamStats;
  register(o?: { signal?: AbortSignal }): Promise<StreamsRegistered>;
  /** Pop one batch and commit its cycle; the messages popped (0: none came). */
  step(o?: { signal?: AbortSignal }): Promise<number>;
  /** Cycle until a pop finds nothing. */
  drain(o?: { signal?: AbortSignal; maxCycles?: number }): Promise<StreamStats>;
  /** Cycle until `signal` aborts. */
  run(o?: { signal?: AbortSignal }): Promise<StreamStats>;
  state(partition: string, o?: { signal?: AbortSignal }): Promise<{ [key: string]: Json }>;
}
export function tokenBucketGate(capacity: number, refillPerSec: number, cost?: (value: any) => number): GateFn;
