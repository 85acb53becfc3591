// Reports of the CI CLI (admin/testrun-cli.ts): JUnit XML for CI test viewers and a JSON report.

/** The parts of GET /api/runs/:id a report uses. */
export interface RunAnswer {
  id: string;
  status: string;
  final: boolean;
  reason?: string | null;
  counts: { total: number; passed: number; failed: number; errored: number; not_run: number; pending?: number };
  timestamps?: Record<string, string | null>;
  configuration?: unknown;
  cases: Array<{ case_id: string; name: string; status: string; reasons: string[]; latency_ms?: number | null; http_status?: number | null; cost?: string | null; attempts?: number }>;
}

export const EXIT = { passed: 0, failed: 1, error: 2, lost: 3, usage: 4 } as const;

/** 0 passed, 1 failed, 2 error, 3 timed_out / canceled / lost sight of the run. Nothing else is success. */
export function exitCodeFor(outcome: string): number {
  if (outcome === 'passed') return EXIT.passed;
  if (outcome === 'failed') return EXIT.failed;
  if (outcome === 'timed_out' || outcome === 'canceled' || outcome === 'lost') return EXIT.lost;
  return EXIT.error;
}

const esc = (s: string) =>
  s
    // XML 1.0 forbids most control characters even as references.
    .replace(/[^\t\n\r\x20-\ud7ff\ue000-\ufffd\u{10000}-\u{10ffff}]/gu, '\ufffd')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;');

const seconds = (ms: number | null | undefined) => ((ms ?? 0) / 1000).toFixed(3);

/**
 * One testsuite, one testcase per case: failed → <failure>, errored → <error>, not run or still
 * pending → <skipped>. A run that did not pass for a reason no case shows (timed out, canceled,
 * error, lost sight of) gets one more testcase `(run)` with an <error>, so no viewer shows it green.
 */
export function junitXml(project: string, run: RunAnswer | null, outcome: string, note: string | null): string {
  const cases = run?.cases ?? [];
  const lines: string[] = [];
  let failures = 0;
  let errors = 0;
  let skipped = 0;
  let time = 0;
  for (const c of cases) {
    time += c.latency_ms ?? 0;
    const message = esc(c.reasons.join('; '));
    const body = esc(c.reasons.join('\n'));
    let inner = '';
    if (c.status === 'failed') {
      failures++;
      inner = `<failure message="${message}" type="assertion">${body}</failure>`;
    } else if (c.status === 'errored') {
      errors++;
      inner = `<error message="${message}" type="errored">${body}</error>`;
    } else if (c.status !== 'passed') {
      skipped++;
      inner = `<skipped message="${esc(c.status === 'not_run' ? `not run: ${c.reasons.join('; ')}` : 'no result: the run did not finish')}"/>`;
    }
    lines.push(`    <testcase name="${esc(c.name)}" classname="${esc(project)}" time="${seconds(c.latency_ms)}">${inner}</testcase>`);
  }
  const explained = outcome === 'passed' || (outcome === 'failed' && failures > 0);
  if (!explained) {
    errors++;
    const why = `run ${outcome}${run?.reason ? `: ${run.reason}` : ''}${note ? ` (${note})` : ''}`;
    lines.push(`    <testcase name="(run)" classname="${esc(project)}" time="0"><error message="${esc(why)}" type="${esc(outcome)}">${esc(why)}</error></testcase>`);
  }
  const tests = cases.length + (explained ? 0 : 1);
  const props = [
    ['run_id', run?.id ?? ''],
    ['status', run?.status ?? ''],
    ['outcome', outcome],
    ['configuration', run?.configuration ? JSON.stringify(run.configuration) : ''],
  ]
    .map(([k, v]) => `      <property name="${k}" value="${esc(v)}"/>`)
    .join('\n');
  const attrs = `tests="${tests}" failures="${failures}" errors="${errors}" skipped="${skipped}" time="${seconds(time)}"`;
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="${esc(`test run ${run?.id ?? '(not created)'}`)}" ${attrs}>`,
    `  <testsuite name="${esc(project)}" id="${esc(run?.id ?? '')}" ${attrs}${run?.timestamps?.created_at ? ` timestamp="${esc(run.timestamps.created_at)}"` : ''}>`,
    `    <properties>\n${props}\n    </properties>`,
    ...lines,
    '  </testsuite>',
    '</testsuites>',
    '',
  ].join('\n');
}

export function jsonReport(o: { project: string; baseUrl: string; run: RunAnswer | null; outcome: string; exitCode: number; note: string | null; startedAt: Date }) {
  return (
    JSON.stringify(
      {
        project: o.project,
        base_url: o.baseUrl,
        run_id: o.run?.id ?? null,
        outcome: o.outcome,
        exit_code: o.exitCode,
        note: o.note,
        started_at: o.startedAt.toISOString(),
        finished_at: new Date().toISOString(),
        run: o.run,
      },
      null,
      2,
    ) + '\n'
  );
}
