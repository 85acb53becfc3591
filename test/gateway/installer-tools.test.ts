import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { load as loadYaml } from 'js-yaml';
import { backupsOf, downloadShellScripts, filesUnder, runScript, snapshot } from '../helpers/installer';
import { newAccount, useStack, type TestAccount } from '../helpers/stack';

// The installer's llm and aider steps (issue 29 item 6), and the rule for every tool that the
// uninstaller deletes a file the installer created once nothing else is in it. The real scripts,
// downloaded from a real gateway, run with bash in a throwaway HOME; the YAML they write is read
// back with a YAML parser, as llm and aider read it.

const OTHER_KEY = 'sk-proj-abcdefghijklmnopqrstuvwxyz012345';
const LLM = path.join('.config', 'io.datasette.llm');
const ORIGINAL = {
  llmModels: '# my models\n- model_id: local-orca\n  model_name: orca-mini\n  api_base: "http://localhost:8081"\n',
  llmKeys: JSON.stringify({ openai: OTHER_KEY }, null, 2) + '\n',
  aider: `model: gpt-4o\nopenai-api-key: ${OTHER_KEY}\ndark-mode: true\n`,
};

type LlmEntry = { model_id: string; model_name: string; api_base?: string; api_key_name?: string; supports_tools?: boolean };

