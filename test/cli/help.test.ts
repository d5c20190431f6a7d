// `keyroll --help` and usage errors: every command is listed, every command's help documents
// the exit codes, and a usage mistake exits 2 before anything is contacted.
import { describe, expect, it } from 'vitest';
import { useCliFixture } from './harness.ts';

const COMMANDS = ['run', 'rotate', 'identify', 'daemon', 'plan', 'validate', 'status', 'emulator', 'demo'];
// Commands that rotate or read keys once share the four exit codes of docs/exit-codes.md.
const KEY_COMMANDS = ['run', 'rotate', 'identify', 'plan', 'validate', 'status', 'demo'];

const cli = useCliFixture();

function expectExitCodesListed(text: string): void {
  expect(text).toContain('Exit codes:');
  expect(text).toMatch(/^\s+0\s+success/m);
  expect(text).toMatch(/^\s+1\s+some keys failed/m);
  expect(text).toMatch(/^\s+2\s+usage or configuration error/m);
  expect(text).toMatch(/^\s+3\s+aborted/m);
}

describe('keyroll --help', () => {
  it('bin/keyroll --help lists every command and the exit codes, and exits 0', async () => {
    const result = await cli.run(['--help'], { viaBin: true });
    expect(result.code).toBe(0);
    const listed = [...result.stdout.matchAll(/^ {2}(\w+) \[options\]/gm)].map((m) => m[1]);
    expect(listed.sort()).toEqual(expect.arrayContaining([...COMMANDS].sort()));
    expectExitCodesListed(result.stdout);
  });

  it.each(KEY_COMMANDS)('%s --help documents the exit codes', async (command) => {
    const result = await cli.run([command, '--help']);
    expect(result.code).toBe(0);
    expectExitCodesListed(result.stdout);
  });

  it('daemon --help documents its exit codes (a service has no "some keys failed")', async () => {
    const result = await cli.run(['daemon', '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('Exit codes:');
    expect(result.stdout).toMatch(/^\s+0\s+stopped cleanly/m);
    expect(result.stdout).toMatch(/^\s+2\s+usage or configuration error/m);
    expect(result.stdout).toMatch(/^\s+3\s+/m);
  });

  it('emulator --help documents its two exit codes', async () => {
    const result = await cli.run(['emulator', '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('Exit codes:');
    expect(result.stdout).toMatch(/^\s+0\s+stopped by SIGINT or SIGTERM/m);
    expect(result.stdout).toMatch(/^\s+2\s+bad flag/m);
  });

  it('identify --help documents the no-match code 4 and reads the value from stdin only', async () => {
    const result = await cli.run(['identify', '--help']);
    expect(result.stdout).toMatch(
      /^\s+4\s+identify, rotate --leaked-secret-stdin: no policy entry holds the leaked value/m,
    );
    expect(result.stdout).toContain('standard input');
    expect(result.stdout).not.toMatch(/--(value|secret)\b/);
  });

  it('rotate --help shows the leak example with actor and ticket', async () => {
    const result = await cli.run(['rotate', '--help']);
    expect(result.stdout).toMatch(/keyroll rotate --key \S+ --reason leak --actor \S+ --ticket \S+/);
  });
});

describe('usage errors exit 2 and touch nothing', () => {
  it.each([
    ['an unknown command', ['rotat']],
    ['an unknown option', ['run', '--polcy', 'policy.yaml']],
    ['a reason outside the list', ['rotate', '--key', 'key_demo_billing', '--reason', 'oops']],
    ['rotate without a key selection', ['rotate', '--reason', 'leak']],
    ['--all together with --key', ['rotate', '--all', '--key', 'key_demo_billing']],
    ['a malformed --shard', ['run', '--shard', '5/2']],
  ])('%s', async (_name, args) => {
    await cli.writePolicy();
    const result = await cli.run([...args, ...(args[0] === 'rotat' ? [] : ['-p', 'policy.yaml'])]);
    expect(result.code).toBe(2);
    expect(result.stderr).not.toBe('');
    expect(cli.emulator.state.totalRolls()).toBe(0);
    expect(cli.emulator.state.callCount('listProjects')).toBe(0);
  });

  it('a missing policy file exits 2 and names the file', async () => {
    const result = await cli.run(['run', '-p', 'nowhere.yaml']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('nowhere.yaml');
  });
});
