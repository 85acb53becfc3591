import assert from 'node:assert/strict';
import { SIMULATOR_MODELS } from '../../simulator/catalog';
import { newAccount, useStack } from '../helpers/stack';
import { env } from '../setup/env';
import { CASES } from './drivers';
import { CLIENT_NAMES, installClient, PINS, type ClientName, type InstalledClient } from './install';
import { startSuite, type Suite } from './suite';

// Issue 29 item 7 in `npm test`: the pinned Claude Code, Codex and llm, configured by the gateway's
// own install.sh in a throwaway HOME, on every text model of the simulator catalog (native and
// translated routes): a text prompt, a tool round trip with the client's own tool, a streamed
// answer; no refusal, one settled charge per answer, the client's usage equal to the gateway's,
// no traffic to another host (suite.ts). `npm run clients` runs the same cases on a whole
// `npm start` system and writes the table (test/clients/results.md).

const TEXT_MODELS = SIMULATOR_MODELS.filter((m) => m.capabilities.includes('text')).map((m) => m.id);

describe('real clients through the gateway (pinned versions)', function () {
  this.timeout(180_000);
  const stack = useStack();
  const installed = new Map<ClientName, InstalledClient>();
  const homes = new Map<ClientName, string>();
  let suite: Suite | undefined;

  before(async function () {
    // A machine's first run downloads the clients (~270 MB); later runs find them in .tools/clients.
    this.timeout(900_000);
    for (const name of CLIENT_NAMES) installed.set(name, await installClient(name, PINS[name]));
    const account = await newAccount({ credits: '1000' });
    suite = await startSuite({ gatewayUrl: stack.gateway.url, db: env.db, key: account.key, keyId: account.keyId });
    const missing = TEXT_MODELS.filter((m) => !suite!.catalog.includes(m));
    assert.deepEqual(missing, [], 'GET /v1/models lists every text model of the simulator catalog');
    for (const name of CLIENT_NAMES) homes.set(name, await suite.prepareHome(name, TEXT_MODELS));
  });

  after(async () => {
    await suite?.close();
  });

  for (const client of CLIENT_NAMES) {
    for (const model of TEXT_MODELS) {
      for (const c of CASES) {
        it(`${client} ${PINS[client]} · ${model} · ${c}`, async () => {
          const row = await suite!.runCase(client, installed.get(client)!.bin, homes.get(client)!, model, c);
          assert.ok(row.ok, `${client} ${model} ${c}: ${row.reasons.join('; ')}`);
        });
      }
    }
  }
});
