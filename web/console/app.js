// app.js: the console shell: sign-in, navigation, the live event stream and
// a small router over history.pushState. Each view renders into <main> and
// returns a cleanup function.
import { token, setToken, clearToken, setUnauthorizedHandler, Events } from './api.js';
import * as rest from './endpoints.js';
import { h, clear, errorBox, short } from './dom.js';
import { planFormView, planView } from './plan.js';
import { recipesView } from './recipes.js';
import { forwardsView } from './network.js';
import { approvalsView, grantsView, plansView, sessionsView, sessionView, receiptsView, receiptView, affectsApprovals, hostsView } from './lists.js';

const main = document.getElementById('main');
const flashEl = document.getElementById('flash');
let cleanup = null;
let events = null;
let status = null;
// The termd daemons (hosts) the gateway serves, as GET /v1/hosts lists them.
let hosts = [];
const HOST_KEY = 'termd.host';

const routes = [
  [/^\/$/, planFormView, 'plan'],
  [/^\/approvals$/, approvalsView, 'approvals'],
  [/^\/grants$/, grantsView, 'grants'],
  [/^\/plans$/, plansView, 'plans'],
  [/^\/plans\/([^/]+)$/, planView, 'plans'],
  [/^\/sessions$/, sessionsView, 'sessions'],
  [/^\/sessions\/([^/]+)$/, sessionView, 'sessions'],
  [/^\/receipts$/, receiptsView, 'receipts'],
  [/^\/receipts\/([^/]+)$/, receiptView, 'receipts'],
  [/^\/recipes$/, recipesView, 'recipes'],
  [/^\/forwards$/, forwardsView, 'forwards'],
  [/^\/hosts$/, hostsView, 'hosts'],
];

const ctx = {
  go(path) {
    history.pushState(null, '', path);
    route();
  },
  flash(err) {
    clear(flashEl, err ? errorBox(err) : null);
  },
  on(fn) { return events.on(fn); },
  get role() { return status ? short(status.caller?.role, 'ROLE_') : ''; },
  // The principal name the daemon knows this token by (e.g. token:alice).
  get me() { return status?.caller?.name || ''; },
  get canApprove() { return this.role === 'OPERATOR'; },
  get canRun() { return this.role === 'OPERATOR' || this.role === 'AGENT'; },
  // The adviser is optional: without it the console says so instead of
  // showing a panel that looks ready.
  get adviser() { return { available: !!status?.adviser_available, detail: status?.adviser_detail || '' }; },
  // The fleet: every host, whether there is more than one, the host the
  // per-host pages show, and a page's link on another host.
  get hosts() { return hosts; },
  get multiHost() { return hosts.length > 1; },
  get host() { return rest.host(); },
  hostHref(path, name) { return hosts.length > 1 && name ? path + '?host=' + encodeURIComponent(name) : path; },
  refreshHosts() { return refreshHosts(); },
};

// selectHost makes name the host of the per-host pages (kept for the tab).
function selectHost(name) {
  if (!hosts.some((x) => x.name === name)) return false;
  const multi = hosts.length > 1;
  rest.setHost(multi ? name : '');
  sessionStorage.setItem(HOST_KEY, name);
  const sel = document.getElementById('host-select');
  if (sel.value !== name) sel.value = name;
  return true;
}

// refreshHosts reads the hosts and their state: the selector, and the
// count of hosts down beside the Hosts link.
async function refreshHosts() {
  try {
    hosts = (await rest.fleet.hosts()).hosts || [];
  } catch { return hosts; }
  const sel = document.getElementById('host-select');
  const keep = rest.host() || sessionStorage.getItem(HOST_KEY) || (hosts.find((x) => x.default) || hosts[0] || {}).name;
  clear(sel, hosts.map((x) => h('option', { value: x.name }, x.name + (x.state === 'up' ? '' : ' (down)'))));
  document.getElementById('host-picker').hidden = hosts.length < 2;
  document.getElementById('nav-hosts').hidden = hosts.length < 2;
  if (!selectHost(keep) && hosts.length) selectHost((hosts.find((x) => x.default) || hosts[0]).name);
  const down = hosts.filter((x) => x.state !== 'up').length;
  document.getElementById('hosts-down').textContent = down ? String(down) : '';
  return hosts;
}

