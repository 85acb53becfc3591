import type { Browser, BrowserContext, Page } from 'playwright-core';

// The web console's browser tests (test/panel/console*.test.ts): a page per fresh context, and
// the page weight and time to interactive of a loaded page.

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
