import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

// The web console's browser tests (test/panel/console/console*.test.ts): a page per fresh context, and
// the page weight and time to interactive of a loaded page.

const ARTIFACTS = path.join(__dirname, '..', '..', 'test-artifacts', 'console');

/** Debian's chromium, headless; the screenshot folder made. */
export function launchChromium(): Promise<Browser> {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  return chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
}

/** A full-page screenshot into test-artifacts/console/<name>.png, to look at. */
export const screenshot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });

/** A page in a fresh context (its own cookies), kept in `contexts` to be closed; uncaught errors go to `errors`. */
export async function newConsolePage(browser: Browser, baseURL: string, contexts: BrowserContext[], errors: string[], timeoutMs = 15_000): Promise<Page> {
  const context = await browser.newContext({ baseURL });
  contexts.push(context);
  const page = await context.newPage();
  page.setDefaultTimeout(timeoutMs);
  page.on('pageerror', (e) => errors.push(e.message));
  return page;
}

export interface PageWeight {
  interactive_ms: number;
  requests: number;
  transfer_bytes: number;
  body_bytes: number;
}

/** What the page loaded since its navigation (document and every resource) and when it got here. */
export function pageWeight(page: Page): Promise<PageWeight> {
  return page.evaluate(`(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const res = performance.getEntriesByType('resource');
    const sum = (k) => res.reduce((a, r) => a + r[k], nav[k]);
    return { interactive_ms: Math.round(performance.now()), requests: res.length + 1, transfer_bytes: sum('transferSize'), body_bytes: sum('decodedBodySize') };
  })()`) as Promise<PageWeight>;
}


/**
 * Loads a page twice with `load` (cold: nothing cached; warm: vendor files from the cache, the
 * console's modules revalidated), writes both figures to test-artifacts/console/page-weight-<name>.json,
 * and checks the weight and that the later load uses the cache.
 */
export async function measurePageWeight(page: Page, name: string, address: string, load: () => Promise<void>, maxBytes = 250_000): Promise<{ cold: PageWeight; warm: PageWeight }> {
  const measure = async () => {
    await load();
    return pageWeight(page);
  };
  const cold = await measure();
  const warm = await measure();
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  fs.writeFileSync(path.join(ARTIFACTS, `page-weight-${name}.json`), JSON.stringify({ page: address, cold, warm }, null, 2));
  console.log(`      ${name} page: cold ${cold.body_bytes} B in ${cold.requests} requests (${cold.transfer_bytes} B transferred), interactive at ${cold.interactive_ms} ms; warm ${warm.transfer_bytes} B transferred, interactive at ${warm.interactive_ms} ms`);
  assert.ok(cold.body_bytes < maxBytes, `the ${name} page weighs ${cold.body_bytes} B`);
  assert.ok(warm.transfer_bytes < cold.transfer_bytes, 'a later load uses the cache');
  return { cold, warm };
}
