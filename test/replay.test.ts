import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import type { WorkflowDomain } from '../workers/base';
import { env } from './setup/env';

// Replays every committed workflow history (test/histories/<domain>/*.json, recorded by
// test/histories/record.ts) against today's bundle of its domain: a workflow change that would
// break workflows already running fails here (use patched() for such changes).

const DOMAINS: WorkflowDomain[] = ['credits', 'media', 'testruns', 'panel'];
const ROOT = path.join(__dirname, 'histories');

describe('replay of committed workflow histories', function () {
  for (const domain of DOMAINS) {
    const dir = path.join(ROOT, domain);
    const files = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.json')) : [];

    it(`${domain}: ${files.length} histories replay without non-determinism`, async function () {
      assert.ok(files.length > 0, `no committed histories in test/histories/${domain}`);
      const histories = files.map((f) => {
        const saved = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as { workflowId: string; protobuf: string };
        return { workflowId: saved.workflowId, history: temporal.api.history.v1.History.decode(Buffer.from(saved.protobuf, 'base64')) };
      });
      const results = Worker.runReplayHistories({ workflowBundle: env.bundles[domain] }, histories);
      let replayed = 0;
      for await (const r of results) {
        assert.equal(r.error, undefined, `${r.workflowId}: ${String(r.error)}`);
        replayed++;
      }
      assert.equal(replayed, files.length, 'every committed history of this workflow type replayed');
    });
  }
});
