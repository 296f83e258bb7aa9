// The console's shell: the token field, the role, the navigation and the hash router. Each page is a
// module whose render(main, route) fills <main> and may return a function that stops its timers.
import { authMode, can, role, setToken, token } from './api.js';
import { clearSay, errorBox, h } from './ui.js';
import * as overview from './overview.js';
import * as queues from './queues.js';
import * as messages from './messages.js';
import * as dlq from './dlq.js';
import * as kv from './kv.js';

// Hash routes: #/section/arg/arg?query. Arguments are percent-encoded (a key may hold '/').
const routes = [
  [/^\/$/, overview.render],
  [/^\/queues$/, queues.renderList],
  [/^\/queues\/([^/]+)$/, queues.renderQueue],
  [/^\/messages$/, messages.renderBrowse],
  [/^\/messages\/([^/]+)$/, messages.renderMessage],
  [/^\/dlq$/, dlq.render],
  [/^\/kv$/, kv.renderNamespaces],
  [/^\/kv\/([^/]+)$/, kv.renderBrowse],
  [/^\/kv\/([^/]+)\/key\/([^/]+)$/, kv.renderKey],
];

let stop = null;
let seq = 0; // the latest navigation: an older one still loading must not draw over it

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, query = ''] = raw.split('?');
  return { path, query: new URLSearchParams(query) };
}

function showRole() {
  document.getElementById('role').textContent = authMode === 'off' ? 'admin (authentication off)' : role();
}

async function route() {
  if (stop) { stop(); stop = null; }
  clearSay();
  const mine = ++seq;
  const main = document.getElementById('main');
  delete main.dataset.ready;
  const { path, query } = parseHash();
  for (const a of document.querySelectorAll('#nav a')) {
    const section = a.getAttribute('href').slice(1);
    const current = section === '/' ? path === '/' : path === section || path.startsWith(section + '/');
    if (current) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (authMode === 'jwt' && !can('read')) {
    main.replaceChildren(h('h1', {}, 'Sign in'),
      h('p', {}, token() ? 'This token carries no role the broker knows (read, write or admin).'
        : 'This broker requires a token (QUEEN_AUTH=jwt). Paste a bearer token above; it is kept in this tab only (session storage).'));
    main.dataset.ready = path;
    return;
  }
  for (const [re, render] of routes) {
    const m = path.match(re);
    if (!m) continue;
    main.replaceChildren(h('p', { class: 'loading' }, 'Loading…'));
    try {
      const stopper = (await render(main, { args: m.slice(1).map(decodeURIComponent), query, current: () => mine === seq })) || null;
      if (mine !== seq) { if (stopper) stopper(); return; }
      stop = stopper;
    } catch (err) {
      if (mine !== seq) return;
      main.replaceChildren(h('h1', {}, 'Error'), errorBox(err));
    }
    main.dataset.ready = path;
    return;
  }
  main.replaceChildren(h('h1', {}, 'Not found'), h('p', {}, 'No page at this address. '), h('a', { href: '#/' }, 'Go to the overview'));
  main.dataset.ready = path;
}

function setupAuth() {
  const form = document.getElementById('auth');
  if (authMode !== 'jwt') return;
  form.hidden = false;
  const input = document.getElementById('token');
  input.value = token();
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    setToken(input.value.trim());
    showRole();
    route();
  });
  document.getElementById('forget').addEventListener('click', () => {
    input.value = '';
    setToken('');
    showRole();
    route();
  });
}

setupAuth();
showRole();
window.addEventListener('hashchange', () => {
  route().then(() => document.getElementById('main').focus({ preventScroll: true }));
});
route();
