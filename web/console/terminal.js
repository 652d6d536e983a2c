// terminal.js: a PTY execution's live terminal. The daemon renders the
// screen (a VT emulator in termd); this draws its lines and cursor as a
// monospace grid, updated from the gateway's terminal stream (SSE), and
// sends keystrokes with :send when this principal holds the input. Watchers
// see it read-only; an operator can take the input over and hand it back to
// the requester.
import * as rest from './endpoints.js';
import { h, clear, errorBox } from './dom.js';

// keyInput maps a keydown to the API's TerminalInput, or null to let the
// browser have it.
const NAMED = {
  Enter: 'TERMINAL_KEY_ENTER', Tab: 'TERMINAL_KEY_TAB', Backspace: 'TERMINAL_KEY_BACKSPACE', Escape: 'TERMINAL_KEY_ESCAPE',
  ArrowUp: 'TERMINAL_KEY_UP', ArrowDown: 'TERMINAL_KEY_DOWN', ArrowLeft: 'TERMINAL_KEY_LEFT', ArrowRight: 'TERMINAL_KEY_RIGHT',
  Home: 'TERMINAL_KEY_HOME', End: 'TERMINAL_KEY_END', PageUp: 'TERMINAL_KEY_PAGE_UP', PageDown: 'TERMINAL_KEY_PAGE_DOWN',
};
const CTRL = { c: 'TERMINAL_KEY_CTRL_C', d: 'TERMINAL_KEY_CTRL_D', z: 'TERMINAL_KEY_CTRL_Z' };

export function keyInput(e) {
  if (e.metaKey || e.isComposing) return null;
  if (e.ctrlKey && !e.altKey) {
    const k = e.key.toLowerCase();
    if (CTRL[k]) return { key: CTRL[k] };
    // Other control characters (Ctrl-A, Ctrl-L, ...) as their byte.
    if (/^[a-z]$/.test(k)) return { data: btoa(String.fromCharCode(k.charCodeAt(0) - 96)) };
    return null;
  }
  if (NAMED[e.key]) return { key: NAMED[e.key] };
  if (e.key.length === 1 && !e.ctrlKey) return { text: e.key };
  return null;
}

// renderScreen draws screen.lines on a rows x cols grid with the cursor.
export function renderScreen(pre, screen) {
  const rows = screen.rows || (screen.lines || []).length;
  const cols = screen.cols || 80;
  const lines = screen.lines || [];
  const cr = Number(screen.cursor_row || 0);
  const cc = Number(screen.cursor_col || 0);
  const kids = [];
  for (let r = 0; r < rows; r++) {
    const line = (lines[r] || '').padEnd(cols, ' ');
    if (r === cr && screen.cursor_visible !== false) {
      const chars = Array.from(line);
      kids.push(chars.slice(0, cc).join(''), h('span', { class: 'cursor' }, chars[cc] || ' '), chars.slice(cc + 1).join(''));
    } else {
      kids.push(line);
    }
    if (r < rows - 1) kids.push('\n');
  }
  clear(pre, ...kids);
  pre.dataset.rows = String(rows);
  pre.dataset.cols = String(cols);
}

