// api.js: the console's only way to the gateway. The bearer token lives in
// sessionStorage (gone when the tab closes) and is sent in a header, never in
// a URL; the event stream authenticates with a one-time ticket instead.

const TOKEN_KEY = 'termd.token';
// The merged stream's last id: every host's position (HOST=EPOCH.SEQ,…).
const SEQ_KEY = 'termd.fleetEventId';

export class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
export function setToken(t) { sessionStorage.setItem(TOKEN_KEY, t); }
export function clearToken() { sessionStorage.removeItem(TOKEN_KEY); sessionStorage.removeItem(SEQ_KEY); }

let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

async function request(method, path, body, tok) {
  const headers = { Authorization: 'Bearer ' + (tok ?? token()) };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
  } catch (e) {
    throw new APIError(0, 'The gateway is not reachable: ' + e.message);
  }
  return res;
}

async function errorOf(res) {
  const text = await res.text();
  let msg = text;
  try { const j = JSON.parse(text); msg = j.message || j.error?.message || text; } catch { /* not JSON */ }
  if (res.status === 429) msg = 'Too many requests; retry in ' + (res.headers.get('Retry-After') || 'a few') + ' s. ' + msg;
  return new APIError(res.status, msg || res.statusText);
}

// api calls one REST route and returns its JSON.
export async function api(method, path, body, tok) {
  const res = await request(method, path, body, tok);
  if (!res.ok) {
    const err = await errorOf(res);
    if (res.status === 401 && tok === undefined) onUnauthorized(err);
    throw err;
  }
  const text = await res.text();
  return text ? JSON.parse(text) : {};
}

// stream calls a server-streaming route and hands each message to onMessage.
export async function stream(path, body, onMessage) {
  const res = await request('POST', path, body);
  if (!res.ok) throw await errorOf(res);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (!line) continue;
      const msg = JSON.parse(line);
      if (msg.error) throw new APIError(msg.error.code || 500, msg.error.message);
      onMessage(msg.result);
    }
  }
}

export const KINDS = [
  'EVENT_KIND_SESSION_CREATED', 'EVENT_KIND_PLAN_CREATED', 'EVENT_KIND_AWAITING_APPROVAL', 'EVENT_KIND_APPROVED',
  'EVENT_KIND_DENIED', 'EVENT_KIND_PLAN_EXPIRED', 'EVENT_KIND_EXECUTION_STARTED', 'EVENT_KIND_OUTPUT',
  'EVENT_KIND_PAUSED', 'EVENT_KIND_RESUMED', 'EVENT_KIND_FINISHED', 'EVENT_KIND_RECEIPT_SIGNED',
  'EVENT_KIND_SESSION_CLOSED', 'EVENT_KIND_LAGGED', 'EVENT_KIND_PORT_FORWARD', 'EVENT_KIND_EGRESS_REFUSED',
];

// Events keeps one EventSource on everything the token may see on every
// host (the fleet's merged stream; each event has its host). On any error it
// closes the source (its ticket is spent) and reconnects with a new ticket,
// resuming every host after the last event id it saw. A host going up or
// down arrives as {kind: 'HOST', name, state, error, …}. routes are the
// ticket call and the stream URL (endpoints.js: events).
export class Events {
  constructor(onStatus, routes) {
    this.routes = routes;
    this.listeners = new Set();
    this.onStatus = onStatus;
    this.last = sessionStorage.getItem(SEQ_KEY) || '';
    this.es = null;
    this.stopped = false;
    this.retry = 500;
  }
  on(fn) { this.listeners.add(fn); return () => this.listeners.delete(fn); }
  async start() {
    this.stopped = false;
    if (this.es) return;
    this.onStatus(false, 'connecting…');
    let ticket;
    try {
      ({ ticket } = await this.routes.ticket());
    } catch (e) {
      this.onStatus(false, 'events offline');
      this.later();
      return;
    }
    if (this.stopped) return;
    const es = new EventSource(this.routes.url(ticket, this.last));
    this.es = es;
    es.onopen = () => { this.retry = 500; this.onStatus(true, 'live'); };
    es.onerror = () => {
      es.close();
      if (this.es === es) this.es = null;
      this.onStatus(false, 'reconnecting…');
      this.later();
    };
    const handle = (e) => {
      if (e.lastEventId) { this.last = e.lastEventId; sessionStorage.setItem(SEQ_KEY, e.lastEventId); }
      let ev;
      try { ev = JSON.parse(e.data); } catch { return; }
      if (e.type === 'host') ev = { ...ev, kind: 'HOST', host: ev.name };
      for (const fn of this.listeners) {
        try { fn(ev); } catch (err) { console.error(err); }
      }
    };
    for (const k of KINDS) es.addEventListener(k, handle);
    es.addEventListener('host', handle);
    es.addEventListener('stream-error', (e) => {
      let msg = 'event stream failed';
      try { msg = JSON.parse(e.data).message; } catch { /* keep default */ }
      this.onStatus(false, msg);
    });
  }
  later() {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.start(), this.retry);
    this.retry = Math.min(this.retry * 2, 10000);
  }
  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.es) { this.es.close(); this.es = null; }
  }
}
