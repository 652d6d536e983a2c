// Browser tests of the termd web console in real headless Chromium.
// Run by gateway/browser_test.go, which starts termd and termd-gateway and
// passes TERMD_CONSOLE_URL and TERMD_CONSOLE_TOKEN. Screenshots of every
// step go to artifacts/ (gitignored).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { launch, must } from './browser.mjs';

const url = process.env.TERMD_CONSOLE_URL;
const token = process.env.TERMD_CONSOLE_TOKEN;
if (!url || !token) {
  console.error('set TERMD_CONSOLE_URL and TERMD_CONSOLE_TOKEN');
  process.exit(2);
}
const { page, consoleErrors, shot, test, finish } = await launch();

async function planForm({ argv, command, mode }) {
  await page.getByRole('link', { name: 'New plan' }).click();
  await page.waitForSelector('#plan-form');
  if (command) {
    await page.getByLabel('command string').check();
    await page.fill('#command', command);
  } else {
    await page.getByLabel('argv list').check();
    await page.fill('#argv', argv.join('\n'));
  }
  if (mode) await page.selectOption('#mode', mode);
}

async function submitPlan() {
  await page.getByRole('button', { name: 'Plan', exact: true }).click();
  await page.waitForURL(/\/plans\/[^/]+$/);
  await page.waitForSelector('#plan-argv');
  return page.url().split('/plans/')[1];
}

await test('sign in', async () => {
  await page.goto(url);
  await page.waitForSelector('#token');
  await shot('sign-in');
  // A wrong token is refused with a clear message.
  await page.fill('#token', 'x'.repeat(50));
  await page.keyboard.press('Enter');
  await page.getByText('That token was not accepted.').waitFor();
  await page.fill('#token', token);
  await page.keyboard.press('Enter');
  await page.waitForSelector('#plan-form');
  await page.locator('#live.on').waitFor();
  must((await page.locator('#identity').textContent()).includes('operator'), 'identity does not show the operator role');
  // The token is kept in sessionStorage and never in the URL.
  must(!page.url().includes(token), 'token in URL');
  must(await page.evaluate((t) => sessionStorage.getItem('termd.token') === t, token), 'token not in sessionStorage');
  // The arguments box is empty, and its example reads as an example.
  must(await page.inputValue('#argv') === '', 'the arguments box is not empty');
  must((await page.getAttribute('#argv', 'placeholder')).startsWith('e.g.'), 'the arguments placeholder looks filled in');
  // Without an adviser key the panel says it is off (and how to turn it on) instead of looking ready.
  await page.locator('#adviser-off').waitFor();
  must(await page.getByRole('button', { name: 'Ask the adviser' }).count() === 0, 'the adviser panel offers to ask without an adviser');
  await shot('signed-in');
});

await test('credential by name: the plan asks and shows the name, never the value', async () => {
  await planForm({ argv: ['git', 'status'] });
  await page.fill('#credentials', 'not a name');
  await page.getByRole('button', { name: 'Plan', exact: true }).click();
  await page.getByText('Credentials are names such as GH_TOKEN').waitFor();
  await page.fill('#credentials', 'CONSOLE_TOKEN');
  await submitPlan();
  await page.locator('#plan-credentials', { hasText: 'CONSOLE_TOKEN' }).waitFor();
  await page.locator('#approval-title', { hasText: 'Approval needed' }).waitFor();
  must((await page.locator('#canonical').textContent()).includes('CONSOLE_TOKEN'), 'the canonical request does not name the credential');
  must(!(await page.content()).includes(process.env.TERMD_TEST_CREDENTIAL_VALUE), 'the plan page holds the credential value');
  await shot('credential-plan-awaiting-approval');
  // Leave the approval queue empty for the tests that count it.
  await page.getByRole('button', { name: 'Deny', exact: true }).click();
  await page.waitForFunction(() => document.getElementById('approval-count').textContent === '');
});

