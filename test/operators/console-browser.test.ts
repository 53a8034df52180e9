// The operator console in a real headless browser (the Chromium of the @sparticuz/chromium development
// dependency, or CHROMIUM_PATH's, driven by playwright-core) against a real app process on a real Redis: sign
// in, find a locked key, unlock it, see the app admit the key.
// RATEKEEPER_SCREENSHOT=docs/console.png writes the README's screenshot.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import npmChromium from '@sparticuz/chromium';
import { expect } from 'chai';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { OPERATOR_PASSWORD } from '../fixtures/ops-rules.js';
import { type AppProcess, startApp } from '../support/ops.js';
import { getRedis } from '../support/redis.js';

/**
 * The browser: CHROMIUM_PATH when set, else the headless Chromium that @sparticuz/chromium carries in its
 * tarball (unpacked once into the temporary folder), so `npm ci` is all the test needs.
 */
async function chromiumPath(): Promise<string> {
  const given = process.env.CHROMIUM_PATH;
  if (given === undefined) return npmChromium.executablePath();
  if (!existsSync(given)) throw new Error(`no Chromium at CHROMIUM_PATH=${given}`);
  return given;
}
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];
const HOSTILE = '<img src=x onerror=alert(1)>';

describe('operator console in a headless browser', function () {
  this.timeout(90_000);
  let app: AppProcess;
  /** Unset when `before` failed first (no Chromium): then there is nothing to remove. */
  let profile: string | undefined;
  let context: BrowserContext;
  let page: Page;
  const dialogs: string[] = [];
  const console = () => `http://127.0.0.1:${app.port}/ops`;

  before(async () => {
    const executablePath = await chromiumPath();
    const server = await getRedis();
    app = await startApp(server.url, `opsb${randomBytes(4).toString('hex')}`);
    profile = mkdtempSync(join(tmpdir(), 'ratekeeper-chromium-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath,
      headless: true,
      args: FLAGS,
      viewport: { width: 1100, height: 760 },
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    for (const user of ['mallory', 'trudy', HOSTILE])
      for (let i = 0; i < 3; i++) await app.hit('POST', '/login', user);
    await app.hit('POST', '/login', 'walter');
  });
  after(async () => {
    await context?.close();
    if (profile !== undefined) rmSync(profile, { recursive: true, force: true });
    await app?.stop();
  });

  it('refuses the console (403) until the operator signs in through the app', async () => {
    expect((await page.goto(console()))?.status()).to.equal(403);
    await page.goto(`http://127.0.0.1:${app.port}/session`);
    await page.fill('input[name=password]', OPERATOR_PASSWORD);
    await Promise.all([page.waitForURL(console()), page.click('button')]);
    expect(await page.locator('h1').textContent()).to.equal('ratekeeper console: shop-api (staging)');
  });

  it('renders the hostile key as text: no element made from it, no script run', async () => {
    const keys = await page.locator('td.key').allTextContents();
    expect(keys).to.have.members(['mallory', 'trudy', HOSTILE]);
    expect(await page.locator('img').count()).to.equal(0);
    expect(await page.locator('[onerror]').count()).to.equal(0);
    expect(dialogs).to.deep.equal([]);
  });

  it('finds a locked key, looks it up, unlocks it, and the app admits the key at once', async () => {
    expect(await app.hit('POST', '/login', 'mallory')).to.equal(429);
    const row = page.locator('tr', { has: page.locator('td.key', { hasText: /^mallory$/ }) });
    await Promise.all([page.waitForURL(/key=mallory/), row.getByRole('link', { name: 'look up' }).click()]);
    expect(await page.locator('dl').textContent()).to.match(
      /Lockedyes, unlocks in (14m \d+s|15m)Lockout level1/,
    );
    if (process.env.RATEKEEPER_SCREENSHOT)
      await page.screenshot({ path: process.env.RATEKEEPER_SCREENSHOT, fullPage: true });

    await Promise.all([
      page.waitForURL(/done=unlock/),
      page.locator('.result').getByRole('button', { name: 'Unlock' }).click(),
    ]);
    expect(await page.getByRole('status').textContent()).to.equal(
      "Unlock sent for 'mallory' (rule login); its state now is below.",
    );
    expect(await page.locator('dl').textContent()).to.match(/Lockedno/);
    expect(await app.hit('POST', '/login', 'mallory'), 'the app, right after the click').to.equal(200);
    expect(await page.locator('td.key').allTextContents()).to.have.members(['trudy', HOSTILE]);
  });

  it('refuses (403) a form sent without its CSRF token, and a request made without one, changing nothing', async () => {
    await page.goto(console());
    const row = page.locator('tr', { has: page.locator('td.key', { hasText: /^trudy$/ }) });
    await row.locator('input[name=csrf]').evaluate((input) => input.remove());
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST'),
      row.getByRole('button', { name: 'Unlock' }).click(),
    ]);
    expect(response.status()).to.equal(403);
    expect(await page.getByRole('alert').textContent()).to.equal(
      'Refused: the CSRF token is missing. Nothing was changed.',
    );
    const forged = await page.request.post(console(), {
      form: { action: 'unlock', rule: 'login', key: 'trudy' },
    });
    expect(forged.status()).to.equal(403);
    expect(await app.hit('POST', '/login', 'trudy'), 'still locked').to.equal(429);
    expect(await page.locator('td.key').allTextContents()).to.include('trudy');
    expect(dialogs).to.deep.equal([]);
  });
});
