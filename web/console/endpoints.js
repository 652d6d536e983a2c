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

export const status = (tok) => api('GET', '/v1/status', undefined, tok);

export const plans = {
  list: (q) => api('GET', '/v1/plans' + query(q)),
  awaitingApproval: () => plans.list({ states: 'PLAN_STATE_AWAITING_APPROVAL', limit: 200 }),
  get: (pid) => api('GET', '/v1/plans/' + id(pid)),
  create: (request) => api('POST', '/v1/plans', { request }),
  // grant (optional): {scope, pattern, ttl_seconds} remembers the approval.
  approve: (pid, request_hash, grant) => api('POST', '/v1/plans/' + id(pid) + ':approve', grant ? { request_hash, grant } : { request_hash }),
  deny: (pid, reason) => api('POST', '/v1/plans/' + id(pid) + ':deny', { reason }),
  execute: (pid) => api('POST', '/v1/plans/' + id(pid) + ':execute', {}),
  replan: (pid) => api('POST', '/v1/plans/' + id(pid) + ':replan', {}),
};

export const sessions = {
  list: (includeClosed) => api('GET', '/v1/sessions' + query({ include_closed: includeClosed })),
  get: (sid) => api('GET', '/v1/sessions/' + id(sid)),
  close: (sid) => api('POST', '/v1/sessions/' + id(sid) + ':close', {}),
};

export const executions = {
  get: (eid) => api('GET', '/v1/executions/' + id(eid)),
  output: (eid, streamName, offset) => api('GET', '/v1/executions/' + id(eid) + '/output' + query({ stream: streamName, offset })),
  pause: (eid) => api('POST', '/v1/executions/' + id(eid) + ':pause', {}),
  resume: (eid) => api('POST', '/v1/executions/' + id(eid) + ':resume', {}),
  cancel: (eid) => api('POST', '/v1/executions/' + id(eid) + ':cancel', {}),
};

// A PTY execution's terminal: type (whoever holds the input), read the
// rendered screen, take the input over (operators) and hand it back, watch it live (SSE).
export const terminals = {
  send: (eid, inputs, wait) => api('POST', '/v1/executions/' + id(eid) + ':send', wait ? { inputs, wait } : { inputs }),
  screen: (eid) => api('GET', '/v1/executions/' + id(eid) + '/screen'),
  takeInput: (eid) => api('POST', '/v1/executions/' + id(eid) + ':take-input', {}),
  releaseInput: (eid) => api('POST', '/v1/executions/' + id(eid) + ':release-input', {}),
  streamURL: (eid, ticket, since) => '/v1/executions/' + id(eid) + '/terminal/stream' + query({ ticket, since_offset: since >= 0 ? since : undefined }),
};

export const receipts = {
  list: (q) => api('GET', '/v1/receipts' + query(q)),
  // q: {query, session_id, status, principal, limit, page_token}; the phrase is literal text.
  search: (q) => api('GET', '/v1/receipts:search' + query(q)),
  get: (rid) => api('GET', '/v1/receipts/' + id(rid)),
  verify: (receipt_json) => api('POST', '/v1/receipts:verify', { receipt_json }),
  publicKey: () => api('GET', '/v1/receipts:publicKey'),
  shareExport: (rid) => api('GET', '/v1/receipts/' + id(rid) + ':export?share=true'),
};

// Port forwards into workspace loopbacks: opened by termctl port-forward (the
// forward lasts while its call does); listed and closed here.
export const forwards = {
  list: () => api('GET', '/v1/port-forwards'),
  close: (fid) => api('POST', '/v1/port-forwards/' + id(fid) + ':close', {}),
};

export const grants = {
  list: (all) => api('GET', '/v1/grants' + query({ all })),
  revoke: (gid) => api('POST', '/v1/grants/' + id(gid) + ':revoke', {}),
};

export const policy = {
  check: (request) => api('POST', '/v1/policy:check', { request }),
};

export const recipes = {
  list: () => api('GET', '/v1/recipes'),
  get: (name) => api('GET', '/v1/recipes/' + id(name)),
  validate: (name, dir) => api('POST', '/v1/recipes:validate', { name, dir }),
  run: (name, dir) => api('POST', '/v1/recipes:run', { name, dir }),
};

export const advise = (body, onMessage) => stream('/v1/advise', body, onMessage);

// The event stream authenticates with a one-time ticket (EventSource cannot
// send the bearer header).
export const events = {
  ticket: () => api('POST', '/v1/sse-ticket', {}),
  url: (ticket, since) => '/v1/events' + query({ ticket, since: since || undefined }),
};