await test('read-only command: live output and a verified receipt', async () => {
  await planForm({ argv: ['echo', 'hello from the console'] });
  await submitPlan();
  await page.locator('#stdout', { hasText: 'hello from the console' }).waitFor();
  await page.locator('#receipt-verdict', { hasText: 'Receipt verified' }).waitFor();
  must((await page.locator('#sandbox').textContent()).startsWith('read-only, workspace loopback'), 'plan page does not show the sandbox profile: ' + await page.locator('#sandbox').textContent());
  must(await page.locator('#sandbox-warning').isHidden(), 'a fully enforced sandbox shows a warning');
  await shot('read-only-output-and-receipt');
  await page.locator('#receipt-title ~ dl a').first().click();
  await page.locator('#receipt-verdict', { hasText: 'Receipt verified' }).waitFor();
  must((await page.locator('#receipt-json').textContent()).includes('hello from the console'), 'raw receipt JSON lacks the command');
  await page.getByRole('button', { name: 'Share export…' }).click();
  await page.locator('#share-json').waitFor();
  const dl = page.waitForEvent('download');
  await page.getByRole('button', { name: 'Download JSON' }).click();
  const receiptDl = await dl;
  must(receiptDl.suggestedFilename().startsWith('receipt-'), 'download has no receipt file name');
  const keyDl = page.waitForEvent('download');
  await page.getByRole('button', { name: 'Download public key' }).click();
  const pubDl = await keyDl;
  if (process.env.TERMCTL) {
    // What the console hands out verifies offline: no daemon, only the public key.
    const dir = mkdtempSync(join(tmpdir(), 'termd-offline-'));
    const rf = join(dir, receiptDl.suggestedFilename());
    const kf = join(dir, pubDl.suggestedFilename());
    await receiptDl.saveAs(rf);
    await pubDl.saveAs(kf);
    const v = spawnSync(process.env.TERMCTL, ['receipt', 'verify', rf, '--public-key', kf, '--socket', join(dir, 'no-daemon.sock')], { encoding: 'utf8' });
    rmSync(dir, { recursive: true, force: true });
    must(v.status === 0 && v.stdout.includes('valid receipt'), 'offline verification of the downloaded receipt failed: ' + v.stdout + v.stderr);
  }
  await shot('receipt-detail');
});

await test('write in confirm mode: approval queue, approve, run', async () => {
  await planForm({ command: 'touch hello.txt', mode: 'MODE_CONFIRM' });
  const id = await submitPlan();
  await page.locator('.badge', { hasText: 'awaiting approval' }).first().waitFor();
  const hash = (await page.locator('#request-hash').textContent()).trim();
  must(/^[0-9a-f]{64}$/.test(hash), 'plan page does not show the request hash: ' + hash);
  must((await page.locator('#canonical').textContent()).includes('hello.txt'), 'canonical request not shown');
  must(!(await page.locator('#next-step').textContent()).includes('termctl'), 'the plan page prints termctl instructions beside its buttons');
  await page.locator('#approval-count', { hasText: /^1$/ }).waitFor();
  await shot('awaiting-approval-plan-page');
  await page.getByRole('link', { name: /Approvals/ }).click();
  const item = page.locator(`article[data-plan="${id}"]`);
  await item.waitFor();
  must((await item.textContent()).includes(hash), 'queue item does not show the hash being approved');
  await shot('approval-queue');
  await item.getByRole('button', { name: 'Approve' }).click();
  await item.waitFor({ state: 'detached' });
  await page.waitForFunction(() => document.getElementById('approval-count').textContent === '');
  // Approval does not run the plan; the queue says so and offers to run it.
  const note = page.locator('#approved .notice');
  await note.waitFor();
  must((await note.textContent()).includes('does not run it'), 'no notice that approval does not run the plan');
  await shot('approved-notice');
  await note.getByRole('button', { name: 'Run it now' }).click();
  await page.waitForURL(url + '/plans/' + id); // the stable plan page
  await page.locator('#exec-title .badge', { hasText: 'succeeded' }).waitFor();
  await page.locator('#receipt-verdict', { hasText: 'Receipt verified' }).waitFor();
  // touch prints nothing: the output box says so instead of staying blank.
  await page.locator('#stdout[data-empty="(no output)"]:empty').waitFor();
  await shot('approved-and-ran');
});

