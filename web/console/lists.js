// lists.js: the approval queue, plan, session and receipt listings, and a
// receipt's page with verification, raw JSON, download and share export.
import * as rest from './endpoints.js';
import { h, clear, short, words, badge, kv, errorBox, empty, argvText, when, download, exitText, sandboxText } from './dom.js';
import { modeText, egressSection } from './network.js';

function planRow(p) {
  const st = short(p.state, 'PLAN_STATE_');
  const d = p.decision || {};
  return h('tr', {},
    h('td', {}, h('a', { href: '/plans/' + encodeURIComponent(p.id) }, h('code', {}, argvText(d.argv && d.argv.length ? d.argv : p.request?.argv) || p.request?.command || p.id))),
    h('td', {}, badge(words(st), 'st-' + st)),
    h('td', {}, badge(words(short(d.risk, 'RISK_')), 'risk-' + short(d.risk, 'RISK_'))),
    h('td', {}, p.requester?.name || ''),
    h('td', {}, when(p.created_at)));
}

function planTable(plans) {
  return h('table', {}, h('thead', {}, h('tr', {}, ['Command', 'State', 'Risk', 'Requested by', 'Created'].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, plans.map(planRow)));
}

// affectsApprovals: events after which the approval queue may differ (a
// closed session drops its plans; after a lag anything may have changed; a
// host that went down or came back takes its plans away or brings them).
export const affectsApprovals = (ev) => /AWAITING_APPROVAL|APPROVED|DENIED|EXPIRED|PLAN_CREATED|SESSION_CLOSED|LAGGED|HOST/.test(ev.kind || '');

// live re-runs load when an event matches, debounced.
function live(ctx, match, load) {
  let t = null;
  const off = ctx.on((ev) => { if (match(ev)) { clearTimeout(t); t = setTimeout(load, 150); } });
  return () => { off(); clearTimeout(t); };
}

export function approvalsView(main, ctx) {
  const list = h('div', { id: 'approval-queue', 'aria-live': 'polite' }, empty('Loading…'));
  const done = h('div', { id: 'approved' });
  const unreachable = h('div', { id: 'hosts-unreachable' });
  // Every host's queue in one (GET /v1/fleet/plans); the filter shows one host's.
  const filter = h('select', { id: 'host-filter', onchange: () => load() },
    h('option', { value: '' }, 'All hosts'), ctx.hosts.map((x) => h('option', { value: x.name }, x.name)));
  main.append(h('h1', {}, 'Approval queue'),
    h('p', { class: 'muted' }, 'Plans waiting for a person' + (ctx.multiHost ? ' on every host' : '') + '. This list updates as plans arrive.'),
    ctx.multiHost ? h('div', { class: 'row' }, h('label', { for: 'host-filter' }, 'Host'), filter) : null,
    unreachable, done, list);
  async function load() {
    try {
      const r = await rest.fleet.plans(filter.value);
      const plans = r.plans || [];
      clear(unreachable, (r.hosts || []).filter((x) => x.error).map((x) => h('div', { class: 'banner host-unreachable', role: 'status', dataset: { host: x.name } },
        'Host ', h('strong', {}, x.name), ' did not answer: ' + x.error + '. Its plans are not shown; the other hosts\' are.')));
      if (!plans.length) { clear(list, empty('Nothing is waiting for approval.')); return; }
      clear(list, plans.map((p) => queueItem(p)));
    } catch (e) {
      clear(list, errorBox(e));
    }
  }
  function queueItem(p) {
    const d = p.decision || {};
    const err = h('div');
    const reason = h('input', { type: 'text', id: 'reason-' + p.id, placeholder: 'reason for denying' });
    const act = (label, fn, cls) => h('button', { type: 'button', class: cls, onclick: async (e) => {
      e.target.disabled = true;
      try { await fn(); load(); } catch (ex) { clear(err, errorBox(ex)); e.target.disabled = false; }
    } }, label);
    const href = ctx.hostHref('/plans/' + encodeURIComponent(p.id), p.host);
    return h('article', { class: 'card queue-item', 'aria-label': 'Plan ' + p.id, dataset: { plan: p.id, host: p.host || '' } },
      h('h2', {}, h('a', { href }, h('code', {}, argvText(d.argv) || p.request?.command))),
      h('div', { class: 'row' }, ctx.multiHost ? badge('host ' + p.host, 'host') : null, badge('risk ' + words(short(d.risk, 'RISK_')), 'risk-' + short(d.risk, 'RISK_')),
        h('span', { class: 'muted' }, 'by ' + (p.requester?.name || 'unknown') + ' · ' + when(p.created_at) + ' · expires ' + when(p.expires_at))),
      (d.reasons || []).length ? h('ul', { class: 'reasons' }, d.reasons.map((r) => h('li', {}, r))) : null,
      kv([['Directory', d.cwd], ['Writes', (p.preview?.writes || []).join(', ')], ['Network', p.preview?.network ? 'yes' : ''],
        ['Network mode', modeText(d.sandbox?.network_mode)],
        ['Sandbox', sandboxText(d.sandbox)],
        ['Request hash', h('code', { class: 'hash' }, d.request_hash)]]),
      ctx.canApprove ? rememberControls(p) : null,
      ctx.canApprove ? h('div', { class: 'row' },
        // To the host that owns the plan, bound to the hash shown above.
        act('Approve', async () => {
          await rest.plans.approve(p.id, d.request_hash, grantOf(p), p.host);
          approvedNotice(p);
        }, 'primary'),
        h('label', { class: 'hint', for: 'reason-' + p.id }, 'Deny reason'), reason,
        act('Deny', () => rest.plans.deny(p.id, reason.value || 'denied in the console', p.host), 'danger'),
        h('a', { href }, 'Details')) : h('p', { class: 'hint' }, 'Only an operator can approve.'),
      err);
  }
  // rememberControls: the approval's scope. A pattern is the command with
  // <any> for each operand that may vary (docs/POLICY.md, Grants).
  const remember = new Map();
  function rememberControls(p) {
    const scope = h('select', { id: 'scope-' + p.id, 'aria-label': 'Remember this approval' },
      [['', 'This plan once'], ['GRANT_SCOPE_SESSION_REQUEST', 'This exact request, for the session'],
        ['GRANT_SCOPE_SESSION_PATTERN', 'A pattern, for the session'],
        ['GRANT_SCOPE_WORKSPACE_REQUEST', 'This exact request, in this workspace from any session (8 h by default; survives an agent restart)'],
        ['GRANT_SCOPE_WORKSPACE_PATTERN', 'A pattern, in this workspace (7 days)']]
        .map(([v, t]) => h('option', { value: v }, t)));
    const pattern = h('input', { type: 'text', id: 'pattern-' + p.id, class: 'pattern', value: argvText(p.decision?.argv) || '', hidden: true,
      'aria-label': 'Pattern: the command with <any> for each operand that may vary' });
    scope.onchange = () => { pattern.hidden = !/PATTERN/.test(scope.value); };
    remember.set(p.id, { scope, pattern });
    return h('div', { class: 'row' }, h('label', { for: 'scope-' + p.id, class: 'hint' }, 'Remember'), scope, pattern);
  }
  function grantOf(p) {
    const r = remember.get(p.id);
    if (!r || !r.scope.value) return undefined;
    return /PATTERN/.test(r.scope.value) ? { scope: r.scope.value, pattern: r.pattern.value } : { scope: r.scope.value };
  }
  // Approving does not run a plan: say so, and offer to run it.
  function approvedNotice(p) {
    const url = ctx.hostHref('/plans/' + encodeURIComponent(p.id), p.host);
    const note = h('div', { class: 'card notice', role: 'status' },
      h('p', {}, '✔ Approved ', h('code', {}, argvText(p.decision?.argv) || p.request?.command), '. Approval does not run it: its requester runs it (an agent through termd-mcp), or you run it now.'),
      h('div', { class: 'row' },
        h('button', { type: 'button', class: 'primary', onclick: async (e) => {
          e.target.disabled = true;
          try {
            await rest.plans.execute(p.id, p.host);
            location.assign(url);
          } catch (ex) { note.append(errorBox(ex)); e.target.disabled = false; }
        } }, 'Run it now'),
        h('a', { href: url }, 'Open the plan')));
    done.prepend(note);
  }
  load();
  return live(ctx, affectsApprovals, load);
}

// hostsView lists the termd hosts the gateway serves, up or down (with the
// error and since when), live: a host going up or down updates it.
export function hostsView(main, ctx) {
  const list = h('div', { id: 'hosts' }, empty('Loading…'));
  main.append(h('h1', {}, 'Hosts'),
    h('p', { class: 'muted' }, 'The termd daemons this gateway serves. Each keeps its own plans and receipts; the host selector at the top picks whose pages you see. A host that is down is retried; its events resume where they stopped when it is back.'), list);
  async function load() {
    try {
      const hs = await ctx.refreshHosts();
      clear(list, h('div', { class: 'card' }, h('table', {},
        h('thead', {}, h('tr', {}, ['Host', 'State', 'Since', 'Address', 'Version or error'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, hs.map((x) => h('tr', { dataset: { host: x.name, state: x.state } },
          h('td', {}, h('strong', {}, x.name), x.default ? h('span', { class: 'muted' }, ' (default)') : null),
          h('td', {}, badge(x.state, x.state === 'up' ? 'st-SUCCEEDED' : 'st-FAILED')),
          h('td', {}, when(x.since)),
          h('td', {}, h('code', {}, x.address), ' · ', x.transport),
          h('td', {}, x.state === 'up' ? x.version || '' : h('span', { class: 'host-error' }, x.error || ''))))))));
    } catch (e) {
      clear(list, errorBox(e));
    }
  }
  load();
  const every = setInterval(load, 5000);
  const off = live(ctx, (ev) => ev.kind === 'HOST', load);
  return () => { clearInterval(every); off(); };
}

// grantsView lists remembered approvals; operators revoke them here.
export function grantsView(main, ctx) {
  const list = h('div', { id: 'grants' }, empty('Loading…'));
  const all = h('input', { type: 'checkbox', id: 'include-ended', onchange: () => load() });
  main.append(h('h1', {}, 'Grants'),
    h('p', { class: 'muted' }, 'Approvals an operator chose to remember. A plan the policy would ask about runs without asking when an active grant covers it; its receipt names the grant.'),
    h('label', { class: 'check', for: 'include-ended' }, all, 'Include revoked, expired and lapsed grants'), list);
  const scopeText = { GRANT_SCOPE_SESSION_REQUEST: 'exact request', GRANT_SCOPE_SESSION_PATTERN: 'session pattern', GRANT_SCOPE_WORKSPACE_PATTERN: 'workspace pattern', GRANT_SCOPE_WORKSPACE_REQUEST: 'workspace request' };
  async function load() {
    try {
      const r = await rest.grants.list(all.checked);
      const gs = r.grants || [];
      if (!gs.length) { clear(list, empty('No grants. Choose “Remember” when approving a plan to make one.')); return; }
      clear(list, h('div', { class: 'card' }, h('table', {},
        h('thead', {}, h('tr', {}, ['Grant', 'Status', 'Scope', 'Covers', 'For', 'By', 'Expires', 'Uses', ''].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, gs.map((g) => h('tr', { dataset: { grant: g.id } },
          h('td', {}, h('code', {}, g.id)), h('td', {}, g.status), h('td', {}, scopeText[g.scope] || g.scope),
          h('td', {}, h('code', {}, g.pattern || 'request ' + String(g.request_hash || '').slice(0, 16))),
          h('td', {}, g.principal?.name || ''), h('td', {}, g.created_by?.name || ''), h('td', {}, when(g.expires_at)), h('td', {}, String(g.uses || 0)),
          h('td', {}, ctx.canApprove && g.status === 'active' ? h('button', { type: 'button', class: 'danger', onclick: async (e) => {
            e.target.disabled = true;
            try { await rest.grants.revoke(g.id); load(); } catch (ex) { list.prepend(errorBox(ex)); e.target.disabled = false; }
          } }, 'Revoke') : null)))))));
    } catch (e) { clear(list, errorBox(e)); }
  }
  load();
  return live(ctx, (ev) => !!ev.plan, load);
}

export function plansView(main, ctx) {
  const list = h('div', {}, empty('Loading…'));
  main.append(h('h1', {}, 'Plans'), list);
  async function load() {
    try {
      const r = await rest.plans.list({ limit: 100 });
      const plans = r.plans || [];
      clear(list, plans.length ? h('div', { class: 'card' }, planTable(plans)) : empty('No plans yet. Start one from New plan.'));
    } catch (e) { clear(list, errorBox(e)); }
  }
  load();
  return live(ctx, (ev) => !!ev.plan, load);
}

export function sessionsView(main, ctx) {
  const list = h('div', {}, empty('Loading…'));
  const closed = h('input', { type: 'checkbox', id: 'include-closed', onchange: () => load() });
  main.append(h('h1', {}, 'Sessions'), h('label', { class: 'check', for: 'include-closed' }, closed, 'Include closed sessions'), list);
  async function load() {
    try {
      const r = await rest.sessions.list(closed.checked);
      const ss = r.sessions || [];
      if (!ss.length) { clear(list, empty('No sessions.')); return; }
      clear(list, h('div', { class: 'card' }, h('table', {},
        h('thead', {}, h('tr', {}, ['Session', 'Owner', 'Label', 'Plans', 'Last active', 'State'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, ss.map((s) => h('tr', {},
          h('td', {}, h('a', { href: '/sessions/' + encodeURIComponent(s.id) }, h('code', {}, s.id))),
          h('td', {}, s.owner?.name || ''), h('td', {}, s.label || ''), h('td', {}, String(s.plan_count || 0)),
          h('td', {}, when(s.last_active_at)), h('td', {}, s.closed ? 'closed' : (s.active_execution_id ? 'running' : 'open'))))))));
    } catch (e) { clear(list, errorBox(e)); }
  }
  load();
  return live(ctx, (ev) => /SESSION/.test(ev.kind || ''), load);
}

export function sessionView(main, ctx, id) {
  const info = h('div', { class: 'card' }, empty('Loading…'));
  const plans = h('div');
  main.append(h('h1', {}, 'Session ', h('code', {}, id)), info, h('h2', {}, 'Plans'), plans);
  async function load() {
    try {
      const { session: s } = await rest.sessions.get(id);
      clear(info, kv([['Owner', s.owner?.name], ['Label', s.label], ['Created', when(s.created_at)], ['Last active', when(s.last_active_at)],
        ['Expires', when(s.expires_at)], ['State', s.closed ? 'closed' : 'open']]),
      !s.closed && ctx.canRun ? h('div', { class: 'row' }, h('button', { type: 'button', class: 'danger', onclick: async () => {
        try { await rest.sessions.close(id); load(); } catch (e) { ctx.flash(e); }
      } }, 'Close session')) : null);
      const r = await rest.plans.list({ session_id: id, limit: 200 });
      clear(plans, (r.plans || []).length ? h('div', { class: 'card' }, planTable(r.plans)) : empty('No plans in this session.'));
    } catch (e) { clear(info, errorBox(e)); }
  }
  load();
  return live(ctx, (ev) => ev.session_id === id, load);
}

export function receiptsView(main, ctx) {
  const list = h('div', {}, empty('Loading…'));
  const phrase = h('input', { type: 'search', id: 'receipt-search', name: 'q', placeholder: 'a phrase from a command, a reason or the output', autocomplete: 'off' });
  // The phrase is literal text: quotes, OR, * and - are searched for as written.
  const search = h('form', { class: 'row', role: 'search', 'aria-label': 'Search receipts' },
    h('label', { for: 'receipt-search' }, 'Search receipts'), phrase, h('button', { type: 'submit' }, 'Search'));
  let searching = '';
  search.addEventListener('submit', (e) => {
    e.preventDefault();
    searching = phrase.value.trim() ? phrase.value : '';
    load();
  });
  main.append(h('h1', {}, 'Receipts'), h('p', { class: 'muted' }, 'Every plan that ended (ran, was blocked or denied, or expired) has a signed receipt.'), search, list);
  async function load() {
    if (searching) return showHits(list, searching);
    try {
      const r = await rest.receipts.list({ limit: 100 });
      const rs = r.receipts || [];
      if (!rs.length) { clear(list, empty('No receipts yet: they appear when a command finishes.')); return; }
      clear(list, h('div', { class: 'card' }, h('table', {},
        h('thead', {}, h('tr', {}, ['Seq', 'Command', 'Status', 'Exit', 'Requester', 'Approver', 'Finished'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, rs.map((x) => h('tr', { class: 'rc-' + x.status },
          h('td', {}, String(x.seq)),
          h('td', {}, h('a', { href: '/receipts/' + encodeURIComponent(x.id) }, h('code', {}, x.command || x.id))),
          h('td', {}, h('span', { class: 'badge st-' + String(x.status || '').toUpperCase() }, x.status)), h('td', {}, exitText(x.exit_code)), h('td', {}, x.requester || ''), h('td', {}, x.approver || ''),
          h('td', {}, when(x.finished_at))))))));
    } catch (e) { clear(list, errorBox(e)); }
  }
  load();
  return live(ctx, (ev) => ev.kind === 'EVENT_KIND_RECEIPT_SIGNED', load);
}

// showHits lists the receipts a phrase occurs in, newest first, a page at
// a time; each opens the receipt. Snippets are the receipts' redacted text.
async function showHits(list, q) {
  const rows = h('tbody', {});
  const more = h('div', { class: 'row' });
  const table = h('table', { id: 'search-hits' },
    h('thead', {}, h('tr', {}, ['Seq', 'Command', 'Status', 'Found in', 'Snippet', 'Started'].map((t) => h('th', { scope: 'col' }, t)))), rows);
  async function page(token) {
    try {
      const r = await rest.receipts.search({ query: q, limit: 50, page_token: token });
      const hits = r.hits || [];
      if (!token && !hits.length) { clear(list, empty('No receipts you may see contain “' + q + '”.')); return; }
      if (!token) clear(list, h('div', { class: 'card' }, r.incomplete ? h('p', { class: 'hint' }, 'The search index is still catching up: newer receipts may be missing.') : null, table, more));
      for (const x of hits) {
        const rc = x.receipt || {};
        rows.append(h('tr', { class: 'rc-' + rc.status },
          h('td', {}, String(rc.seq)),
          h('td', {}, h('a', { href: '/receipts/' + encodeURIComponent(rc.id) }, h('code', {}, rc.command || rc.id))),
          h('td', {}, h('span', { class: 'badge st-' + String(rc.status || '').toUpperCase() }, rc.status)),
          h('td', {}, x.field || ''), h('td', {}, h('code', { class: 'snippet' }, x.snippet || '')), h('td', {}, when(rc.started_at))));
      }
      clear(more, r.next_page_token ? h('button', { type: 'button', onclick: () => page(r.next_page_token) }, 'More results') : null);
    } catch (e) { clear(list, errorBox(e)); }
  }
  await page('');
}

export function receiptView(main, ctx, id) {
  const top = h('div', {}, empty('Loading…'));
  main.append(h('h1', {}, 'Receipt ', h('code', {}, id)), top);
  (async () => {
    try {
      const r = await rest.receipts.get(id);
      const v = await rest.receipts.verify(r.receipt_json);
      const s = r.summary || {};
      let pretty = r.receipt_json;
      let rc = null;
      try { rc = JSON.parse(r.receipt_json); pretty = JSON.stringify(rc, null, 2); } catch { /* show as is */ }
      const netMode = rc?.sandbox?.network_mode;
      const shareOut = h('div');
      const check = (ok) => (ok ? h('span', { class: 'ok' }, '✔ yes') : h('span', { class: 'bad' }, '✘ no'));
      clear(top,
        h('section', { class: 'card', 'aria-labelledby': 'verify-title' },
          h('h2', { id: 'verify-title' }, 'Verification'),
          h('p', { id: 'receipt-verdict', class: v.valid ? 'ok' : 'bad' }, v.valid ? '✔ Receipt verified' : '✘ Receipt does not verify'),
          kv([['Schema', check(v.schema_ok)], ['Ed25519 signature', check(v.ed25519_ok)], ['HMAC', check(v.hmac_ok)], ['Chain link', check(v.chain_ok)],
            ['Key', v.key_id], ['Problems', (v.problems || []).join('; ')]])),
        h('section', { class: 'card', 'aria-labelledby': 'summary-title' },
          h('h2', { id: 'summary-title' }, 'Summary'),
          kv([['Command', h('code', {}, s.command)], ['Status', s.status], ['Exit code', exitText(s.exit_code)], ['Decision', s.decision],
            ['Plan', s.plan_id ? h('a', { href: '/plans/' + encodeURIComponent(s.plan_id) }, s.plan_id) : ''],
            ['Session', s.session_id ? h('a', { href: '/sessions/' + encodeURIComponent(s.session_id) }, s.session_id) : ''],
            ['Requester', s.requester], ['Approver', s.approver], ['Started', when(s.started_at)], ['Finished', when(s.finished_at)],
            ['Request hash', h('code', { class: 'hash' }, s.request_hash)], ['Seq', String(s.seq ?? '')]]),
          h('div', { class: 'row' },
            h('button', { type: 'button', onclick: () => download('receipt-' + id + '.json', r.receipt_json) }, 'Download JSON'),
            h('button', { type: 'button', id: 'download-public-key', onclick: async () => {
              try {
                const k = await rest.receipts.publicKey();
                download('termd-receipts.pem', (k.keys || []).map((x) => x.pem).join(''), 'application/x-pem-file');
              } catch (e) { clear(shareOut, errorBox(e)); }
            } }, 'Download public key'),
            h('button', { type: 'button', onclick: async () => {
              try {
                const x = await rest.receipts.shareExport(id);
                let p = x.receipt_json;
                try { p = JSON.stringify(JSON.parse(x.receipt_json), null, 2); } catch { /* as is */ }
                clear(shareOut, h('h3', {}, 'Share export'), h('p', { class: 'hint' }, 'Sensitive fields are replaced and the receipt is signed again.'),
                  h('button', { type: 'button', onclick: () => download('receipt-' + id + '-share.json', x.receipt_json) }, 'Download share export'),
                  h('pre', { id: 'share-json' }, p));
              } catch (e) { clear(shareOut, errorBox(e)); }
            } }, 'Share export…')),
          h('p', { class: 'hint' }, 'Verify offline, without termd: ', h('code', {}, 'termctl receipts verify receipt-' + id + '.json --public-key termd-receipts.pem')),
          shareOut),
        netMode || rc?.egress ? h('section', { class: 'card', 'aria-labelledby': 'receipt-network-title' },
          h('h2', { id: 'receipt-network-title' }, 'Network'),
          kv([['Mode', h('span', { id: 'receipt-network-mode' }, modeText(netMode))]]), egressSection(rc)) : null,
        h('section', { class: 'card', 'aria-labelledby': 'raw-title' }, h('h2', { id: 'raw-title' }, 'Raw JSON'), h('pre', { id: 'receipt-json' }, pretty)));
    } catch (e) {
      clear(top, errorBox(e.status === 404 ? 'No receipt ' + id + ' (or you may not see it).' : e));
    }
  })();
}

