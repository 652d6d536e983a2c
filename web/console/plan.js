// plan.js: the plan form with the adviser panel, and a plan's own page
// (/plans/ID): decision, approval, execution controls, live output, receipt.
import * as rest from './endpoints.js';
import { h, clear, short, words, badge, kv, errorBox, empty, argvText, b64decode, when, exitText, richText, sandboxText } from './dom.js';
import { terminalPanel } from './terminal.js';
import { networkPanel } from './network.js';

const FORM_KEY = 'termd.planDraft';

export function planFormView(main, ctx) {
  const draft = JSON.parse(sessionStorage.getItem(FORM_KEY) || 'null');
  sessionStorage.removeItem(FORM_KEY);
  const argvMode = h('input', { type: 'radio', name: 'form', value: 'argv', id: 'form-argv', checked: true });
  const cmdMode = h('input', { type: 'radio', name: 'form', value: 'command', id: 'form-command' });
  const argv = h('textarea', { id: 'argv', name: 'argv', rows: 4, spellcheck: 'false', placeholder: 'e.g.  ls\n       -la' });
  const command = h('input', { type: 'text', id: 'command', name: 'command', spellcheck: 'false', placeholder: 'e.g.  ls -la' });
  const cwd = h('input', { type: 'text', id: 'cwd', name: 'cwd', spellcheck: 'false', placeholder: 'first workspace root' });
  const env = h('textarea', { id: 'env', name: 'env', rows: 2, spellcheck: 'false', placeholder: 'NAME=value' });
  const creds = h('input', { type: 'text', id: 'credentials', name: 'credentials', spellcheck: 'false', autocomplete: 'off', placeholder: 'e.g.  GH_TOKEN' });
  const mode = h('select', { id: 'mode', name: 'mode' },
    h('option', { value: '' }, 'policy default'),
    h('option', { value: 'MODE_INSPECT' }, 'inspect — read-only only'),
    h('option', { value: 'MODE_CONFIRM' }, 'confirm — asks before risky changes and network use'),
    h('option', { value: 'MODE_TRUSTED' }, 'trusted — no approvals, denials hold'));
  const timeout = h('input', { type: 'number', id: 'timeout', name: 'timeout', min: 0, step: 1, placeholder: 'policy default' });
  const network = h('input', { type: 'text', id: 'network', name: 'network', spellcheck: 'false', autocomplete: 'off', list: 'network-modes', placeholder: 'policy default' });
  const networkModes = h('datalist', { id: 'network-modes' }, ['none', 'workspace-loopback', 'host', 'egress:registries'].map((v) => h('option', { value: v })));
  const autorun = h('input', { type: 'checkbox', id: 'autorun', checked: true });
  const tty = h('input', { type: 'checkbox', id: 'tty' });
  const argvBox = h('div', {}, h('label', { for: 'argv' }, 'Arguments ', h('span', { class: 'hint' }, 'one per line, taken literally')), argv);
  const cmdBox = h('div', { hidden: true }, h('label', { for: 'command' }, 'Command ', h('span', { class: 'hint' }, 'split like a shell, no expansion; pipes and redirections are refused')), command);
  const syncMode = () => { argvBox.hidden = !argvMode.checked; cmdBox.hidden = argvMode.checked; };
  argvMode.addEventListener('change', syncMode);
  cmdMode.addEventListener('change', syncMode);
  const err = h('div');
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Plan');

  const fill = (d) => {
    if (!d) return;
    if (d.argv) { argvMode.checked = true; argv.value = d.argv.join('\n'); }
    if (d.command) { cmdMode.checked = true; command.value = d.command; }
    if (d.cwd !== undefined) cwd.value = d.cwd;
    syncMode();
  };
  fill(draft);

  const form = h('form', { class: 'card', 'aria-labelledby': 'plan-title', id: 'plan-form' },
    h('h1', { id: 'plan-title' }, 'New plan'),
    h('p', { class: 'muted' }, 'termd decides the command by policy before anything runs.'),
    h('fieldset', {}, h('legend', {}, 'Form'),
      h('label', { class: 'radio', for: 'form-argv' }, argvMode, 'argv list'),
      h('label', { class: 'radio', for: 'form-command' }, cmdMode, 'command string')),
    argvBox, cmdBox,
    h('label', { for: 'cwd' }, 'Working directory'), cwd,
    h('label', { for: 'env' }, 'Environment ', h('span', { class: 'hint' }, 'NAME=value per line; only allowlisted names')), env,
    h('label', { for: 'credentials' }, 'Credentials ', h('span', { class: 'hint' }, 'names of secrets termd supplies (termctl credentials lists yours); never type a value here')), creds,
    h('div', { class: 'grid' },
      h('div', {}, h('label', { for: 'mode' }, 'Mode'), mode),
      h('div', {}, h('label', { for: 'timeout' }, 'Timeout (seconds)'), timeout)),
    h('label', { for: 'network' }, 'Network ', h('span', { class: 'hint' }, 'none, workspace-loopback, host or egress:ALLOW-LIST; empty: workspace-loopback, or host for a program that needs the network')), network, networkModes,
    h('label', { class: 'check', for: 'tty' }, tty, 'On a terminal (an interactive program: a REPL, a prompt, less; 24×80)'),
    h('label', { class: 'check', for: 'autorun' }, autorun, 'Run at once when the policy allows it'),
    err,
    h('div', { class: 'row' }, submit));

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clear(err);
    const req = { cwd: cwd.value.trim(), env: {} };
    if (argvMode.checked) {
      req.argv = argv.value.split('\n').map((s) => s.replace(/\r$/, '')).filter((s) => s !== '');
      if (!req.argv.length) { clear(err, errorBox('Give at least the program name.')); argv.focus(); return; }
    } else {
      req.command = command.value.trim();
      if (!req.command) { clear(err, errorBox('Type a command.')); command.focus(); return; }
    }
    for (const line of env.value.split('\n')) {
      if (!line.trim()) continue;
      const i = line.indexOf('=');
      if (i <= 0) { clear(err, errorBox('Environment lines look like NAME=value: ' + line)); env.focus(); return; }
      req.env[line.slice(0, i).trim()] = line.slice(i + 1);
    }
    const names = creds.value.split(/[\s,]+/).filter((s) => s !== '');
    const bad = names.find((n) => !/^[A-Z_][A-Z0-9_]*$/.test(n));
    if (bad !== undefined) { clear(err, errorBox('Credentials are names such as GH_TOKEN (capitals, digits, _), never values.')); creds.focus(); return; }
    if (names.length) req.credentials = names;
    if (mode.value) req.mode = mode.value;
    if (timeout.value) req.timeout_seconds = Number(timeout.value);
    const net = network.value.trim();
    if (net && !/^(none|workspace-loopback|host|egress:[A-Za-z0-9._-]{1,64})$/.test(net)) {
      clear(err, errorBox('Network is none, workspace-loopback, host or egress:NAME (NAME: an allow-list in termd\'s config, letters, digits, . _ -).')); network.focus(); return;
    }
    if (net) req.network = net;
    if (tty.checked) req.tty = { rows: 24, cols: 80 };
    submit.disabled = true;
    try {
      const { plan } = await rest.plans.create(req);
      if (autorun.checked && short(plan.state, 'PLAN_STATE_') === 'PLANNED' && ctx.canRun) {
        try { await rest.plans.execute(plan.id); } catch (ex) { sessionStorage.setItem('termd.flash', ex.message); }
      }
      ctx.go('/plans/' + encodeURIComponent(plan.id));
    } catch (ex) {
      clear(err, errorBox(ex));
      submit.disabled = false;
    }
  });

  const adviser = adviserPanel(ctx, (s) => fill({ argv: s.argv }));
  main.append(h('div', { class: 'grid' }, h('div', {}, form), h('div', {}, adviser)));
  (argvMode.checked ? argv : command).focus();
}

