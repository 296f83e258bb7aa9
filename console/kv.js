// KV: the namespaces with their key counts and the tenant's quota and usage; a namespace browsed by
// prefix a page at a time (keyset: after = the last key shown), expired keys greyed until the sweeper
// removes them; a key's value, version and expiry, edited with compare-and-set on its version (a
// stale edit shows the current value instead of overwriting it), deleted, or given a new expiry.
import { call, can, enc, Exact, get, qs } from './api.js';
import { bytes, card, compact, confirmAction, errorBox, field, guarded, h, num, pretty, row, flash, table, when } from './ui.js';

const PAGE = 50;

export async function renderNamespaces(main) {
  const [spaces, quota] = await Promise.all([get('/api/v1/resources/kv/namespaces'), get('/api/v1/resources/kv/quota')]);
  const limit = (v) => (v === null ? 'unlimited' : num(v));
  main.replaceChildren(h('h1', {}, 'KV'),
    h('section', { 'aria-labelledby': 'quota-h' },
      h('h2', { id: 'quota-h' }, 'Quota and usage'),
      h('div', { class: 'cards', id: 'quota' },
        card('Quota', quota.hasQuota ? (quota.enabled ? 'enabled' : 'disabled') : 'none set', 'quota'),
        card('Rows', `${num(quota.rows)} of ${limit(quota.maxRows)}`, 'rows'),
        card('Bytes', `${bytes(quota.bytes)} of ${quota.maxBytes === null ? 'unlimited' : bytes(quota.maxBytes)}`, 'bytes'),
        card('Reads per second', limit(quota.maxReadsPerSec), 'reads'),
        card('Writes per second', limit(quota.maxWritesPerSec), 'writes'),
        card('Measured', quota.computedAt ? when(quota.computedAt) : 'not yet', 'measured')),
      quota.sampled ? h('p', { class: 'hint' }, 'Usage is estimated from a sample of the shards.') : null),
    table(`${spaces.namespaces.length} namespace(s)`, ['Namespace', 'Keys (expired unswept included)'],
      spaces.namespaces.map((n) => row([h('a', { href: `#/kv/${enc(n.namespace)}` }, n.namespace), num(n.keys)], { dataset: { ns: n.namespace } })),
      { id: 'namespaces' }));
  return null;
}

export async function renderBrowse(main, { args: [ns], query }) {
  const prefix = query.get('prefix') || '';
  const after = query.get('after');
  // The afters of the pages before this one, for Previous ("" is the first page): keyset pages have no
  // page numbers to go back by.
  let back = [];
  try { back = JSON.parse(query.get('back') || '[]'); } catch { back = []; }
  const page = await call('POST', '/api/v1/resources/kv/list',
    { namespace: ns, prefix, after: after === null ? undefined : after, limit: PAGE, includeExpired: true });
  const input = h('input', { name: 'prefix', value: prefix, spellcheck: 'false', autocomplete: 'off' });
  const link = (extra) => `#/kv/${enc(ns)}` + qs({ prefix, ...extra });
  const prev = back.length ? back[back.length - 1] : null;
  main.replaceChildren(h('h1', {}, 'Namespace ', h('span', { class: 'name' }, ns)),
    h('p', {}, h('a', { href: '#/kv' }, '← All namespaces')),
    h('form', {
      class: 'filters', role: 'search', 'aria-label': 'Keys by prefix',
      onsubmit: (e) => { e.preventDefault(); location.hash = `#/kv/${enc(ns)}` + qs({ prefix: input.value }); },
    }, field('Key prefix', input), h('button', { type: 'submit' }, 'Browse')),
    table(`${page.rows.length} key(s)${prefix ? ` starting with “${prefix}”` : ''}${after ? ' after ' + after : ''}`,
      ['Key', 'Version', 'Expires', 'Updated', 'Value'],
      page.rows.map((r) => row([
        h('a', { href: `#/kv/${enc(ns)}/key/${enc(r.key)}` }, r.key),
        versionText(r.version), r.expired ? h('span', {}, 'expired, awaiting the sweeper ', expiry(r.expiresAt)) : expiry(r.expiresAt),
        when(r.updatedAt), h('code', { class: 'preview' }, compact(r.value).slice(0, 80))],
      { class: r.expired ? 'expired' : undefined, dataset: { key: r.key, expired: String(r.expired) } })),
      { id: 'keys' }),
    h('nav', { class: 'pager', 'aria-label': 'Pages' },
      back.length ? h('a', { href: link({ after: prev || undefined, back: back.length > 1 ? JSON.stringify(back.slice(0, -1)) : undefined }), rel: 'prev' }, '← Previous page') : null,
      page.truncated ? h('a', { href: link({ after: page.nextAfter, back: JSON.stringify([...back, after || '']) }), rel: 'next' }, 'Next page →') : null));
  return null;
}

function expiry(iso) {
  if (!iso) return 'never';
  return h('span', {}, when(iso), h('br'), h('small', {}, iso));
}

const versionText = (v) => (v instanceof Exact ? v.source : String(v));