await test('remembered approval: a session pattern grant approves the next plan, is listed and revoked', async () => {
  await planForm({ command: 'touch granted-1.txt', mode: 'MODE_CONFIRM' });
  const first = await submitPlan();
  await page.locator('.badge', { hasText: 'awaiting approval' }).first().waitFor();
  await page.getByRole('link', { name: /Approvals/ }).click();
  const item = page.locator(`article[data-plan="${first}"]`);
  await item.waitFor();
  await item.getByLabel('Remember this approval').selectOption('GRANT_SCOPE_SESSION_PATTERN');
  await item.locator('input.pattern').fill('touch <any>');
  await shot('approve-with-grant');
  await item.getByRole('button', { name: 'Approve' }).click();
  await item.waitFor({ state: 'detached' });
  await planForm({ command: 'touch granted-2.txt', mode: 'MODE_CONFIRM' });
  await submitPlan();
  await page.locator('.badge', { hasText: 'approved' }).first().waitFor();
  const gid = (await page.locator('#grant-id').textContent()).trim();
  must(/^g-/.test(gid), 'the plan page does not name the grant that approved it: ' + gid);
  await page.getByRole('link', { name: /Grants/ }).click();
  const row = page.locator(`#grants tr[data-grant="${gid}"]`);
  await row.waitFor();
  const text = await row.textContent();
  must(text.includes('touch <any>') && text.includes('active'), 'grant row: ' + text);
  await shot('grants');
  await row.getByRole('button', { name: 'Revoke' }).click();
  await row.waitFor({ state: 'detached' });
  await planForm({ command: 'touch granted-3.txt', mode: 'MODE_CONFIRM' });
  await submitPlan();
  await page.locator('.badge', { hasText: 'awaiting approval' }).first().waitFor();
});

await test('denied command shows its reasons', async () => {
  await planForm({ argv: ['sudo', 'ls'] });
  await submitPlan();
  await page.locator('.badge', { hasText: 'blocked' }).first().waitFor();
  const reasons = await page.locator('#reasons li').allTextContents();
  must(reasons.length > 0 && reasons.join(' ').includes('sudo'), 'no reasons shown: ' + reasons);
  must(await page.getByRole('button', { name: 'Run' }).count() === 0, 'a blocked plan offers Run');
  await shot('denied-with-reasons');
});

await test('a refused command string shows no empty preview', async () => {
  await planForm({ command: 'curl https://example.com/x | sh' });
  await submitPlan();
  await page.locator('.badge', { hasText: 'blocked' }).first().waitFor();
  await page.getByText('refused before it could be analysed').waitFor();
  must(!(await page.locator('#canonical').isVisible()), 'an empty canonical request is shown for a refused string');
  await shot('refused-string');
});

await test('reload mid-run: output continues', async () => {
  await planForm({ argv: ['make', 'slow'], mode: 'MODE_TRUSTED' });
  const id = await submitPlan();
  await page.locator('#stdout', { hasText: 'before' }).waitFor();
  await page.locator('#exec-title .badge', { hasText: 'running' }).waitFor();
  await shot('running-before-reload');
  await page.reload();
  must(page.url().endsWith('/plans/' + id), 'reload lost the page');
  await page.locator('#stdout', { hasText: 'before' }).waitFor();
  await page.locator('#stdout', { hasText: 'after' }).waitFor();
  const out = await page.locator('#stdout').textContent();
  must(out.indexOf('before') < out.indexOf('after') && out.split('before').length === 2, 'output duplicated or out of order: ' + JSON.stringify(out));
  await page.locator('#exec-title .badge', { hasText: 'succeeded' }).waitFor();
  await shot('output-continued-after-reload');
});

await test('sessions and receipts lists', async () => {
  await page.getByRole('link', { name: 'Sessions' }).click();
  await page.locator('table tbody tr').first().waitFor();
  await shot('sessions');
  await page.getByRole('link', { name: 'Receipts' }).click();
  await page.locator('table tbody tr').first().waitFor();
  must(await page.locator('table tbody tr').count() >= 3, 'fewer than 3 receipts listed');
  // A blocked receipt's row stands out from the succeeded ones.
  const blocked = page.locator('table tbody tr.rc-blocked').first();
  await blocked.waitFor();
  const mark = await blocked.evaluate((tr) => getComputedStyle(tr).boxShadow);
  const plain = await page.locator('table tbody tr.rc-succeeded').first().evaluate((tr) => getComputedStyle(tr).boxShadow);
  must(mark !== 'none' && mark !== plain, 'blocked receipts are not coloured: ' + mark);
  await shot('receipts');
});

