// endpoints.js: every REST route the console calls, in one place (method,
// path, body), over api.js. Views call these; none builds a /v1 path itself.
import { api, stream } from './api.js';

const id = encodeURIComponent;

// query renders {k: v} as ?k=v&… (skipping undefined and empty values).
function query(q = {}) {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    if (v !== undefined && v !== '' && v !== false) s.set(k, String(v));
  }
  const t = s.toString();
  return t ? '?' + t : '';
}

export const PREFIX = '/v1/';

// The host the per-host routes go to: '' is the gateway's default host
// (the unprefixed routes); a name sends them to /v1/hosts/NAME/ (a gateway
// serving several termd daemons, docs/ARCHITECTURE.md, Fleet).
let current = '';
export function setHost(name) { current = name || ''; }
export function host() { return current; }
const P = (name = current) => (name ? '/v1/hosts/' + encodeURIComponent(name) + '/' : '/v1/');

export const status = (tok) => api('GET', P() + 'status', undefined, tok);

// The fleet: its hosts with their state, the approval queue of every host
// (each plan with its host) and the merged event stream.
export const fleet = {
  hosts: (tok) => api('GET', '/v1/hosts', undefined, tok),
  plans: (hostName) => api('GET', '/v1/fleet/plans' + query({ host: hostName, limit: 200 })),
};

export const plans = {
  list: (q) => api('GET', P() + 'plans' + query(q)),
  awaitingApproval: () => plans.list({ states: 'PLAN_STATE_AWAITING_APPROVAL', limit: 200 }),
  get: (pid) => api('GET', P() + 'plans/' + id(pid)),
  create: (request) => api('POST', P() + 'plans', { request }),
  // grant (optional): {scope, pattern, ttl_seconds} remembers the approval.
  // hostName (optional): the host that owns the plan (the fleet queue's plans).
  approve: (pid, request_hash, grant, hostName) => api('POST', P(hostName) + 'plans/' + id(pid) + ':approve', grant ? { request_hash, grant } : { request_hash }),
  deny: (pid, reason, hostName) => api('POST', P(hostName) + 'plans/' + id(pid) + ':deny', { reason }),
  execute: (pid, hostName) => api('POST', P(hostName) + 'plans/' + id(pid) + ':execute', {}),
  replan: (pid) => api('POST', P() + 'plans/' + id(pid) + ':replan', {}),
};

export const sessions = {
  list: (includeClosed) => api('GET', P() + 'sessions' + query({ include_closed: includeClosed })),
  get: (sid) => api('GET', P() + 'sessions/' + id(sid)),
  close: (sid) => api('POST', P() + 'sessions/' + id(sid) + ':close', {}),
};

export const executions = {
  get: (eid) => api('GET', P() + 'executions/' + id(eid)),
  output: (eid, streamName, offset) => api('GET', P() + 'executions/' + id(eid) + '/output' + query({ stream: streamName, offset })),
  pause: (eid) => api('POST', P() + 'executions/' + id(eid) + ':pause', {}),
  resume: (eid) => api('POST', P() + 'executions/' + id(eid) + ':resume', {}),
  cancel: (eid) => api('POST', P() + 'executions/' + id(eid) + ':cancel', {}),
};

// A PTY execution's terminal: type (whoever holds the input), read the
// rendered screen, take the input over (operators) and hand it back, watch it live (SSE).
export const terminals = {
  send: (eid, inputs, wait) => api('POST', P() + 'executions/' + id(eid) + ':send', wait ? { inputs, wait } : { inputs }),
  screen: (eid) => api('GET', P() + 'executions/' + id(eid) + '/screen'),
  takeInput: (eid) => api('POST', P() + 'executions/' + id(eid) + ':take-input', {}),
  releaseInput: (eid) => api('POST', P() + 'executions/' + id(eid) + ':release-input', {}),
  streamURL: (eid, ticket, since) => P() + 'executions/' + id(eid) + '/terminal/stream' + query({ ticket, since_offset: since >= 0 ? since : undefined }),
};

export const receipts = {
  list: (q) => api('GET', P() + 'receipts' + query(q)),
  // q: {query, session_id, status, principal, limit, page_token}; the phrase is literal text.
  search: (q) => api('GET', P() + 'receipts:search' + query(q)),
  get: (rid) => api('GET', P() + 'receipts/' + id(rid)),
  verify: (receipt_json) => api('POST', P() + 'receipts:verify', { receipt_json }),
  publicKey: () => api('GET', P() + 'receipts:publicKey'),
  shareExport: (rid) => api('GET', P() + 'receipts/' + id(rid) + ':export?share=true'),
};

// Port forwards into workspace loopbacks: opened by termctl port-forward (the
// forward lasts while its call does); listed and closed here.
export const forwards = {
  list: () => api('GET', P() + 'port-forwards'),
  close: (fid) => api('POST', P() + 'port-forwards/' + id(fid) + ':close', {}),
};

export const grants = {
  list: (all) => api('GET', P() + 'grants' + query({ all })),
  revoke: (gid) => api('POST', P() + 'grants/' + id(gid) + ':revoke', {}),
};

export const policy = {
  check: (request) => api('POST', P() + 'policy:check', { request }),
};

export const recipes = {
  list: () => api('GET', P() + 'recipes'),
  get: (name) => api('GET', P() + 'recipes/' + id(name)),
  validate: (name, dir) => api('POST', P() + 'recipes:validate', { name, dir }),
  run: (name, dir) => api('POST', P() + 'recipes:run', { name, dir }),
};

export const advise = (body, onMessage) => stream(P() + 'advise', body, onMessage);

// The event stream authenticates with a one-time ticket (EventSource cannot
// send the bearer header). It is the fleet's merged stream: every host's
// events, each with its host; since is the position of every host
// (HOST=EPOCH.SEQ,…, the last id seen).
export const events = {
  ticket: () => api('POST', '/v1/sse-ticket', {}),
  url: (ticket, since) => '/v1/fleet/events' + query({ ticket, since: since || undefined }),
};