// terminalPanel returns the panel element and an update(exec) to call when
// the execution changes (input holder, state), and stop() on leaving.
export function terminalPanel(ctx, execID, requester) {
  const screen = h('pre', { class: 'terminal', id: 'terminal', tabindex: 0, role: 'textbox', 'aria-label': 'Terminal', 'aria-readonly': 'true', 'aria-live': 'off' });
  const who = h('p', { class: 'hint', id: 'terminal-holder' });
  const err = h('div');
  const take = h('button', { type: 'button', id: 'take-input', hidden: true }, 'Take input');
  const release = h('button', { type: 'button', id: 'release-input', hidden: true }, 'Hand input back');
  const el = h('section', { class: 'card', 'aria-labelledby': 'terminal-title', id: 'terminal-panel' },
    h('h2', { id: 'terminal-title' }, 'Terminal'), who, screen, h('div', { class: 'row' }, take, release), err);
  let exec = null;
  let es = null;
  let stopped = false;
  let ended = false;
  let last = -1;
  let retry = 500;
  let queue = Promise.resolve();

  const holding = () => exec && exec.input_holder && exec.input_holder === ctx.me && !ended;
  const sync = () => {
    const live = exec && /RUNNING|PAUSED/.test(exec.state || '') && !ended;
    screen.setAttribute('aria-readonly', holding() ? 'false' : 'true');
    screen.classList.toggle('input', holding());
    if (!live) who.textContent = 'The program has ended.';
    else if (holding()) who.textContent = 'You hold the input: click the terminal and type.';
    else who.textContent = 'Read-only: ' + (exec?.input_holder || 'the requester') + ' holds the input.';
    take.hidden = !(live && ctx.canApprove && !holding());
    // The holder who took it hands it back to the requester (who may then type again).
    release.hidden = !(live && holding() && requester && exec.input_holder !== requester);
    release.textContent = 'Hand input back' + (requester ? ' to ' + requester : '');
  };

  release.addEventListener('click', async () => {
    release.disabled = true;
    clear(err);
    try {
      exec = (await rest.terminals.releaseInput(execID)).execution;
      sync();
    } catch (ex) { clear(err, errorBox(ex)); } finally { release.disabled = false; }
  });

  take.addEventListener('click', async () => {
    take.disabled = true;
    clear(err);
    try {
      exec = (await rest.terminals.takeInput(execID)).execution;
      sync();
      screen.focus();
    } catch (ex) { clear(err, errorBox(ex)); } finally { take.disabled = false; }
  });

  screen.addEventListener('keydown', (e) => {
    if (!holding()) return;
    const input = keyInput(e);
    if (!input) return;
    e.preventDefault();
    // Keystrokes go out one request at a time, in order.
    queue = queue.then(() => rest.terminals.send(execID, [input])).catch((ex) => { clear(err, errorBox(ex)); });
  });
  screen.addEventListener('paste', (e) => {
    if (!holding()) return;
    e.preventDefault();
    const text = e.clipboardData.getData('text');
    if (text) queue = queue.then(() => rest.terminals.send(execID, [{ text }])).catch((ex) => { clear(err, errorBox(ex)); });
  });

  async function connect() {
    if (stopped || ended || es) return;
    let ticket;
    try { ({ ticket } = await rest.events.ticket()); } catch (ex) { later(); return; }
    if (stopped) return;
    const src = new EventSource(rest.terminals.streamURL(execID, ticket, last));
    es = src;
    src.onopen = () => { retry = 500; };
    src.addEventListener('screen', (e) => {
      try { renderScreen(screen, JSON.parse(e.data)); } catch { /* a bad frame is skipped */ }
    });
    src.addEventListener('output', (e) => { if (e.lastEventId) last = Number(e.lastEventId); });
    src.addEventListener('EVENT_KIND_TERMINAL', (e) => {
      try {
        const ev = JSON.parse(e.data);
        const k = ev.terminal?.kind;
        if ((k === 'input_taken' || k === 'input_released') && exec) { exec.input_holder = ev.terminal.holder || ev.terminal.by; sync(); }
      } catch { /* ignore */ }
    });
    src.addEventListener('EVENT_KIND_FINISHED', () => { ended = true; sync(); });
    src.addEventListener('end', () => { ended = true; src.close(); es = null; sync(); });
    src.onerror = () => { src.close(); if (es === src) es = null; later(); };
  }
  function later() {
    if (stopped || ended) return;
    setTimeout(connect, retry);
    retry = Math.min(retry * 2, 10000);
  }

  return {
    el,
    update(e) {
      exec = e;
      if (!/RUNNING|PAUSED/.test(e.state || '')) ended = true;
      sync();
      if (!es && !ended) connect();
      if (ended && !screen.firstChild) {
        rest.terminals.screen(execID).then((r) => renderScreen(screen, r.screen)).catch(() => {});
      }
    },
    stop() { stopped = true; if (es) { es.close(); es = null; } },
  };
}
