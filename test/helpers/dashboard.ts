import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { createAccount } from '../../services/accounts/accounts';
import { createUser } from '../../services/dashboard/users';
import { loadSealingKey } from '../../platform/secret-box';
import { env } from '../setup/env';

// Debian's chromium driven by playwright-core, for the gateway dashboard's tests; screenshots go
// to test/artifacts/dashboard (gitignored).

export const ARTIFACTS = path.join(__dirname, '..', 'artifacts', 'dashboard');

/** Registers before/after hooks that launch one headless chromium for the suite. */
export function useBrowser(): { browser: () => Browser } {
  let browser: Browser | null = null;
  before(async function () {
    this.timeout(60_000);
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  });
  after(async () => {
    await browser?.close();
    browser = null;
  });
  return {
    browser: () => {
      if (!browser) throw new Error('the browser is used outside its suite');
      return browser;
    },
  };
}

export interface DashboardUser {
  accountId: string;
  email: string;
  password: string;
  totpSecret?: string;
}

/** An account with credits and an owner (or member) who may sign in to the dashboard. */
export async function dashboardUser(o: { credits?: string; role?: 'owner' | 'member'; totp?: boolean; accountId?: string } = {}): Promise<DashboardUser> {
  const accountId = o.accountId ?? (await createAccount(env.db, { name: `dash-${randomUUID()}`, tier: 'pro', credits: o.credits ?? '1000' })).id;
  const email = `owner-${randomUUID().slice(0, 8)}@example.com`;
  const password = 'correct horse battery';
  const u = await createUser(env.db, loadSealingKey(), { accountId, email, password, role: o.role, totp: o.totp });
  return { accountId, email, password, totpSecret: 'totp_secret' in u ? u.totp_secret : undefined };
}

/** A fresh browser context (cookies of its own) signed in as the user; the page is on the keys page. */
export async function signedIn(browser: Browser, base: string, u: DashboardUser): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  await page.goto(`${base}/dashboard/sign-in`);
  await page.fill('#email', u.email);
  await page.fill('#password', u.password);
  await page.click('button[type=submit]');
  await page.waitForURL(`${base}/dashboard/keys`);
  return { context, page };
}

export const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });

export interface PageWeight {
  /** ms from navigation start to this call (the test calls it once the page can be used) */
  interactive_ms: number;
  requests: number;
  transfer_bytes: number;
  body_bytes: number;
}

/** The weight of the page's last load (the document and every resource) and the time to now, from the browser's performance entries. */
export const pageWeight = (page: Page): Promise<PageWeight> =>
  page.evaluate(`(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const res = performance.getEntriesByType('resource');
    const sum = (k) => res.reduce((a, r) => a + r[k], nav[k]);
    return { interactive_ms: Math.round(performance.now()), requests: res.length + 1, transfer_bytes: sum('transferSize'), body_bytes: sum('decodedBodySize') };
  })()`);
