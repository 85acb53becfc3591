import assert from 'node:assert/strict';
import { parseFlags, stringFlags, UsageError } from '../../platform/cli-args';

// The one argument parser of the command-line tools: both dash spellings, values taken as is,
// switches, and usage errors in the tool's own spelling.

describe('command-line flags (platform/cli-args)', function () {
  const options = { ...stringFlags(['node', 'zone']), json: { type: 'boolean' } } as const;
  const one = (argv: string[], positionals = false) => parseFlags(argv, options, { dash: '-', positionals });

  it('reads -name value, --name value and -name=value; a value may be empty or start with a dash', () => {
    assert.deepEqual(one(['-node', 'web-1', '--zone=', '-json']).values, { node: 'web-1', zone: '', json: true }, 'three spellings');
    assert.deepEqual(one(['-zone', '-a', '--node', '--b']).values, { zone: '-a', node: '--b' }, 'dashed values');
    assert.deepEqual(one(['-json=false', '-node', 'a', '-node', 'b']).values, { json: false, node: 'b' }, 'the last repeat wins; =false');
    assert.deepEqual(one(['drain', '-node', 'a', '--', '-x'], true).positionals, ['drain', '-x'], 'positionals, and words after --');
  });

  it('a mistake is a UsageError naming the flag as the tool spells it', () => {
    const refused = (argv: string[], message: string, dash: '-' | '--' = '-') =>
      assert.throws(() => parseFlags(argv, options, { dash }), (e: unknown) => e instanceof UsageError && e.message === message, `${argv.join(' ')} → ${message}`);
    refused(['-colour', 'red'], 'unknown flag -colour (known: -node, -zone, -json)');
    refused(['--colour=red'], 'unknown flag --colour (known: --node, --zone, --json)', '--');
    refused(['-node'], '-node needs a value');
    refused(['-json=yes'], '-json takes no value (or =true / =false)');
    refused(['stray'], 'unexpected argument "stray"');
    refused(['-toString'], 'unknown flag -toString (known: -node, -zone, -json)');
  });
});
