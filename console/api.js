// The broker's HTTP API as the console uses it: one fetch wrapper that adds the operator's token, and
// the role the token claims. The broker verifies the token; the role read here only greys out what
// the broker would refuse anyway.
const TOKEN_KEY = 'queen.token';
const ROLES = ['none', 'read', 'write', 'admin', 'operator'];

export const authMode = document.querySelector('meta[name="queen-auth"]')?.content === 'jwt' ? 'jwt' : 'off';

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function claims(t) {
  try {
    const part = t.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(part + '='.repeat((4 - (part.length % 4)) % 4)));
  } catch {
    return null;
  }
}

// The highest known role of `role` or `roles` (a string or an array), as the broker reads them.
export function role() {
  if (authMode === 'off') return 'operator'; // no token: every call is allowed
  const c = token() ? claims(token()) : null;
  if (!c) return 'none';
  const named = [c.role, c.roles].flat().filter((r) => typeof r === 'string');
  return named.reduce((best, r) => (ROLES.indexOf(r) > ROLES.indexOf(best) ? r : best), 'none');
}

export const can = (needed) => ROLES.indexOf(role()) >= ROLES.indexOf(needed);

export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.error ? `${body.error} (${status} ${body.reason || body.code || ''})` : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

// JSON as the broker sent it: a number whose text a double would change (12345678901234567890, 1e2)
// is kept as its text (Exact), so showing or re-sending a value never alters it.
export class Exact {
  constructor(source) { this.source = source; }
  toString() { return this.source; }
}

export function parseExact(text) {
  return JSON.parse(text, (k, v, ctx) =>
    typeof v === 'number' && ctx && typeof ctx.source === 'string' && String(v) !== ctx.source ? new Exact(ctx.source) : v);
}

// One call (body: a value to serialise, or {raw: 'JSON text'} sent as is); resolves with the parsed body (null for none), rejects with ApiError for a 4xx/5xx.
export async function call(method, path, body) {
  const headers = {};
  if (authMode === 'jwt' && token()) headers.Authorization = `Bearer ${token()}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const payload = body === undefined ? undefined : body && typeof body.raw === 'string' ? body.raw : JSON.stringify(body);
  const res = await fetch(path, { method, headers, body: payload });
  const text = await res.text();
  let parsed = null;
  if (text) {
    try { parsed = parseExact(text); } catch { parsed = text; }
  }
  if (!res.ok) throw new ApiError(res.status, parsed);
  return parsed;
}

export const get = (path) => call('GET', path);
export const enc = encodeURIComponent;

// A query string from an object, leaving out empty values.
export function qs(params) {
  const p = Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== '');
  return p.length ? '?' + p.map(([k, v]) => `${enc(k)}=${enc(v)}`).join('&') : '';
}