await test('receipt search: a phrase from the output finds its receipt, search syntax is text', async () => {
  await page.getByRole('link', { name: 'Receipts' }).click();
  await page.locator('table tbody tr').first().waitFor();
  await page.fill('#receipt-search', 'HELLO from the');
  await page.getByRole('button', { name: 'Search', exact: true }).click();
  const hits = page.locator('#search-hits tbody tr');
  await hits.first().waitFor();
  must(await hits.count() === 1, 'want exactly the echo receipt, got ' + await hits.count() + ' hits');
  must((await hits.first().locator('.snippet').textContent()).includes('hello from the console'), 'the hit has no snippet of the output');
  await shot('receipt-search');
  // Search syntax is searched for as text: nothing holds this.
  await page.fill('#receipt-search', 'hello OR console*');
  await page.getByRole('button', { name: 'Search', exact: true }).click();
  await page.getByText('No receipts you may see contain').waitFor();
  await page.fill('#receipt-search', 'hello from the console');
  await page.getByRole('button', { name: 'Search', exact: true }).click();
  await hits.first().waitFor();
  await hits.first().locator('a').click();
  await page.waitForURL(/\/receipts\/[^/]+$/);
  await page.locator('#receipt-verdict', { hasText: 'Receipt verified' }).waitFor();
  must((await page.locator('#receipt-json').textContent()).includes('hello from the console'), 'the opened receipt is not the hit');
});

await test('recipe gallery: check, run, receipts of the last run', async () => {
  await page.getByRole('link', { name: 'Recipes' }).click();
  const card = page.locator('#recipe-analyze-logs');
  await card.waitFor();
  must(await page.locator('article.recipe').count() >= 6, 'the gallery shows fewer than six recipes');
  must((await card.textContent()).includes('Log files: find . '), 'a recipe card does not list its steps');
  await card.getByRole('button', { name: 'Check' }).click();
  await card.getByText('Every step is allowed read-only by the live policy.').waitFor();
  await card.getByRole('button', { name: 'Run' }).click();
  const run = page.locator('#recipe-run');
  await run.locator('.badge', { hasText: 'succeeded' }).waitFor();
  must((await run.textContent()).includes('./logs/app.log:2:ERROR disk full on /var/data'), 'the run does not show the error line found in the log');
  const links = run.locator('a.receipt-link');
  must(await links.count() === 4, 'expected a receipt per step, got ' + await links.count());
  await shot('recipe-run');
  // The last run stays on the page across a reload, and its receipts open verified.
  await page.reload();
  await page.locator('#recipe-run .badge', { hasText: 'succeeded' }).waitFor();
  await page.locator('#recipe-run a.receipt-link').first().click();
  await page.locator('#receipt-verdict', { hasText: 'Receipt verified' }).waitFor();
  must((await page.locator('#receipt-json').textContent()).includes('"mode": "inspect"'), 'a recipe step did not run in inspect mode');
  await shot('recipe-step-receipt');
});

await test('terminal: type into a PTY program and see the echo', async () => {
  await planForm({ argv: ['cat'], mode: 'MODE_TRUSTED' });
  await page.check('#tty');
  await submitPlan();
  const term = page.locator('#terminal');
  await term.waitFor();
  await page.locator('#terminal-holder', { hasText: 'You hold the input' }).waitFor();
  await term.click();
  await page.keyboard.type('hello terminal');
  // The terminal echoes what is typed before cat reads it.
  await page.locator('#terminal', { hasText: 'hello terminal' }).waitFor();
  await page.keyboard.press('Enter');
  // cat prints the line back: it is on the screen twice.
  await page.waitForFunction(() => (document.getElementById('terminal').textContent.match(/hello terminal/g) || []).length >= 2);
  const rows = (await term.textContent()).split('\n');
  must(rows.length === 24 && rows.every((r) => r.length === 80), 'the screen is not a 24x80 grid: ' + rows.length + ' rows');
  must(await page.locator('#terminal .cursor').count() === 1, 'no cursor on the screen');
  must(await page.locator('#stdout').isHidden(), 'a terminal shows the raw output box too');
  await shot('terminal-echo');
  await page.keyboard.press('Control+D');
  await page.locator('#exec-title .badge', { hasText: 'succeeded' }).waitFor();
  await page.locator('#terminal-holder', { hasText: 'ended' }).waitFor();
  await page.locator('#receipt-verdict', { hasText: 'Receipt verified' }).waitFor();
  await shot('terminal-ended');
});

