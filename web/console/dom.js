// dom.js: tiny helpers. Text is always set with textContent, never parsed
// as HTML, so command output and daemon strings cannot inject markup.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// short strips an enum's prefix: PLAN_STATE_AWAITING_APPROVAL -> AWAITING_APPROVAL.
export function short(v, prefix) {
  if (!v) return '';
  return String(v).startsWith(prefix) ? String(v).slice(prefix.length) : String(v);
}

export function words(v) { return v.toLowerCase().replace(/_/g, ' '); }

export function badge(text, cls) { return h('span', { class: 'badge ' + (cls || '') }, text); }

export function when(ts) {
  if (!ts) return '';
  const d = new Date(ts);
  return isNaN(d) ? String(ts) : d.toLocaleString();
}

export function kv(pairs) {
  const dl = h('dl', { class: 'kv' });
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === '' || (Array.isArray(v) && !v.length)) continue;
    dl.append(h('dt', {}, k), h('dd', {}, v));
  }
  return dl;
}

export function errorBox(err) {
  return h('div', { class: 'error', role: 'alert' }, err && err.message ? err.message : String(err));
}

export function empty(text) { return h('p', { class: 'empty' }, text); }

// argvText renders an argv for people: quoted where needed.
export function argvText(argv) {
  return (argv || []).map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : "'" + a.replace(/'/g, "'\\''") + "'")).join(' ');
}

export function b64decode(s) {
  const bin = atob(s || '');
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type: type || 'application/json' }));
  const a = h('a', { href: url, download: name });
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

// exitText shows an exit code; -1 means none (nothing ran, or a signal ended it).
export function exitText(code) {
  return code === undefined || code === null || code === -1 ? '—' : String(code);
}

// richText renders a daemon sentence, showing `quoted` commands as code.
export function richText(s) {
  return String(s || '').split('`').map((part, i) => (i % 2 ? h('code', {}, part) : part));
}

// sandboxText is a plan's sandbox profile in words, e.g.
// "workspace-write, workspace loopback (full enforcement)".
const NETWORK_WORDS = { none: 'no network', 'workspace-loopback': 'workspace loopback', host: 'host network' };
export function sandboxText(sb) {
  if (!sb || !sb.profile) return '';
  const m = sb.network_mode;
  const net = m ? NETWORK_WORDS[m] || m.replace(/^egress:/, 'egress through ') : (sb.network ? 'network' : 'no network');
  return sb.profile + ', ' + net + (sb.enforcement ? ' (' + sb.enforcement + ' enforcement)' : '');
}
