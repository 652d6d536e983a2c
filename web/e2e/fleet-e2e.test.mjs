// The fleet console in real headless Chromium: a person signs in to a
// termd-gateway serving several hosts, finds a plan of one host in the one
// approval queue (with its host), and approves it there. Run by
// daemon/e2e/fleet_test.go (TestFleetEndToEnd), which starts the hosts in
// network namespaces and the gateway over mutual TLS, and passes
// TERMD_CONSOLE_URL, TERMD_CONSOLE_TOKEN, TERMD_FLEET_HOST and
// TERMD_FLEET_PLAN (the plan to approve). Screenshots go to artifacts/.
import { chromium } from 'playwright-core';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const url = process.env.TERMD_CONSOLE_URL;
const token = process.env.TERMD_CONSOLE_TOKEN;
const host = process.env.TERMD_FLEET_HOST;
const planId = process.env.TERMD_FLEET_PLAN;
if (!url || !token || !host || !planId) {
  console.error('set TERMD_CONSOLE_URL, TERMD_CONSOLE_TOKEN, TERMD_FLEET_HOST and TERMD_FLEET_PLAN');
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
const artifacts = process.env.TERMD_ARTIFACTS || join(here, 'artifacts');
mkdirSync(artifacts, { recursive: true });
const profile = mkdtempSync(join(tmpdir(), 'termd-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1366, height: 900 },
});
const page = context.pages()[0] || await context.newPage();
page.setDefaultTimeout(30000);
const errors = [];
page.on('pageerror', (e) => errors.push('page error: ' + e.message));
let step = 0;
const shot = (name) => page.screenshot({ path: join(artifacts, 'fleet-' + String(++step).padStart(2, '0') + '-' + name + '.png'), fullPage: true });
function must(cond, msg) { if (!cond) throw new Error(msg); }

let code = 0;
try {
  await page.goto(url);
  await page.waitForSelector('#token');
  await page.fill('#token', token);
  await page.keyboard.press('Enter');
  await page.locator('#live.on').waitFor();
  await page.getByRole('link', { name: /Approvals/ }).click();
  const item = page.locator(`article[data-plan="${planId}"]`);
  await item.waitFor();
  const text = await item.textContent();
  must(text.includes(host), `the queue item of plan ${planId} does not name its host ${host}: ${text}`);
  await shot('fleet-approval-queue');
  await item.getByRole('button', { name: 'Approve' }).click();
  await item.waitFor({ state: 'detached' });
  await shot('fleet-approved');
  must(errors.length === 0, 'errors on the page: ' + errors.join('; '));
  console.log(`approved plan ${planId} of ${host} in the console`);
} catch (e) {
  code = 1;
  console.log('FAIL: ' + (e.stack || e));
  await shot('FAILED').catch(() => {});
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(code);
