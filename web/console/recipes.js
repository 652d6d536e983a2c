// recipes.js: the recipe gallery. Each recipe is a named, inspect-only
// sequence of commands that termd decides step by step with its live
// policy; Check asks the policy, Run runs it and shows each step's output
// and receipt. The last run stays on the page (this tab) until the next.
import * as rest from './endpoints.js';
import { h, clear, errorBox, empty, argvText, exitText, badge, short, richText } from './dom.js';

const LAST_RUN_KEY = 'termd.lastRecipeRun';

function lastRun() {
  try { return JSON.parse(sessionStorage.getItem(LAST_RUN_KEY) || 'null'); } catch { return null; }
}

function runView(run) {
  const ok = run.status === 'succeeded';
  return h('section', { class: 'card', id: 'recipe-run', 'aria-labelledby': 'recipe-run-title' },
    h('h2', { id: 'recipe-run-title' }, 'Last run: ', h('code', {}, run.recipe), ' ',
      h('span', { class: 'badge ' + (ok ? 'st-SUCCEEDED' : 'st-FAILED') }, run.status)),
    run.dir ? h('p', { class: 'muted' }, 'In ', h('code', {}, run.dir), run.session_id ? [' · session ', h('a', { href: '/sessions/' + encodeURIComponent(run.session_id) }, run.session_id)] : '') : null,
    (run.problems || []).map((p) => errorBox(p)),
    h('table', {},
      h('thead', {}, h('tr', {}, ['Step', 'Command', 'Status', 'Exit', 'Receipt'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, (run.steps || []).map((s) => h('tr', { class: 'rc-' + (s.ok ? 'succeeded' : s.status) },
        h('td', {}, String(s.index), '. ', s.name),
        h('td', {}, h('code', {}, argvText(s.argv))),
        h('td', {}, h('span', { class: 'badge ' + (s.ok ? 'st-SUCCEEDED' : 'st-' + String(s.status || '').toUpperCase()) }, s.ok ? 'ok' : s.status)),
        h('td', {}, exitText(s.exit_code)),
        h('td', {}, s.receipt_id ? h('a', { class: 'receipt-link', href: '/receipts/' + encodeURIComponent(s.receipt_id) }, s.receipt_id.slice(0, 8)) : '—'))))),
    (run.steps || []).map((s) => h('details', { class: 'step-output' },
      h('summary', {}, 'Step ', String(s.index), ': ', s.name, s.truncated ? ' (output cut)' : ''),
      s.why ? h('p', { class: 'hint' }, s.why) : null,
      h('pre', { class: 'output', 'data-empty': '(no output)' }, s.stdout || ''),
      s.stderr ? h('pre', { class: 'output stderr' }, s.stderr) : null)));
}

function checkView(v) {
  return h('div', { class: 'recipe-check' },
    h('p', { class: v.valid ? 'ok' : 'bad' }, v.valid ? '✔ Every step is allowed read-only by the live policy.' : '✘ This recipe cannot run here:'),
    (v.problems || []).map((p) => errorBox(p)),
    (v.steps || []).length ? h('table', {}, h('tbody', {}, v.steps.map((s) => h('tr', {},
      h('td', {}, String(s.index)), h('td', {}, h('code', {}, argvText(s.argv))),
      h('td', {}, badge(short(s.verdict, 'VERDICT_').toLowerCase(), 'v-' + short(s.verdict, 'VERDICT_'))),
      h('td', {}, (s.reasons || []).join('; ')))))) : null);
}

export function recipesView(main, ctx) {
  const dir = h('input', { type: 'text', id: 'recipe-dir', name: 'dir', placeholder: 'the first workspace root', spellcheck: 'false' });
  const runOut = h('div');
  const list = h('div', {}, empty('Loading…'));
  main.append(h('h1', {}, 'Recipes'),
    h('p', { class: 'muted' }, 'Named, inspect-only command sequences. termd decides every step with its live policy (inspect mode) before anything runs; each step runs as your plan and leaves a signed receipt.'),
    h('div', { class: 'card' }, h('label', { for: 'recipe-dir' }, 'Run in directory ', h('span', { class: 'hint' }, '(absolute, or relative to the first workspace root)')), dir),
    runOut, list);
  const prev = lastRun();
  if (prev) clear(runOut, runView(prev));

  async function run(name, button, out) {
    button.disabled = true;
    clear(out, h('p', { class: 'muted', role: 'status' }, 'Running ', name, '…'));
    try {
      const r = await rest.recipes.run(name, dir.value.trim());
      sessionStorage.setItem(LAST_RUN_KEY, JSON.stringify(r));
      clear(out);
      clear(runOut, runView(r));
      runOut.scrollIntoView({ block: 'start' });
    } catch (e) {
      clear(out, errorBox(e));
    } finally {
      button.disabled = false;
    }
  }

  async function check(name, out) {
    try {
      clear(out, checkView(await rest.recipes.validate(name, dir.value.trim())));
    } catch (e) { clear(out, errorBox(e)); }
  }

  (async () => {
    try {
      const r = await rest.recipes.list();
      const rs = r.recipes || [];
      if (!rs.length) { clear(list, empty('No recipes.')); return; }
      clear(list, rs.map(({ recipe: x, error }) => {
        const out = h('div');
        const runBtn = h('button', { type: 'button', class: 'primary', 'data-recipe': x.name, disabled: !ctx.canRun || !!error,
          title: ctx.canRun ? undefined : 'Viewers cannot run recipes' }, 'Run');
        runBtn.addEventListener('click', () => run(x.name, runBtn, out));
        return h('article', { class: 'card recipe', id: 'recipe-' + x.name, 'aria-labelledby': 'rt-' + x.name },
          h('h2', { id: 'rt-' + x.name }, x.title || x.name, ' ', h('code', { class: 'muted' }, x.name)),
          error ? errorBox(error) : h('p', {}, richText(x.description)),
          h('p', { class: 'hint' }, (x.tags || []).join(' · '), x.tags?.length ? ' · ' : '', x.source === 'built-in' ? 'built-in' : 'from ' + x.source,
            x.limits ? ' · up to ' + x.limits.timeout_seconds + ' s' : ''),
          h('ol', { class: 'steps' }, (x.steps || []).map((s) => h('li', {}, s.name, ': ', h('code', {}, argvText(s.argv)), s.optional ? ' (optional)' : ''))),
          h('div', { class: 'row' }, runBtn, h('button', { type: 'button', disabled: !!error, onclick: () => check(x.name, out) }, 'Check')),
          out);
      }));
    } catch (e) { clear(list, errorBox(e)); }
  })();
}