await test('terminal: a watcher reads only, an operator takes the input over', async () => {
  must(process.env.TERMCTL && process.env.TERMD_SOCKET && process.env.TERMD_WORKSPACE, 'TERMCTL, TERMD_SOCKET and TERMD_WORKSPACE are needed to start a terminal as another principal');
  // root (the test) starts cat on a terminal and holds its input.
  const r = spawnSync(process.env.TERMCTL, ['run', '--tty', '--detach', '--mode', 'trusted', '--', 'cat'], { encoding: 'utf8', cwd: process.env.TERMD_WORKSPACE, env: { ...process.env, NO_COLOR: '1' } });
  must(r.status === 0, 'termctl run --tty --detach: ' + r.status + ' ' + r.stderr);
  const planID = (r.stderr.match(/plan ([0-9a-f-]{36})/) || [])[1];
  must(planID, 'no plan id in: ' + r.stderr);
  await page.goto(url + '/plans/' + planID);
  const term = page.locator('#terminal');
  await term.waitFor();
  await page.locator('#terminal-holder', { hasText: 'Read-only' }).waitFor();
  await term.click();
  await page.keyboard.type('ignored');
  await shot('terminal-read-only');
  await page.getByRole('button', { name: 'Take input' }).click();
  await page.locator('#terminal-holder', { hasText: 'You hold the input' }).waitFor();
  await term.click();
  await page.keyboard.type('taken over');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => (document.getElementById('terminal').textContent.match(/taken over/g) || []).length >= 2);
  must(!(await term.textContent()).includes('ignored'), 'a watcher\'s keystrokes reached the terminal');
  await shot('terminal-taken-over');
  // The operator hands the input back: the requester (root, here termctl) types again.
  const execID = (r.stdout.match(/termctl output ([0-9a-f-]{36})/) || [])[1];
  must(execID, 'no execution id in: ' + r.stdout);
  await page.getByRole('button', { name: 'Hand input back to root' }).click();
  await page.locator('#terminal-holder', { hasText: 'Read-only: root holds the input' }).waitFor();
  must(await page.locator('#take-input').isVisible(), 'after handing it back the operator cannot take the input again');
  const send = (...a) => spawnSync(process.env.TERMCTL, ['send', execID, ...a], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
  const back = send('--line', 'handed back');
  must(back.status === 0, 'the requester could not type after the hand-back: ' + back.status + ' ' + back.stderr);
  await page.waitForFunction(() => (document.getElementById('terminal').textContent.match(/handed back/g) || []).length >= 2);
  await shot('terminal-handed-back');
  must(send('--key', 'ctrl_d').status === 0, 'the requester could not end cat');
  await page.locator('#exec-title .badge', { hasText: 'succeeded' }).waitFor();
});

