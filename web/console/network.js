// network.js: an execution's network in the console: its mode in words, the
// open port forwards (a page of their own and a panel on a plan's page, each
// with an Open link and a Close button), and what an egress execution
// reached or was refused (live while it runs, then from its receipt).
import * as rest from './endpoints.js';
import { h, clear, errorBox, empty, kv, when } from './dom.js';

const MODES = {
  none: 'no network at all',
  'workspace-loopback': 'this principal\'s loopback in this workspace; no route out',
  host: 'the host\'s network',
};

// modeText says a network mode (sandbox.network_mode) in words.
export function modeText(mode) {
  if (!mode) return '';
  if (mode.startsWith('egress:')) return mode + ' — only the allow-list ' + mode.slice(7) + ', through termd\'s proxy';
  return MODES[mode] ? mode + ' — ' + MODES[mode] : mode;
}

export const affectsForwards = (ev) => /PORT_FORWARD|LAGGED/.test(ev.kind || '');

// openURL is the host address of a forward as a link target.
const openURL = (f) => 'http://' + f.local_address + '/';

// forwardsTable lists forwards; withTarget adds the execution and session
// columns (the page of every forward, not one execution's panel).
function forwardsTable(ctx, fs, withTarget, reload) {
  const cols = ['Forward', 'Host address', 'To', withTarget ? 'Execution' : null, withTarget ? 'Session' : null, 'Opened by', 'Since', 'Connections', 'Bytes in / out', ''].filter((c) => c !== null);
  return h('table', { class: 'forwards' },
    h('thead', {}, h('tr', {}, cols.map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, fs.map((f) => {
      const mayClose = ctx.canApprove || (f.opened_by?.name && f.opened_by.name === ctx.me);
      return h('tr', { dataset: { forward: f.id } },
        h('td', {}, h('code', {}, f.id)),
        h('td', {}, h('a', { href: openURL(f), target: '_blank', rel: 'noopener noreferrer', class: 'forward-open' }, 'Open ', h('code', {}, f.local_address))),
        h('td', {}, h('code', {}, '127.0.0.1:' + f.remote_port), h('span', { class: 'hint' }, ' in ' + f.principal + '’s loopback')),
        withTarget ? h('td', {}, f.execution_id ? execLink(f.execution_id) : '') : null,
        withTarget ? h('td', {}, f.session_id ? h('a', { href: '/sessions/' + encodeURIComponent(f.session_id) }, f.session_id) : '') : null,
        h('td', {}, f.opened_by?.name || ''),
        h('td', {}, when(f.opened_at)),
        h('td', {}, String(f.open_connections || 0) + ' open, ' + String(f.connections || 0) + ' in all'),
        h('td', {}, String(f.bytes_in || 0) + ' / ' + String(f.bytes_out || 0)),
        h('td', {}, mayClose ? h('button', { type: 'button', class: 'danger', onclick: async (e) => {
          e.target.disabled = true;
          try { await rest.forwards.close(f.id); } catch (ex) { ctx.flash(ex); e.target.disabled = false; }
          reload();
        } }, 'Close') : null));
    })));
}

// execLink links an execution to its plan's page once its plan is known.
const planOf = new Map();
function execLink(eid) {
  const a = h('a', { href: '#' }, h('code', {}, eid));
  const set = (pid) => { if (pid) a.href = '/plans/' + encodeURIComponent(pid); else a.replaceWith(h('code', {}, eid)); };
  if (planOf.has(eid)) set(planOf.get(eid));
  else {
    rest.executions.get(eid).then((r) => { planOf.set(eid, r.execution?.plan_id || ''); set(planOf.get(eid)); })
      .catch(() => set(''));
  }
  return a;
}

// watchForwards reloads on port-forward events and, while any is open,
// every few seconds (connection and byte counts change without events).
function watchForwards(ctx, load, isOpen) {
  let t = null;
  const off = ctx.on((ev) => { if (affectsForwards(ev)) { clearTimeout(t); t = setTimeout(load, 150); } });
  const poll = setInterval(() => { if (isOpen()) load(); }, 5000);
  return () => { off(); clearTimeout(t); clearInterval(poll); };
}

export function forwardsView(main, ctx) {
  const list = h('div', { id: 'forwards', 'aria-live': 'polite' }, empty('Loading…'));
  main.append(h('h1', {}, 'Port forwards'),
    h('p', { class: 'muted' }, 'Host ports termd carries into a workspace loopback, where a dev server an execution started listens. ',
      'Open one with ', h('code', {}, 'termctl port-forward EXECUTION [LOCAL:]REMOTE'), '; it lasts while that command runs. ',
      'The addresses are on the host where termd runs. ', ctx.canApprove ? 'As an operator you see and may close every forward.' : 'You see the forwards into your own loopbacks.'),
    list);
  let n = 0;
  async function load() {
    try {
      const fs = (await rest.forwards.list()).forwards || [];
      n = fs.length;
      clear(list, fs.length ? h('div', { class: 'card' }, forwardsTable(ctx, fs, true, load)) : empty('No port forwards are open.'));
    } catch (e) { clear(list, errorBox(e)); }
  }
  load();
  return watchForwards(ctx, load, () => n > 0);
}

// networkPanel is the network part of a plan's page: the mode, the
// forwards into its execution, and for an egress execution the refusals
// seen live and, once signed, the receipt's destinations and refusals.
export function networkPanel(ctx) {
  const el = h('section', { class: 'card', 'aria-labelledby': 'network-title', id: 'network', hidden: true });
  const modeEl = h('div');
  let mode = '';
  const fwds = h('div', { id: 'exec-forwards' });
  const liveList = h('ul', { id: 'egress-live', class: 'reasons', 'aria-live': 'polite' });
  const liveBox = h('div', { hidden: true }, h('h3', {}, 'Refused connections, live'), liveList);
  const egress = h('div');
  el.append(h('h2', { id: 'network-title' }, 'Network'), modeEl, liveBox, egress, fwds);
  let exec = null;
  let planID = '';
  let n = 0;
  async function loadForwards() {
    if (!exec) return;
    try {
      const fs = ((await rest.forwards.list()).forwards || []).filter((f) => f.execution_id === exec.id);
      n = fs.length;
      // A server on the workspace loopback is what a forward reaches.
      if (!fs.length && mode !== 'workspace-loopback') { clear(fwds); return; }
      el.hidden = false;
      clear(fwds, h('h3', {}, 'Port forwards'), fs.length ? forwardsTable(ctx, fs, false, loadForwards)
        : h('p', { class: 'hint' }, 'None open. A server this execution listens on is reached from the host with ', h('code', {}, 'termctl port-forward ' + exec.id + ' PORT'), '.'));
    } catch (e) { clear(fwds, errorBox(e)); }
  }
  const stop = watchForwards(ctx, loadForwards, () => n > 0);
  // One line per destination and reason, with how many times so far.
  const seen = new Map();
  const off = ctx.on((ev) => {
    const r = ev.egress_refused;
    if (!r || !(r.plan_id === planID || (exec && r.execution_id === exec.id))) return;
    liveBox.hidden = false;
    el.hidden = false;
    const key = r.host + ':' + r.port + ' ' + r.reason;
    const times = (seen.get(key)?.times || 0) + 1;
    const li = h('li', { dataset: { reason: r.reason } }, h('code', {}, r.host + ':' + r.port), ' refused: ', r.reason, times > 1 ? ' (' + times + ' times)' : '', r.detail ? ' — ' + r.detail : '');
    if (seen.has(key)) seen.get(key).li.replaceWith(li); else liveList.append(li);
    seen.set(key, { times, li });
  });
  return {
    el,
    // plan: the plan (its decided mode); ex: its execution, or null.
    update(plan, ex) {
      planID = plan.id;
      const m = plan.decision?.sandbox?.network_mode;
      if (m && m !== mode) { mode = m; el.hidden = false; clear(modeEl, kv([['Mode', h('span', { id: 'network-mode' }, modeText(m))]])); }
      if (ex && !exec) { exec = ex; loadForwards(); }
    },
    // receipt: the parsed receipt JSON; shows its egress account.
    receipt(rc) {
      const sec = egressSection(rc);
      if (sec) el.hidden = false;
      clear(egress, sec);
    },
    stop() { stop(); off(); },
  };
}

// egressSection renders a receipt's egress member (schema 1.6): every
// destination with its bytes, every refused attempt with its reason.
export function egressSection(rc) {
  const eg = rc && rc.egress;
  if (!eg) return null;
  const dests = eg.destinations || [];
  const refused = eg.refused || [];
  return h('div', { id: 'egress' },
    h('h3', {}, 'Egress through allow-list ', h('code', {}, eg.allow_list || '')),
    dests.length ? h('table', { id: 'egress-destinations' },
      h('thead', {}, h('tr', {}, ['Destination', 'Address', 'Connections', 'Bytes up', 'Bytes down'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, dests.map((d) => h('tr', {},
        h('td', {}, h('code', {}, d.host + ':' + d.port)), h('td', {}, d.address || ''), h('td', {}, String(d.connections ?? '')),
        h('td', {}, String(d.bytes_up ?? 0)), h('td', {}, String(d.bytes_down ?? 0))))))
      : h('p', { class: 'hint' }, 'No destination was reached.'),
    refused.length ? [h('h3', {}, 'Refused'), h('table', { id: 'egress-refused' },
      h('thead', {}, h('tr', {}, ['Destination', 'Reason', 'Times', 'Detail'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, refused.map((r) => h('tr', {},
        h('td', {}, h('code', {}, r.host + ':' + r.port)), h('td', {}, r.reason), h('td', {}, String(r.count ?? 1)), h('td', {}, r.detail || '')))))] : null,
    eg.dropped ? h('p', { class: 'hint' }, String(eg.dropped) + ' more destinations or refusals past the receipt\'s bound are counted, not listed.') : null);
}
