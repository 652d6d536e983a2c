// browser.mjs: what the console's browser tests share (console.test.mjs,
// fleet.test.mjs): a headless Chromium page on a fresh profile, numbered
// screenshots in artifacts/ (gitignored), named steps that count failures,
// the page's script errors, and the run's end with its exit code.
import { chromium } from 'playwright-core';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

export const T = 30000;

export function must(cond, msg) { if (!cond) throw new Error(msg); }

// launch opens the browser; screenshots are named PREFIX + step + name.
export async function launch(prefix = '') {
  const here = dirname(fileURLToPath(import.meta.url));
  const artifacts = process.env.TERMD_ARTIFACTS || join(here, 'artifacts');
  mkdirSync(artifacts, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), 'termd-chromium-'));
  // A fresh profile directory per run (playwright passes it as --user-data-dir).
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1366, height: 900 },
    acceptDownloads: true,
  });
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(T);
  const consoleErrors = [];
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push('page error: ' + e.message));
  let step = 0;
  let failures = 0;
  async function shot(name) {
    step++;
    const file = join(artifacts, prefix + String(step).padStart(2, '0') + '-' + name + '.png');
    await page.screenshot({ path: file, fullPage: true });
    console.log('  screenshot', file);
  }
  async function test(name, fn) {
    console.log('- ' + name);
    try {
      await fn();
      console.log('  ok');
    } catch (e) {
      failures++;
      console.log('  FAIL: ' + (e.stack || e));
      await shot('FAILED-' + name.replace(/\W+/g, '-')).catch(() => {});
    }
  }
  async function finish() {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
    console.log(failures ? `${failures} failed` : 'all passed');
    process.exit(failures ? 1 : 0);
  }
  return { page, context, consoleErrors, shot, test, finish };
}