await test('port forward: listed live with its link, the plan shows its network mode, Close ends termctl port-forward', async () => {
  must(process.env.TERMCTL && process.env.TERMD_WORKSPACE, 'TERMCTL and TERMD_WORKSPACE are needed to start a dev server and forward to it');
  const env = { ...process.env, NO_COLOR: '1' };
  // root (the test) starts a dev server on its workspace loopback.
  const r = spawnSync(process.env.TERMCTL, ['run', '--detach', '--mode', 'trusted', '--', 'python3', '-m', 'http.server', '--bind', '127.0.0.1', '18473'], { encoding: 'utf8', cwd: process.env.TERMD_WORKSPACE, env });
  must(r.status === 0, 'termctl run --detach python3 -m http.server: ' + r.status + ' ' + r.stderr);
  const planID = (r.stderr.match(/plan ([0-9a-f-]{36})/) || [])[1];
  const execID = (r.stdout.match(/termctl output ([0-9a-f-]{36})/) || [])[1];
  must(planID && execID, 'no plan or execution id in: ' + r.stderr + r.stdout);
  await page.getByRole('link', { name: 'Forwards' }).click();
  await page.getByText('No port forwards are open.').waitFor();
  // termctl port-forward holds the forward while it runs; the page lists it without a reload.
  const pf = spawn(process.env.TERMCTL, ['port-forward', execID, '0:18473'], { env });
  let pfOut = '';
  pf.stdout.on('data', (b) => { pfOut += b; });
  pf.stderr.on('data', (b) => { pfOut += b; });
  const exited = new Promise((res) => pf.on('exit', (code) => res(code)));
  try {
    const opened = page.waitForFunction(() => document.querySelector('#forwards tr[data-forward]'));
    await opened;
    const m = pfOut.match(/forwarding (http:\/\/127\.0\.0\.1:\d+) .*\nforward (\S+);/);
    must(m, 'termctl port-forward did not say its address: ' + pfOut);
    const [, addr, fid] = m;
    const row = page.locator(`#forwards tr[data-forward="${fid}"]`);
    await row.waitFor();
    const href = await row.locator('a.forward-open').getAttribute('href');
    must(href === addr + '/', 'the Open link is ' + href + ', want ' + addr + '/');
    must((await row.textContent()).includes('127.0.0.1:18473'), 'the row does not name the remote port: ' + await row.textContent());
    // The link answers: the dev server's listing comes through the forward (once it listens).
    let body = '';
    for (let i = 0; i < 120 && !body.includes('Directory listing'); i++) {
      try { body = await (await fetch(href)).text(); } catch { await new Promise((res) => setTimeout(res, 500)); }
    }
    must(body.includes('Directory listing'), 'the Open link did not reach the dev server: ' + body.slice(0, 200));
    await shot('forwards');
    // The plan's page shows its network mode and the forward into its execution.
    await page.goto(url + '/plans/' + planID);
    await page.locator('#network-mode', { hasText: 'workspace-loopback' }).waitFor();
    await page.locator(`#exec-forwards tr[data-forward="${fid}"] a.forward-open[href="${href}"]`).waitFor();
    await shot('plan-network');
    // Close (operator) ends the forward and termctl port-forward with it.
    await page.getByRole('link', { name: 'Forwards' }).click();
    await row.getByRole('button', { name: 'Close' }).click();
    await row.waitFor({ state: 'detached' });
    const code = await exited;
    must(code !== 0 && pfOut.includes('was closed'), 'termctl port-forward after Close: exit ' + code + ' ' + pfOut);
    let refused = false;
    try { await fetch(href); } catch { refused = true; }
    must(refused, 'the host port still answers after Close');
  } finally {
    pf.kill();
    spawnSync(process.env.TERMCTL, ['cancel', execID], { env });
  }
});

await test('egress: a refused connection shows live, the receipt\'s destinations and refusals show', async () => {
  const up = process.env.TERMD_UPSTREAM;
  must(up && process.env.TERMD_WORKSPACE, 'TERMD_UPSTREAM and TERMD_WORKSPACE are needed for the egress test');
  const go = join(process.env.TERMD_WORKSPACE, 'egress-go');
  await planForm({ argv: ['python3', 'egress_probe.py', 'http://blocked.test/x', 'http://' + up + '/', go], mode: 'MODE_TRUSTED' });
  await page.fill('#network', 'egress console');
  await page.getByRole('button', { name: 'Plan', exact: true }).click();
  await page.getByText('Network is none, workspace-loopback, host or egress:NAME').waitFor();
  await page.fill('#network', 'egress:console');
  await submitPlan();
  await page.locator('#network-mode', { hasText: 'egress:console' }).waitFor();
  // The page watches the plan: let the probe try the unlisted host.
  writeFileSync(go, '');
  await page.locator('#egress-live li[data-reason="not_on_allow_list"]', { hasText: 'blocked.test:80' }).waitFor();
  await shot('egress-refused-live');
  await page.locator('#stdout', { hasText: 'hello from upstream.test' }).waitFor();
  await page.locator('#receipt-verdict', { hasText: 'Receipt verified' }).waitFor();
  const dest = page.locator('#egress-destinations tbody tr', { hasText: up });
  await dest.waitFor();
  const cells = await dest.locator('td').allTextContents();
  must(Number(cells[3]) > 0 && Number(cells[4]) > 0, 'the destination has no bytes up and down: ' + cells.join(' | '));
  await page.locator('#egress-refused tbody tr', { hasText: 'blocked.test:80' }).filter({ hasText: 'not_on_allow_list' }).waitFor();
  await shot('egress-receipt');
  // The receipt's own page shows the mode and the same account.
  await page.locator('#receipt-title ~ dl a').first().click();
  await page.locator('#receipt-network-mode', { hasText: 'egress:console' }).waitFor();
  await page.locator('#egress-destinations tbody tr', { hasText: up }).waitFor();
});

await test('no script errors', async () => {
  const relevant = consoleErrors.filter((e) => !/status of 40[13]/.test(e));
  must(relevant.length === 0, 'console errors: ' + [...new Set(relevant)].join(' | '));
});

await finish();