export async function renderKey(main, { args: [ns, key] }) {
  const path = `/api/v1/kv/${enc(ns)}/${enc(key)}`;
  const got = await get(path);
  const mayWrite = can('write');
  main.replaceChildren(h('h1', {}, 'Key ', h('span', { class: 'name' }, key)),
    h('p', {}, h('a', { href: `#/kv/${enc(ns)}` }, `← Namespace ${ns}`)));
  if (!got.found) {
    main.append(h('p', { id: 'absent' }, 'This key does not exist (or has expired).'));
    return null;
  }
  let current = got; // what the page believes the key is: the version an edit expects
  const out = h('div', { 'aria-live': 'polite', id: 'outcome' });
  const facts = h('dl', { class: 'facts', id: 'facts' });
  const shown = h('pre', { class: 'json', id: 'value', tabindex: 0, 'aria-label': 'Current value' });
  const draw = () => {
    facts.replaceChildren(
      h('dt', {}, 'Version'), h('dd', { id: 'version' }, versionText(current.version)),
      h('dt', {}, 'Expires'), h('dd', { id: 'expires' }, expiry(current.expiresAt)),
      h('dt', {}, 'Updated'), h('dd', {}, when(current.updatedAt)));
    shown.textContent = pretty(current.value);
  };
  draw();
  const editor = h('textarea', { id: 'editor', rows: 10, spellcheck: 'false' });
  editor.value = pretty(got.value);
  const remaining = got.expiresAt ? Math.max(1, Math.ceil((Date.parse(got.expiresAt) - Date.now()) / 1000)) : '';
  const ttl = h('input', { id: 'ttl', type: 'number', min: 1, step: 1, value: remaining, placeholder: 'forever when empty' });
  const ttlOf = () => {
    const t = ttl.value.trim();
    if (!t) return '"forever":true';
    if (!/^[1-9][0-9]*$/.test(t)) throw new Error('The expiry must be a whole number of seconds above 0, or empty for forever.');
    return `"ttlSeconds":${t}`;
  };
  // A put that applies only if the key still has the version this page showed.
  const put = async (valueText, what) => {
    try {
      JSON.parse(valueText);
    } catch (err) {
      out.replaceChildren(errorBox(`The value is not JSON: ${err.message}`));
      return;
    }
    let expiryField;
    try { expiryField = ttlOf(); } catch (err) { out.replaceChildren(errorBox(err)); return; }
    try {
      const r = await call('PUT', path, { raw: `{"value":${valueText},${expiryField},"expect":${versionText(current.version)},"required":true}` });
      if (r.ok === false) return stale(r);
      current = await get(path);
      draw();
      out.replaceChildren(h('p', { class: 'ok', role: 'status' }, `${what}: now version ${versionText(current.version)}.`));
    } catch (err) {
      out.replaceChildren(errorBox(err));
    }
  };
  // Someone else wrote (or deleted) the key since this page read it: show what it holds now, keep the
  // operator's draft, and expect the new version next time.
  const stale = async (verdict) => {
    const fresh = await get(path);
    if (!fresh.found) {
      out.replaceChildren(h('div', { class: 'error', role: 'alert', id: 'stale' },
        h('p', {}, 'Not saved: the key was deleted since this page read it.')));
      return;
    }
    current = fresh;
    draw();
    out.replaceChildren(h('div', { class: 'error', role: 'alert', id: 'stale' },
      h('p', {}, `Not saved: the key changed since this page read it (now version ${versionText(fresh.version)}; the broker said ${verdict.kvReason}). `,
        'Its current value is shown here and under Value; your draft is kept in the editor. Save again to replace it.'),
      h('pre', { class: 'json' }, pretty(fresh.value))));
  };
  main.append(out, facts, h('h2', {}, 'Value'), shown,
    h('section', { 'aria-labelledby': 'edit-h' },
      h('h2', { id: 'edit-h' }, 'Edit'),
      h('form', {
        onsubmit: (e) => { e.preventDefault(); put(editor.value, 'Saved'); },
      }, field('New value (JSON)', editor), field('Expires in (seconds; empty: never)', ttl),
      h('div', { class: 'actions' },
        h('button', guarded(mayWrite, 'write', { type: 'submit', id: 'save' }), 'Save (if unchanged)'),
        h('button', guarded(mayWrite, 'write', {
          type: 'button', id: 'set-ttl',
          onclick: () => put(pretty(current.value), 'Expiry set'),
        }), 'Set expiry only'),
        h('button', guarded(mayWrite, 'write', {
          type: 'button', id: 'delete', class: 'danger',
          onclick: async () => {
            if (!(await confirmAction('Delete key', `Delete ${ns} / ${key} (version ${versionText(current.version)})? It is deleted only if nobody changed it since.`, 'Delete'))) return;
            try {
              const r = await call('DELETE', path, { raw: `{"expect":${versionText(current.version)},"required":true}` });
              if (r.ok === false) return stale(r);
              flash(`Deleted ${ns} / ${key}.`, 'ok');
              location.hash = `#/kv/${enc(ns)}`;
            } catch (err) {
              out.replaceChildren(errorBox(err));
            }
          },
        }), 'Delete…')))));
  return null;
}
