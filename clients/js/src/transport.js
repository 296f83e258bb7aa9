// Sending one attempt. In Node: node:http / node:https with a keep-alive agent, which tells a refused
// connection (nothing sent: any call may go again) from a failure after the request went out. In a
// browser: fetch, where the two cannot be told apart, so every network failure counts as after-send
// (only safe calls are repeated).

/** A failed attempt with no whole answer: code unreachable, timeout, transport, or aborted (the call's signal). */
export class AttemptFailed extends Error {
  constructor(code, detail) { super(detail); this.code = code; this.detail = detail; }
}

const NO_CONNECTION = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH',
  'EADDRNOTAVAIL', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * @typedef {{method: string, url: string, headers: Record<string,string>, body?: string,
 *   timeoutMs: number, connectTimeoutMs: number, signal?: AbortSignal}} Attempt
 * @typedef {{status: number, retryAfter: string|null, body: string}} Answer
 */

/** The Node transport: one keep-alive agent per protocol, per client. */
export async function nodeTransport() {
  const httpName = 'node:http', httpsName = 'node:https'; // names in variables: bundlers for browsers leave them be
  const http = await import(httpName);
  const https = await import(httpsName);
  const agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16 }),
    'https:': new https.Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16 }),
  };
  const mods = { 'http:': http, 'https:': https };

  /** @param {Attempt} a @param {boolean} fresh @returns {Promise<Answer>} */
  const once = (a, fresh) => new Promise((resolve, reject) => {
    const u = new URL(a.url);
    const mod = mods[u.protocol];
    if (!mod) { reject(new AttemptFailed('unreachable', `${a.url}: not http or https`)); return; }
    let connected = false, answered = false, settled = false;
    const finish = (fn, v) => {
      if (settled) return;
      settled = true;
      clearTimeout(whole);
      clearTimeout(connecting);
      a.signal?.removeEventListener('abort', aborted);
      fn(v);
    };
    const headers = { ...a.headers };
    if (a.body !== undefined) headers['Content-Length'] = String(Buffer.byteLength(a.body));
    const req = mod.request(u, { method: a.method, headers, agent: fresh ? false : agents[u.protocol] });
    function aborted() {
      req.destroy();
      finish(reject, new AttemptFailed('aborted', `${a.url}: aborted by the call's signal`));
    }
    if (a.signal?.aborted) { aborted(); return; }
    a.signal?.addEventListener('abort', aborted, { once: true });
    const whole = setTimeout(() => {
      req.destroy();
      finish(reject, connected
        ? new AttemptFailed('timeout', `${a.url}: no whole answer within ${a.timeoutMs} ms`)
        : new AttemptFailed('unreachable', `${a.url}: no connection within ${a.timeoutMs} ms`));
    }, a.timeoutMs);
    const connecting = setTimeout(() => {
      if (connected) return;
      req.destroy();
      finish(reject, new AttemptFailed('unreachable', `${a.url}: no connection within ${a.connectTimeoutMs} ms`));
    }, a.connectTimeoutMs);
    req.on('socket', (s) => {
      if (!s.connecting) connected = true; // a kept-alive socket
      else s.once('connect', () => { connected = true; });
    });
    req.on('error', (e) => {
      if (!connected) { finish(reject, new AttemptFailed('unreachable', `${a.url}: ${e.code || e.message}`)); return; }
      if (req.reusedSocket && !answered && (e.code === 'ECONNRESET' || e.code === 'EPIPE')) {
        // A kept-alive connection the broker closed while idle: it read nothing of this request.
        finish(reject, Object.assign(new AttemptFailed('transport', `${a.url}: ${e.code}`), { stale: true }));
        return;
      }
      finish(reject, new AttemptFailed('transport', `${a.url}: ${e.code || e.message}`));
    });
    req.on('response', (res) => {
      answered = true;
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('error', (e) => finish(reject, new AttemptFailed('transport', `${a.url}: ${e.code || e.message}`)));
      res.on('aborted', () => finish(reject, new AttemptFailed('transport', `${a.url}: the answer was cut`)));
      res.on('end', () => finish(resolve, {
        status: res.statusCode, retryAfter: res.headers['retry-after'] ?? null, body: Buffer.concat(chunks).toString('utf8'),
      }));
    });
    req.end(a.body);
  });

  return {
    /** @param {Attempt} a */
    async send(a) {
      try {
        return await once(a, false);
      } catch (e) {
        if (e.stale) return once(a, true); // once more on a fresh connection: not a retry
        throw e;
      }
    },
    close() { agents['http:'].destroy(); agents['https:'].destroy(); },
  };
}

/** The fetch transport (browsers, and any runtime with fetch). */
export async function fetchTransport() {
  return {
    /** @param {Attempt} a @returns {Promise<Answer>} */
    async send(a) {
      const ctl = new AbortController();
      const timer = setTimeout(() => ctl.abort(), a.timeoutMs);
      const aborted = () => ctl.abort();
      a.signal?.addEventListener('abort', aborted, { once: true });
      if (a.signal?.aborted) ctl.abort();
      try {
        const res = await fetch(a.url, { method: a.method, headers: a.headers, body: a.body, signal: ctl.signal });
        const body = await res.text();
        return { status: res.status, retryAfter: res.headers.get('retry-after'), body };
      } catch (e) {
        if (a.signal?.aborted) throw new AttemptFailed('aborted', `${a.url}: aborted by the call's signal`);
        if (ctl.signal.aborted) throw new AttemptFailed('timeout', `${a.url}: no whole answer within ${a.timeoutMs} ms`);
        const code = e?.cause?.code;
        throw new AttemptFailed(NO_CONNECTION.has(code) ? 'unreachable' : 'transport', `${a.url}: ${code || e.message}`);
      } finally {
        clearTimeout(timer);
        a.signal?.removeEventListener('abort', aborted);
      }
    },
    close() {},
  };
}

export const isNode = () => typeof globalThis.process?.versions?.node === 'string';
