import type { Page } from 'playwright-core';

// What a console page cost the browser that just loaded it: requests, bytes over the wire and
// decoded, and the moment it was ready for input (read after the test saw its first control).

export interface PageLoadFigures {
  interactive_ms: number;
  requests: number;
  transfer_bytes: number;
  body_bytes: number;
}

export function pageLoadFigures(page: Page): Promise<PageLoadFigures> {
  return page.evaluate(`(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const res = performance.getEntriesByType('resource');
    const sum = (k) => res.reduce((a, r) => a + r[k], nav[k]);
    return { interactive_ms: Math.round(performance.now()), requests: res.length + 1, transfer_bytes: sum('transferSize'), body_bytes: sum('decodedBodySize') };
  })()`) as Promise<PageLoadFigures>;
}