// adviserPanel asks the daemon's adviser; its answer is shown as text and a
// suggestion can only fill the plan form, never run.
function adviserPanel(ctx, use, plan_id) {
  const intent = h('select', { id: 'advise-intent' },
    h('option', { value: 'ADVISE_INTENT_SUGGEST' }, 'Suggest commands for a task'),
    h('option', { value: 'ADVISE_INTENT_ASK' }, 'Ask a question'),
    plan_id ? h('option', { value: 'ADVISE_INTENT_EXPLAIN' }, 'Explain this plan') : null);
  const q = h('textarea', { id: 'advise-question', rows: 3, placeholder: 'e.g. list the largest files in this project' });
  const out = h('pre', { class: 'advice', 'aria-live': 'polite', hidden: true });
  const sugg = h('div');
  const err = h('div');
  const btn = h('button', { type: 'submit' }, 'Ask the adviser');
  const { available, detail } = ctx.adviser;
  if (!available) {
    // Not configured: say so and how, instead of a panel that looks ready.
    return h('section', { class: 'card off', id: 'adviser-off', 'aria-labelledby': 'adviser-title' },
      h('h2', { id: 'adviser-title' }, 'Adviser ', h('span', { class: 'badge' }, 'off')),
      h('p', { class: 'hint' }, detail ? 'The adviser is ' + detail + '.' : 'No adviser is configured: an operator turns it on with an API key in termd\'s environment (DEEPSEEK_API_KEY) or adviser.api_key_file in its config.'),
      h('p', { class: 'hint' }, 'Plans, approvals and runs work without it; see docs/ADVISER.md.'));
  }
  const form = h('form', { class: 'card', 'aria-labelledby': 'adviser-title' },
    h('h2', { id: 'adviser-title' }, 'Adviser'),
    h('p', { class: 'hint' }, 'Advice is text only: nothing runs because of it.'),
    h('label', { for: 'advise-intent' }, 'What you want'), intent,
    h('label', { for: 'advise-question' }, 'Question or task'), q,
    h('div', { class: 'row' }, btn), err, out, sugg);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clear(err); clear(sugg); out.textContent = ''; out.hidden = false;
    btn.disabled = true;
    try {
      await rest.advise({ intent: intent.value, question: q.value, plan_id: plan_id || '' }, (m) => {
        if (m.text_delta) out.textContent += m.text_delta;
        if (m.result) {
          if (m.result.text && !out.textContent) out.textContent = m.result.text;
          const list = m.result.suggestions || [];
          if (list.length) {
            clear(sugg, h('h3', {}, 'Suggestions'), h('ul', {}, list.map((s) => h('li', {},
              h('code', {}, argvText(s.argv)), s.purpose ? ' — ' + s.purpose : '', ' ',
              h('button', { type: 'button', onclick: () => use(s) }, 'Use as plan')))));
          }
          for (const w of m.result.warnings || []) sugg.append(h('p', { class: 'hint' }, 'Warning: ' + w));
        }
      });
      if (!out.textContent) out.textContent = '(no answer)';
    } catch (ex) {
      out.hidden = true;
      // The daemon's message already says what is wrong and what to do.
      clear(err, errorBox(ex));
    } finally {
      btn.disabled = false;
    }
  });
  return form;
}