describe('installer: llm and aider, and files the installer created', function () {
  this.timeout(60_000);
  const stack = useStack();
  let base: string;
  let acct: TestAccount;
  let dir: string;

  before(async () => {
    base = stack.gateway.url;
    acct = await newAccount();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-installer-tools-'));
    await downloadShellScripts(base, dir);
  });
  after(() => {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const newHome = () => fs.mkdtempSync(path.join(dir, 'home-'));
  const run = (script: string, args: string[], home: string, env?: Record<string, string>) => runScript(dir, script, args, home, { env });
  const install = (home: string, apps: string, env?: Record<string, string>) => run('install.sh', ['--key', acct.key, '--apps', apps, '--models', 'sim-gpt,sim-gpt-mini', '--yes'], home, env);
  const read = (home: string, rel: string) => fs.readFileSync(path.join(home, rel), 'utf8');

  /** A HOME where llm and aider are already configured by the user (other providers' keys included). */
  function userHome(): string {
    const home = newHome();
    fs.mkdirSync(path.join(home, LLM), { recursive: true });
    fs.writeFileSync(path.join(home, LLM, 'extra-openai-models.yaml'), ORIGINAL.llmModels);
    fs.writeFileSync(path.join(home, LLM, 'keys.json'), ORIGINAL.llmKeys);
    fs.writeFileSync(path.join(home, '.aider.conf.yml'), ORIGINAL.aider);
    return home;
  }

  it('llm: an extra-openai-models.yaml entry per chosen model and the key in keys.json; aider: endpoint, key and model; the user content kept', async () => {
    const home = userHome();
    const r = await install(home, 'llm,aider');
    assert.equal(r.code, 0, r.stdout + r.stderr);

    const models = loadYaml(read(home, path.join(LLM, 'extra-openai-models.yaml'))) as LlmEntry[];
    assert.deepEqual(
      models,
      [
        { model_id: 'local-orca', model_name: 'orca-mini', api_base: 'http://localhost:8081' },
        { model_id: 'gateway/sim-gpt', model_name: 'sim-gpt', api_base: `${base}/v1`, api_key_name: 'gateway', supports_tools: true },
        { model_id: 'gateway/sim-gpt-mini', model_name: 'sim-gpt-mini', api_base: `${base}/v1`, api_key_name: 'gateway', supports_tools: true },
      ],
      "the user's entry, then one per chosen model, as llm reads them",
    );
    assert.deepEqual(JSON.parse(read(home, path.join(LLM, 'keys.json'))), { openai: OTHER_KEY, gateway: acct.key }, 'keys.json: the key named by api_key_name beside the user keys');

    const aiderText = read(home, '.aider.conf.yml');
    assert.deepEqual(
      loadYaml(aiderText),
      { 'dark-mode': true, 'openai-api-base': `${base}/v1`, 'openai-api-key': acct.key, model: 'openai/sim-gpt' },
      'aider reads the gateway settings, the user keys stay',
    );
    assert.ok(aiderText.includes(`# [gateway] model: gpt-4o\n# [gateway] openai-api-key: ${OTHER_KEY}\n`), `the user's own lines are commented out: ${aiderText}`);

    // Backups: the YAML list (no key in it) is copied; files holding another provider's key are not.
    assert.equal(backupsOf(path.join(home, LLM, 'extra-openai-models.yaml')).length, 1, 'the models file is backed up');
    assert.deepEqual(backupsOf(path.join(home, LLM, 'keys.json')), [], 'keys.json holds an OpenAI key: not copied');
    assert.deepEqual(backupsOf(path.join(home, '.aider.conf.yml')), [], '.aider.conf.yml holds an OpenAI key: not copied');
    assert.ok(!r.stdout.includes(acct.key), 'the key is masked in the output');
    assert.match(r.stdout, /llm -m gateway\/sim-gpt/, 'says how to call it');

    // Idempotent; then uninstall restores what the user had.
    const installed = snapshot(home);
    const again = await install(home, 'llm,aider');
    assert.equal(again.code, 0, again.stdout + again.stderr);
    assert.deepEqual(snapshot(home), installed, 'a second run writes nothing');

    const u = await run('uninstall.sh', ['--level', 'entries', '--apps', 'llm,aider', '--yes'], home);
    assert.equal(u.code, 0, u.stdout + u.stderr);
    assert.equal(read(home, path.join(LLM, 'extra-openai-models.yaml')), ORIGINAL.llmModels, 'the models file is as before');
    assert.deepEqual(JSON.parse(read(home, path.join(LLM, 'keys.json'))), JSON.parse(ORIGINAL.llmKeys), 'keys.json holds the user keys only');
    assert.equal(read(home, '.aider.conf.yml'), ORIGINAL.aider, "aider's file is as before, the user's lines restored");
  });

  it('llm follows LLM_USER_PATH (keys.json edited by node here); a models file that is no block list is left alone with a message', async () => {
    const home = newHome();
    const custom = path.join(home, 'llm-dir');
    const r = await install(home, 'llm', { LLM_USER_PATH: custom, GATEWAY_JSON_TOOL: 'node' });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(JSON.parse(fs.readFileSync(path.join(custom, 'keys.json'), 'utf8')), { gateway: acct.key }, 'node writes keys.json as python3 does');
    assert.equal((loadYaml(fs.readFileSync(path.join(custom, 'extra-openai-models.yaml'), 'utf8')) as LlmEntry[]).length, 2, 'two entries where LLM_USER_PATH points');
    assert.equal(fs.statSync(path.join(custom, 'keys.json')).mode & 0o777, 0o600, 'a new keys.json is readable by its owner only');
    assert.ok(!fs.existsSync(path.join(home, LLM)), 'nothing in the default place');

    const flow = newHome();
    fs.mkdirSync(path.join(flow, LLM), { recursive: true });
    fs.writeFileSync(path.join(flow, LLM, 'extra-openai-models.yaml'), '[{model_id: a, model_name: b}]\n');
    const before = snapshot(flow);
    const s = await install(flow, 'llm');
    assert.equal(s.code, 0, s.stdout + s.stderr);
    assert.match(s.stdout, /\[skipped\]\s+llm\s+~\/\.config\/io\.datasette\.llm\/extra-openai-models\.yaml is not a list/, 'says why');
    assert.deepEqual(snapshot(flow), before, 'nothing written');
  });

  it('uninstall deletes the files the installer created once nothing else is in them (every tool), and keeps one the user added to', async () => {
    const home = newHome();
    const r = await run('install.sh', ['--key', acct.key, '--all', '--models', 'sim-gpt', '--yes'], home);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const created = ['.aider.conf.yml', path.join('.claude', 'settings.json'), path.join('.codex', 'config.toml'), path.join(LLM, 'extra-openai-models.yaml'), path.join(LLM, 'keys.json'), '.profile'];
    const manifest = path.join('.local', 'state', 'gateway-installer', 'created-files');
    assert.deepEqual(filesUnder(home), [...created, manifest].sort(), 'the installer created a file per tool and lists them');
    assert.deepEqual(read(home, manifest).trim().split('\n').sort(), created.map((f) => path.join(home, f)).sort(), 'the list of created files');
    for (const f of created) assert.equal(fs.statSync(path.join(home, f)).mode & 0o777, 0o600, `${f} is readable by its owner only`);

    // The user adds a line of their own to one of them.
    fs.appendFileSync(path.join(home, '.profile'), "alias ll='ls -l'\n");
    const dry = await run('uninstall.sh', ['--level', 'entries', '--all', '--dry-run'], home);
    assert.equal(dry.code, 0, dry.stdout + dry.stderr);
    assert.match(dry.stdout, /\[would change\]\s+aider\s+~\/\.aider\.conf\.yml: delete it \(the installer created it and nothing else is in it\)/, 'the plan says so');
    assert.match(dry.stdout, /\[would change\]\s+shell\s+~\/\.profile: remove the gateway entries/, 'the file with user content is only cleaned');

    const u = await run('uninstall.sh', ['--level', 'entries', '--all', '--yes'], home);
    assert.equal(u.code, 0, u.stdout + u.stderr);
    const left = filesUnder(home);
    assert.equal(left[0], '.profile', `every created file is gone (and the list), except the one holding user content: ${left.join(', ')}`);
    assert.equal(left.length, 2, `no backups of the deleted ones: ${left.join(', ')}`);
    assert.match(left[1], /^\.profile\.bak-\d{8}-\d{6}$/, 'the kept file was copied before it was written, as always');
    assert.equal(read(home, '.profile'), "alias ll='ls -l'\n", 'only the user line is left');
    assert.match(u.stdout, /deleted ~\/\.claude\/settings\.json \(the installer created it\)/, 'reported per file');

    // A file that existed before the installer is never deleted, even when only its entries were in it.
    const existing = newHome();
    fs.writeFileSync(path.join(existing, '.aider.conf.yml'), '');
    assert.equal((await install(existing, 'aider')).code, 0, 'installed into the existing empty file');
    const again = await run('uninstall.sh', ['--level', 'entries', '--apps', 'aider', '--yes'], existing);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    assert.equal(read(existing, '.aider.conf.yml'), '', 'the pre-existing file is kept, empty as it was');
  });
});