function route() {
  if (cleanup) { try { cleanup(); } catch (e) { console.error(e); } cleanup = null; }
  ctx.flash(null);
  // ?host=NAME (a link to a page on another host) selects that host.
  const want = new URLSearchParams(location.search).get('host');
  if (want) selectHost(want);
  const path = location.pathname.replace(/\/+$/, '') || '/';
  for (const [re, view, nav] of routes) {
    const m = path.match(re);
    if (!m) continue;
    for (const a of document.querySelectorAll('[data-nav]')) {
      if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    clear(main);
    cleanup = view(main, ctx, ...m.slice(1).map(decodeURIComponent)) || null;
    main.focus({ preventScroll: true });
    return;
  }
  clear(main, h('h1', {}, 'Not found'), h('p', {}, 'Nothing lives at ', h('code', {}, path), '. ', h('a', { href: '/' }, 'Start a new plan'), '.'));
}

// Links inside the app navigate without reloading.
document.addEventListener('click', (e) => {
  const a = e.target.closest('a[href]');
  if (!a || a.target || a.hasAttribute('download') || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith(rest.PREFIX)) return;
  e.preventDefault();
  ctx.go(url.pathname + url.search);
});
window.addEventListener('popstate', route);

function setLive(on, text) {
  const el = document.getElementById('live');
  el.textContent = text;
  el.classList.toggle('on', on);
  // Events missed while the stream was down may have changed the queue.
  if (on) countSoon();
}

async function refreshApprovalCount() {
  try {
    const r = await rest.fleet.plans();
    const n = (r.plans || []).length;
    document.getElementById('approval-count').textContent = n ? String(n) : '';
  } catch { /* the count is a hint; the page shows errors */ }
}

let countTimer = null;
function countSoon() {
  clearTimeout(countTimer);
  countTimer = setTimeout(refreshApprovalCount, 200);
}

let hostsTimer = null;
function onEvent(ev) {
  if (affectsApprovals(ev)) countSoon();
  if (ev.kind === 'HOST') { clearTimeout(hostsTimer); hostsTimer = setTimeout(refreshHosts, 100); }
}

function signInView(message) {
  document.getElementById('nav').hidden = true;
  document.getElementById('who').hidden = true;
  const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', required: true, spellcheck: 'false' });
  const err = h('div');
  const form = h('form', { class: 'card signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'Sign in to termd'),
    h('p', { class: 'muted' }, 'Paste the gateway token (after ', h('code', {}, 'make run'), ': the contents of ', h('code', {}, '.run/gateway.token'), '). It is kept in this tab only.'),
    message ? errorBox(message) : null,
    h('label', { for: 'token' }, 'Token'),
    input,
    err,
    h('div', { class: 'row' }, h('button', { type: 'submit', class: 'primary' }, 'Sign in')));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const t = input.value.trim();
    clear(err);
    try {
      status = await rest.status(t);
    } catch (ex) {
      clear(err, errorBox(ex.status === 401 ? 'That token was not accepted.' : ex));
      input.focus();
      return;
    }
    setToken(t);
    start();
  });
  clear(main, form);
  input.focus();
}

async function start() {
  if (!token()) { signInView(); return; }
  if (!status) {
    try {
      status = await rest.status();
    } catch (e) {
      if (e.status === 401) return;
      clear(main, h('h1', {}, 'termd is not answering'), errorBox(e), h('button', { type: 'button', onclick: () => start() }, 'Try again'));
      return;
    }
  }
  document.getElementById('nav').hidden = false;
  document.getElementById('who').hidden = false;
  await refreshHosts();
  // A daemon that does not confine every execution fully says so on every page.
  const sb = (status.capabilities || []).find((c) => c.name === 'sandbox');
  const warn = document.getElementById('sandbox-warning');
  warn.hidden = !sb || sb.available;
  warn.textContent = sb && !sb.available ? 'Sandbox: ' + sb.detail : '';
  const c = status.caller || {};
  document.getElementById('identity').textContent = (c.name || 'unknown') + ' · ' + short(c.role, 'ROLE_').toLowerCase();
  if (!events) {
    events = new Events(setLive, rest.events);
    events.on(onEvent);
  }
  events.start();
  refreshApprovalCount();
  route();
}

setUnauthorizedHandler(() => {
  clearToken();
  status = null;
  if (events) { events.stop(); events = null; }
  signInView('Your token is no longer accepted; sign in again.');
});

document.getElementById('host-select').addEventListener('change', (e) => {
  selectHost(e.target.value);
  // The page's address names no host: it is now the selected one's.
  history.replaceState(null, '', location.pathname);
  route();
});

document.getElementById('signout').addEventListener('click', () => {
  clearToken();
  status = null;
  if (events) { events.stop(); events = null; }
  if (cleanup) { cleanup(); cleanup = null; }
  signInView();
});

start();
