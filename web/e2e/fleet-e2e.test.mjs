// The fleet console in the fleet end-to-end test (daemon/e2e/fleet_test.go,
// TestFleetEndToEnd), in real headless Chromium: hosts in network
// namespaces behind one termd-gateway over mutual TLS. A person signs in,
// sees every host up on the Hosts page, finds an agent's plan in the one
// approval queue with its host, and approves it there (the agent then runs
// it on its host). Environment: TERMD_CONSOLE_URL, TERMD_CONSOLE_TOKEN,
// TERMD_FLEET_HOSTS (comma-separated), TERMD_FLEET_HOST and TERMD_FLEET_PLAN
// (the plan to approve and its host).
import { launch, must } from './browser.mjs';

const url = process.env.TERMD_CONSOLE_URL;
const token = process.env.TERMD_CONSOLE_TOKEN;
const hosts = (process.env.TERMD_FLEET_HOSTS || '').split(',').filter(Boolean);
const host = process.env.TERMD_FLEET_HOST;
const planId = process.env.TERMD_FLEET_PLAN;
if (!url || !token || !host || !planId || hosts.length === 0) {
  console.error('set TERMD_CONSOLE_URL, TERMD_CONSOLE_TOKEN, TERMD_FLEET_HOSTS, TERMD_FLEET_HOST and TERMD_FLEET_PLAN');
  process.exit(2);
}
const { page, consoleErrors, shot, test, finish } = await launch('fleet-e2e-');

await test('sign in: every host up', async () => {
  await page.goto(url);
  await page.fill('#token', token);
  await page.keyboard.press('Enter');
  await page.locator('#live.on').waitFor();
  await page.getByRole('link', { name: /Hosts/ }).click();
  for (const n of hosts) await page.locator('#hosts tr[data-host="' + n + '"][data-state="up"]').waitFor();
  await shot('hosts-up');
});

await test('the agent\'s plan in the one queue, with its host; approved there', async () => {
  await page.getByRole('link', { name: /Approvals/ }).click();
  const item = page.locator('#approval-queue .queue-item[data-plan="' + planId + '"]');
  await item.waitFor();
  must(await item.getAttribute('data-host') === host, 'plan ' + planId + ' is in the queue as host ' + await item.getAttribute('data-host') + ', want ' + host);
  await item.locator('.badge.host', { hasText: host }).waitFor();
  await shot('fleet-queue');
  await item.getByRole('button', { name: 'Approve' }).click();
  await item.waitFor({ state: 'detached' });
  await shot('approved');
  must(consoleErrors.length === 0, 'errors on the page: ' + consoleErrors.join('; '));
});

await finish();