// planView is the page a person reaches from an approval link.
export function planView(main, ctx, id) {
  const title = h('h1', {}, 'Plan ', h('code', {}, id));
  const summary = h('section', { class: 'card', 'aria-label': 'Plan' }, empty('Loading…'));
  const decision = h('section', { class: 'card', 'aria-labelledby': 'decision-title' });
  const approval = h('section', { class: 'card', 'aria-labelledby': 'approval-title', hidden: true });
  const execution = h('section', { class: 'card', 'aria-labelledby': 'exec-title', hidden: true });
  const stdout = h('pre', { class: 'output', id: 'stdout', 'aria-label': 'Standard output', 'aria-live': 'off' });
  const stderr = h('pre', { class: 'output stderr', id: 'stderr', 'aria-label': 'Standard error', hidden: true });
  const output = h('section', { class: 'card', 'aria-labelledby': 'output-title', hidden: true },
    h('h2', { id: 'output-title' }, 'Output'), stdout, h('div', { id: 'stderr-label', class: 'hint', hidden: true }, 'stderr'), stderr);
  const receipt = h('section', { class: 'card', 'aria-labelledby': 'receipt-title', hidden: true });
  const err = h('div');
  // What happens now comes first; the decision and canonical request follow
  // (render moves the approval card up while a person must act on it).
  const termSlot = h('div');
  const net = networkPanel(ctx);
  main.append(title, err, summary, approval, execution, termSlot, output, net.el, receipt, decision);
  let term = null;
  const pending = sessionStorage.getItem('termd.flash');
  if (pending) { sessionStorage.removeItem('termd.flash'); ctx.flash(pending); }

  let plan = null;
  let exec = null;
  let gone = false;
  const out = { OUTPUT_STREAM_STDOUT: { off: 0, el: stdout, dec: new TextDecoder(), busy: false, again: false },
    OUTPUT_STREAM_STDERR: { off: 0, el: stderr, dec: new TextDecoder(), busy: false, again: false } };
  let receiptShown = '';
  let canonicalText = '';

  const appendOut = (s, bytes) => {
    const text = s.dec.decode(bytes, { stream: true });
    if (!text) return;
    s.el.append(text);
    if (s === out.OUTPUT_STREAM_STDERR) { stderr.hidden = false; stderr.previousElementSibling.hidden = false; }
    output.hidden = false;
    s.el.scrollTop = s.el.scrollHeight;
  };

  // fetchOutput reads from the current offset until caught up; it is the
  // source of truth after a reload or a lagged stream.
  async function fetchOutput(name) {
    const s = out[name];
    if (!exec) return;
    if (s.busy) { s.again = true; return; }
    s.busy = true;
    try {
      do {
        s.again = false;
        for (let i = 0; i < 64 && !gone; i++) {
          const r = await rest.executions.output(exec.id, name, s.off);
          const data = b64decode(r.data);
          if (Number(r.offset) === s.off && data.length) appendOut(s, data);
          const next = Number(r.next_offset);
          if (next > s.off) s.off = next;
          if (!data.length || r.eof) break;
        }
      } while (s.again && !gone);
      // Said only once the finished execution's output was read to its end.
      if (exec.finished_at) s.el.dataset.empty = '(no output)';
    } catch (e) {
      if (!gone) ctx.flash(e);
    } finally {
      s.busy = false;
    }
  }

  async function load() {
    try {
      plan = (await rest.plans.get(id)).plan;
      if (plan.execution_id) {
        const first = !exec;
        exec = (await rest.executions.get(plan.execution_id)).execution;
        if (exec.tty) {
          // A terminal shows its rendered screen, not raw output with escape codes.
          if (!term) { term = terminalPanel(ctx, exec.id, plan.requester?.name); clear(termSlot, term.el); }
          term.update(exec);
        } else if (first) { output.hidden = false; fetchOutput('OUTPUT_STREAM_STDOUT'); fetchOutput('OUTPUT_STREAM_STDERR'); }
      }
      if (gone) return;
      clear(err);
      render();
      net.update(plan, exec);
      const rid = plan.receipt_id || exec?.receipt_id;
      if (rid && rid !== receiptShown) { receiptShown = rid; showReceipt(rid); }
    } catch (e) {
      if (gone) return;
      clear(err, errorBox(e.status === 404 ? 'No plan ' + id + ' (or you may not see it).' : e));
      if (!plan) clear(summary, empty('This plan could not be loaded.'));
    }
  }

  function act(label, fn, cls) {
    return h('button', { type: 'button', class: cls, onclick: async (e) => {
      e.target.disabled = true;
      ctx.flash(null);
      try { await fn(); } catch (ex) { ctx.flash(ex); } finally { e.target.disabled = false; }
      load();
    } }, label);
  }

  function render() {
    const st = short(plan.state, 'PLAN_STATE_');
    const d = plan.decision || {};
    const p = plan.preview || {};
    const req = plan.request || {};
    clear(summary,
      h('div', { class: 'row' },
        badge(words(st), 'st-' + st), badge('risk ' + words(short(d.risk, 'RISK_')), 'risk-' + short(d.risk, 'RISK_'))),
      h('pre', { class: 'mono', id: 'plan-argv' }, argvText(d.argv && d.argv.length ? d.argv : req.argv) || req.command),
      plan.next_step ? h('p', { id: 'next-step' }, ...richText(consoleStep(plan.next_step, st, ctx))) : null,
      kv([['Session', h('a', { href: '/sessions/' + encodeURIComponent(plan.session_id) }, plan.session_id)],
        ['Requested by', plan.requester ? plan.requester.name + (plan.requester.via ? ' via ' + plan.requester.via : '') : ''],
        ['Created', when(plan.created_at)],
        ['Expires', /^(PLANNED|AWAITING_APPROVAL|APPROVED)$/.test(st) ? when(plan.expires_at) : ''],
        ['Replanned from', plan.replanned_from ? h('a', { href: '/plans/' + plan.replanned_from }, plan.replanned_from) : ''],
        ['Approved by', plan.approval?.approver ? plan.approval.approver.name + ' at ' + when(plan.approval.approved_at) : ''],
        ['Approved by grant', plan.grant_id ? h('a', { href: '/grants', id: 'grant-id' }, plan.grant_id) : ''],
        ['Denied by', plan.denial?.denied_by ? plan.denial.denied_by.name + ': ' + plan.denial.reason : ''],
        ['Flagged by adviser', plan.flagged_by_adviser ? 'yes — needs approval in every mode' : '']]),
      h('div', { class: 'row' },
        ['PLANNED', 'APPROVED'].includes(st) && ctx.canRun ? act('Run', () => rest.plans.execute(id), 'primary') : null,
        ctx.canRun ? act('Replan', async () => {
          const r = await rest.plans.replan(id);
          ctx.go('/plans/' + encodeURIComponent(r.plan.id));
        }) : null));

    clear(decision,
      h('h2', { id: 'decision-title' }, 'Decision: ', badge(words(short(d.verdict, 'VERDICT_')), 'v-' + short(d.verdict, 'VERDICT_'))),
      (d.reasons || []).length ? h('ul', { class: 'reasons', id: 'reasons' }, d.reasons.map((r) => h('li', {}, r))) : null,
      h('h3', {}, 'Preview'),
      // A command string refused before it was split (shell syntax) has no
      // argv to preview.
      !(d.argv && d.argv.length) ? h('p', { class: 'muted' }, 'The command was refused before it could be analysed, so there is nothing to preview.') : [
      p.summary ? h('p', {}, p.summary) : null,
      kv([['Program', p.program || d.resolved_path],
        ['Read-only', p.read_only ? 'yes' : 'no'],
        ['Writes', (p.writes || []).join(', ')],
        ['Network', p.network ? 'yes' : 'no'],
        ['Runs project code', p.runs_project_code ? 'yes' : 'no'],
        ['Credentials', (d.credentials || []).length ? h('span', { id: 'plan-credentials' }, d.credentials.join(', ')) : ''],
        ['Privileged', d.privileged ? h('strong', { id: 'plan-privileged' }, 'yes: runs as real host root (not root in a user namespace)') : ''],
        ['Sandbox', h('span', { id: 'sandbox' }, sandboxText(d.sandbox || p.sandbox))],
        ['Rules', (d.rules || []).join(', ')],
        ['Policy', d.policy_version]])]);

    // The canonical request: exactly what an approval is for.
    const canon = { argv: d.argv, exec_argv: d.exec_argv, cwd: d.cwd, env: d.env, credentials: d.credentials, privileged: d.privileged || undefined, mode: d.mode, timeout_seconds: d.timeout_seconds,
      resolved_path: d.resolved_path, binary_sha256: d.binary_sha256, run_as: d.run_as };
    // Prefer the daemon's own canonical request (the bytes whose sha256 is the
    // hash); fall back to the decision's fields if the policy has changed since.
    const canonPre = h('pre', { class: 'mono', id: 'canonical' }, canonicalText || JSON.stringify(canon, null, 2));
    if (!canonicalText && plan.request) {
      rest.policy.check(plan.request).then((c) => {
        if (c.decision?.request_hash === d.request_hash && c.canonical_request) {
          try { canonicalText = JSON.stringify(JSON.parse(c.canonical_request), null, 2); } catch { canonicalText = c.canonical_request; }
          canonPre.textContent = canonicalText;
        }
      }).catch(() => { /* keep the decision's fields */ });
    }
    // A blocked plan has nothing to approve; its request is in the summary.
    approval.hidden = st === 'BLOCKED' && !(d.argv && d.argv.length);
    const awaiting = st === 'AWAITING_APPROVAL';
    if (awaiting) summary.after(approval); else decision.after(approval);
    const reason = h('input', { type: 'text', id: 'deny-reason', placeholder: 'why (shown to the requester)' });
    clear(approval,
      h('h2', { id: 'approval-title' }, awaiting ? 'Approval needed' : 'Canonical request'),
      h('p', {}, 'Request hash ', h('code', { class: 'hash', id: 'request-hash' }, d.request_hash || '')),
      canonPre,
      awaiting && ctx.canApprove ? [
        h('p', { class: 'hint' }, 'Approving lets exactly this request (this hash) run once, until ', when(plan.expires_at) || 'it expires', '.'),
        h('div', { class: 'row' },
          act('Approve', () => rest.plans.approve(id, d.request_hash), 'primary'),
          h('label', { for: 'deny-reason', class: 'hint' }, 'Deny reason'), reason,
          act('Deny', () => rest.plans.deny(id, reason.value || 'denied in the console'), 'danger')),
      ] : null,
      awaiting && !ctx.canApprove ? h('p', { class: 'hint' }, 'Only an operator can approve this plan.') : null);

    if (exec) {
      const es = short(exec.state, 'EXECUTION_STATE_');
      execution.hidden = false;
      clear(execution,
        h('h2', { id: 'exec-title' }, 'Execution ', badge(words(es), 'st-' + es)),
        kv([['Execution', h('code', {}, exec.id)], ['Pid', exec.pid || ''], ['Started', when(exec.started_at)], ['Finished', when(exec.finished_at)],
          ['Duration', exec.duration_ms && exec.finished_at ? exec.duration_ms + ' ms' : ''],
          ['Exit code', exec.finished_at ? exitText(exec.exit_code) : ''], ['Signal', exec.signal], ['Error', exec.error],
          ['Output truncated', exec.output_truncated ? 'yes' : '']]),
        ctx.canRun ? h('div', { class: 'row' },
          es === 'RUNNING' ? act('Pause', () => rest.executions.pause(exec.id)) : null,
          es === 'PAUSED' ? act('Resume', () => rest.executions.resume(exec.id)) : null,
          es === 'RUNNING' || es === 'PAUSED' ? act('Cancel', () => rest.executions.cancel(exec.id), 'danger') : null) : null);
      const live = es === 'RUNNING' || es === 'PAUSED';
      if (live) stdout.dataset.empty = 'waiting for output…';
      if (!live && !exec.tty) { fetchOutput('OUTPUT_STREAM_STDOUT'); fetchOutput('OUTPUT_STREAM_STDERR'); }
    }
  }

  async function showReceipt(rid) {
    receipt.hidden = false;
    clear(receipt, h('h2', { id: 'receipt-title' }, 'Receipt'), empty('Verifying…'));
    try {
      const r = await rest.receipts.get(rid);
      const v = await rest.receipts.verify(r.receipt_json);
      try { net.receipt(JSON.parse(r.receipt_json)); } catch { /* the raw JSON is on the receipt's page */ }
      clear(receipt, h('h2', { id: 'receipt-title' }, 'Receipt'),
        h('p', { id: 'receipt-verdict', class: v.valid ? 'ok' : 'bad' }, v.valid ? '✔ Receipt verified' : '✘ Receipt does not verify'),
        kv([['Receipt', h('a', { href: '/receipts/' + encodeURIComponent(rid) }, rid)], ['Status', r.summary?.status], ['Exit code', exitText(r.summary?.exit_code)],
          ['Problems', (v.problems || []).join('; ')]]));
    } catch (e) {
      clear(receipt, h('h2', { id: 'receipt-title' }, 'Receipt'), errorBox(e));
    }
  }

  let timer = null;
  const refresh = () => { clearTimeout(timer); timer = setTimeout(load, 120); };
  const off = ctx.on((ev) => {
    if (ev.plan && ev.plan.id === id) refresh();
    if (ev.execution && ev.execution.plan_id === id) refresh();
    if (ev.receipt && ev.receipt.plan_id === id) refresh();
    if (ev.output && exec && !exec.tty && ev.output.execution_id === exec.id) {
      const s = out[ev.output.stream];
      if (!s) return;
      const off0 = Number(ev.output.offset);
      const data = b64decode(ev.output.data);
      if (off0 === s.off && !s.busy) { appendOut(s, data); s.off += data.length; }
      else if (off0 + data.length > s.off) fetchOutput(ev.output.stream);
    }
  });
  // Polling backs the event stream up while something is still moving.
  const poll = setInterval(() => {
    const es = exec ? short(exec.state, 'EXECUTION_STATE_') : '';
    if (es === 'RUNNING' || es === 'PAUSED' || (exec && !receiptShown)) load();
  }, 3000);
  load();
  return () => { gone = true; off(); clearInterval(poll); clearTimeout(timer); if (term) term.stop(); net.stop(); };
}

// consoleStep says a plan's next step in the console's words: the daemon
// writes it for termctl ("run `termctl execute ID`"), but here the buttons
// beside it do that.
export function consoleStep(step, st, ctx) {
  if (['PLANNED', 'APPROVED'].includes(st) && ctx.canRun) return 'Ready to run: press Run.';
  if (st === 'AWAITING_APPROVAL' && ctx.canApprove) return 'Needs approval: review the canonical request below, then Approve or Deny.';
  if (st === 'AWAITING_APPROVAL') return 'Needs an operator\'s approval; this page updates when it is decided.';
  if (/`termctl replan /.test(step) && ctx.canRun) return step.replace(/\(?(run )?`termctl replan [^`]*`\)?/, 'press Replan').trim();
  return step;
}
