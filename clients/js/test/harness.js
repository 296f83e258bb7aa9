// Real brokers for the tests: `queen serve` ($QUEEN_BIN) on the private PostgreSQL ($QUEEN_TEST_PG_URL)
// that scripts/test.sh starts.
import { spawn, execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';

export function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run through make test-js (scripts/test.sh)`);
  return v;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

/** A loopback URL where nothing listens. */
export const deadUrl = async () => `http://127.0.0.1:${await freePort()}`;

export function psql(sql) {
  return execFileSync('psql', [env('QUEEN_TEST_PG_URL'), '-qtAX', '-v', 'ON_ERROR_STOP=1', '-c', sql], { encoding: 'utf8' }).trim();
}

/** The status of one GET on a fresh connection; null when no answer. */
export function statusOf(base, path = '/health') {
  return new Promise((resolve) => {
    const req = http.get(base + path, { agent: false, timeout: 2000 }, (res) => { res.resume(); resolve(res.statusCode); });
    req.on('timeout', () => { req.destroy(); resolve(null); });
    req.on('error', () => resolve(null));
  });
}

export const pause = (ms) => new Promise((r) => setTimeout(r, ms));

/** Waits until cond() is truthy (it may be async), polling; throws after timeoutMs. */
export async function waitUntil(cond, timeoutMs = 20000) {
  const until = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await pause(20);
  }
}

export class Broker {
  /** Starts one `queen serve` on a free loopback port. */
  static async start(extraEnv = {}, { wait = true } = {}) {
    const b = new Broker();
    b.port = await freePort();
    b.base = `http://127.0.0.1:${b.port}`;
    b.log = `/tmp/queen-jstest-broker-${process.pid}-${b.port}.log`;
    const fd = fs.openSync(b.log, 'w');
    b.proc = spawn(env('QUEEN_BIN'), ['serve'], {
      env: { ...process.env, QUEEN_PG_URL: env('QUEEN_TEST_PG_URL'), QUEEN_PORT: String(b.port), QUEEN_BIND: '127.0.0.1', ...extraEnv },
      stdio: ['ignore', fd, fd],
    });
    fs.closeSync(fd);
    b.exited = new Promise((resolve) => b.proc.once('exit', resolve));
    if (wait) await b.waitHealthy();
    return b;
  }

  async waitHealthy(timeoutMs = 30000) {
    const until = Date.now() + timeoutMs;
    while (Date.now() < until && this.proc.exitCode === null) {
      if ((await statusOf(this.base)) === 200) return;
      await pause(50);
    }
    throw new Error(`the broker never answered (log: ${this.log})`);
  }

  async stop() {
    if (!this.proc) return;
    const p = this.proc;
    this.proc = null;
    if (p.exitCode !== null || p.signalCode !== null) return;
    p.kill('SIGTERM');
    const killer = setTimeout(() => p.kill('SIGKILL'), 30000);
    await this.exited;
    clearTimeout(killer);
  }
}

/** An HS256 JWT. */
export function mintHs256(secret, claims) {
  const b64 = (b) => Buffer.from(b).toString('base64url');
  const head = b64(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
  const body = b64(JSON.stringify(claims));
  const sig = createHmac('sha256', secret).update(`${head}.${body}`).digest('base64url');
  return `${head}.${body}.${sig}`;
}
