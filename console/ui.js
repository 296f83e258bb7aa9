// Small DOM helpers shared by the pages. Text always goes in as text nodes, never as HTML: keys,
// payloads and queue names are whatever clients wrote.
import { Exact } from './api.js';

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// A table: caption, header cells, rows of cells (each a node, text, or [text, attrs]).
export function table(caption, headers, rows, attrs = {}) {
  return h('div', { class: 'scroll' },
    h('table', attrs,
      h('caption', {}, caption),
      h('thead', {}, h('tr', {}, headers.map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: headers.length, class: 'empty' }, 'Nothing here.')))));
}

export const row = (cells, attrs = {}) => h('tr', attrs, cells.map((c) => h('td', {}, c)));

// JSON pretty-printed, numbers exactly as the broker sent them.
export function pretty(v, indent = '') {
  const next = indent + '  ';
  if (v instanceof Exact) return v.source;
  if (Array.isArray(v)) {
    if (!v.length) return '[]';
    return '[\n' + v.map((x) => next + pretty(x, next)).join(',\n') + '\n' + indent + ']';
  }
  if (v && typeof v === 'object') {
    const keys = Object.keys(v);
    if (!keys.length) return '{}';
    return '{\n' + keys.map((k) => next + JSON.stringify(k) + ': ' + pretty(v[k], next)).join(',\n') + '\n' + indent + '}';
  }
  return JSON.stringify(v);
}

export const compact = (v) => pretty(v).replace(/\n\s*/g, ' ');

export function ago(ms) {
  const s = Math.round(Math.abs(ms) / 1000);
  const text = s < 60 ? `${s} s` : s < 3600 ? `${Math.round(s / 60)} min` : s < 86400 ? `${Math.round(s / 3600)} h` : `${Math.round(s / 86400)} d`;
  return ms >= 0 ? `${text} ago` : `in ${text}`;
}

// An instant as a <time>: relative words, the absolute UTC time in the title and datetime.
export function when(iso) {
  if (!iso) return '—';
  const t = Date.parse(iso);
  return h('time', { datetime: iso, title: iso }, ago(Date.now() - t));
}

export const num = (n) => (n === null || n === undefined ? '—' : n instanceof Exact ? n.source : Number(n).toLocaleString('en'));

export function bytes(n) {
  if (n === null || n === undefined) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return `${i ? v.toFixed(1) : v} ${u[i]}`;
}

export function say(text, kind = 'info') {
  const s = document.getElementById('status');
  s.replaceChildren(h('p', { class: kind }, text));
}

// The outcome of an action that then navigates: said after the next page's clearSay.
let pending = null;
export function flash(text, kind = 'ok') { pending = [text, kind]; }

export function clearSay() {
  document.getElementById('status').replaceChildren();
  if (pending) { say(...pending); pending = null; }
}

// Asks before anything that changes or deletes data; resolves true on Confirm.
export function confirmAction(title, text, okLabel = 'Confirm') {
  const d = document.getElementById('confirm');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  document.getElementById('confirm-ok').textContent = okLabel;
  d.returnValue = '';
  return new Promise((resolve) => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
    d.showModal();
    document.getElementById('confirm-cancel').focus();
  });
}

// A control the role cannot use: present (so the operator sees it exists), disabled, and saying why.
export function guarded(allowed, needed, attrs) {
  return allowed ? attrs : { ...attrs, disabled: true, title: `needs the ${needed} role`, 'aria-disabled': 'true' };
}

export function field(label, input) {
  const id = input.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  input.id = id;
  return h('div', { class: 'field' }, h('label', { for: id }, label), input);
}

export function errorBox(err) {
  return h('p', { class: 'error', role: 'alert' }, err && err.message ? err.message : String(err));
}

export function card(label, value, name) {
  return h('div', { class: 'card', dataset: { field: name } }, h('span', { class: 'label' }, label), h('strong', {}, value));
}
