// Browser test of the console over a fleet: one termd-gateway in front of
// three termd daemons (hosts a, b, c), in real headless Chromium. Run by
// gateway/browser_test.go (TestFleetConsoleInBrowser), which starts the
// daemons and the gateway and stops and restarts host c when this script
// asks: it prints "@@ stop c" or "@@ restart c" and waits for the file
// TERMD_FLEET_CTL/ack-N. Screenshots go to artifacts/fleet-*.png.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { launch, must } from './browser.mjs';

const url = process.env.TERMD_CONSOLE_URL;
const token = process.env.TERMD_CONSOLE_TOKEN;
const ctl = process.env.TERMD_FLEET_CTL;
const work = { a: process.env.TERMD_WORKSPACE_A, b: process.env.TERMD_WORKSPACE_B };
if (!url || !token || !ctl || !work.a || !work.b) {
  console.error('set TERMD_CONSOLE_URL, TERMD_CONSOLE_TOKEN, TERMD_FLEET_CTL, TERMD_WORKSPACE_A and TERMD_WORKSPACE_B');
  process.exit(2);
}
const { page, consoleErrors, shot, test, finish } = await launch('fleet-');
let acks = 0;

// ask has the Go test stop or restart a daemon and waits until it has.
async function ask(what) {
  acks++;
  const ack = join(ctl, 'ack-' + acks);
  console.log('@@ ' + what);
  for (let i = 0; i < 1200 && !existsSync(ack); i++) await new Promise((r) => setTimeout(r, 100));
  must(existsSync(ack), 'the test did not ' + what);
}

// planOn asks host for a write in confirm mode through the gateway's REST
// route of that host: a plan awaiting approval.
async function planOn(host, file) {
  const res = await fetch(url + '/v1/hosts/' + host + '/plans', {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
    body: JSON.stringify({ request: { argv: ['touch', file], mode: 'MODE_CONFIRM' } }),
  });
  const j = await res.json();
  must(res.ok && j.plan?.state === 'PLAN_STATE_AWAITING_APPROVAL', 'plan on ' + host + ': ' + res.status + ' ' + JSON.stringify(j));
  return j.plan.id;
}

const hostRow = (name) => page.locator('#hosts tr[data-host="' + name + '"]');
const queueItem = (host) => page.locator('#approval-queue .queue-item[data-host="' + host + '"]');
const ids = {};

await test('sign in to a fleet: the host selector and the Hosts page', async () => {
  await page.goto(url);
  await page.fill('#token', token);
  await page.keyboard.press('Enter');
  await page.waitForSelector('#plan-form');
  await page.locator('#live.on').waitFor();
  await page.locator('#host-picker').waitFor();
  const opts = await page.locator('#host-select option').allTextContents();
  must(opts.join(',') === 'a,b,c', 'host selector options: ' + opts.join(','));
  must(await page.locator('#host-select').inputValue() === 'a', 'the default host is not selected');
  await page.getByRole('link', { name: /Hosts/ }).click();
  for (const n of ['a', 'b', 'c']) await hostRow(n).and(page.locator('[data-state="up"]')).waitFor();
  await shot('hosts-up');
});

await test('one approval queue with every host\'s plans, each with its host, filterable', async () => {
  for (const n of ['a', 'b', 'c']) ids[n] = await planOn(n, 'fleet-' + n + '.txt');
  await page.locator('#approval-count', { hasText: /^3$/ }).waitFor();
  await page.getByRole('link', { name: /Approvals/ }).click();
  for (const n of ['a', 'b', 'c']) {
    const item = queueItem(n);
    await item.waitFor();
    must(await item.getAttribute('data-plan') === ids[n], 'host ' + n + "'s queue item is not its plan");
    await item.locator('.badge.host', { hasText: 'host ' + n }).waitFor();
  }
  await shot('fleet-queue');
  await page.selectOption('#host-filter', 'b');
  await queueItem('a').waitFor({ state: 'detached' });
  must(await page.locator('#approval-queue .queue-item').count() === 1, 'the b filter shows other hosts');
  await queueItem('b').waitFor();
  await shot('fleet-queue-b');
  await page.selectOption('#host-filter', '');
  await queueItem('a').waitFor();
});

await test('approving b\'s plan runs it on b', async () => {
  const item = queueItem('b');
  await item.getByRole('button', { name: 'Approve' }).click();
  await item.waitFor({ state: 'detached' });
  const note = page.locator('#approved .notice');
  await note.waitFor();
  await note.getByRole('button', { name: 'Run it now' }).click();
  await page.waitForURL(url + '/plans/' + ids.b + '?host=b');
  await page.locator('#exec-title .badge', { hasText: 'succeeded' }).waitFor();
  must(await page.locator('#host-select').inputValue() === 'b', 'the plan page of b does not show host b');
  must(existsSync(join(work.b, 'fleet-b.txt')), "b's file was not made on b");
  must(!existsSync(join(work.a, 'fleet-b.txt')), "b's plan ran on a");
  await page.locator('#receipt-verdict', { hasText: 'Receipt verified' }).waitFor();
  await shot('ran-on-b');
});

await test('a stopped host is shown down; the others stay served', async () => {
  await page.getByRole('link', { name: /Approvals/ }).click();
  await queueItem('c').waitFor();
  await ask('stop c');
  await page.locator('.host-unreachable[data-host="c"]').waitFor();
  await queueItem('c').waitFor({ state: 'detached' });
  await queueItem('a').waitFor();
  await page.locator('#hosts-down', { hasText: /^1$/ }).waitFor();
  await shot('queue-c-down');
  await page.getByRole('link', { name: /Hosts/ }).click();
  await hostRow('c').and(page.locator('[data-state="down"]')).waitFor();
  await hostRow('c').locator('.host-error').waitFor();
  await hostRow('a').and(page.locator('[data-state="up"]')).waitFor();
  await shot('hosts-c-down');
  // b is still served: its page, through the selector.
  await page.selectOption('#host-select', 'b');
  await page.getByRole('link', { name: 'Plans', exact: true }).click();
  await page.locator('a[href="/plans/' + ids.b + '"]').waitFor();
});

await test('after its restart, c is up and its events resume', async () => {
  await ask('restart c');
  await page.getByRole('link', { name: /Hosts/ }).click();
  await hostRow('c').and(page.locator('[data-state="up"]')).waitFor();
  await page.waitForFunction(() => document.getElementById('hosts-down').textContent === '');
  await page.getByRole('link', { name: /Approvals/ }).click();
  await page.locator('.host-unreachable').waitFor({ state: 'detached' });
  await queueItem('a').waitFor();
  // A plan made on c now reaches the open page through c's resumed events.
  const before = await page.locator('#approval-queue .queue-item').count();
  ids.c2 = await planOn('c', 'after-restart.txt');
  await page.locator('#approval-queue .queue-item[data-plan="' + ids.c2 + '"][data-host="c"]').waitFor();
  must(await page.locator('#approval-queue .queue-item').count() > before, 'the queue did not grow');
  await shot('c-back');
});

await test('no script errors', async () => {
  // 401/403: the sign-in checks; 503: calls to c while it was down.
  const relevant = consoleErrors.filter((e) => !/status of (40[13]|503)/.test(e));
  must(relevant.length === 0, 'console errors: ' + [...new Set(relevant)].join(' | '));
});

await finish();
