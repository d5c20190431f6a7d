// `demo`, `run` and `rotate` as a person at a terminal sees them: the CLI runs under a real
// pseudo-terminal (util-linux `script`, since node has no pty of its own), stdout is a TTY, and
// what it printed is read back. Piped, the same commands print the JSON audit lines as before.
import { spawn, spawnSync } from 'node:child_process';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { ENTRY, OWNER_TOKEN, useCliFixture } from './harness.ts';

const cli = useCliFixture();
const ESC = '\u001b';

const scriptAvailable = spawnSync('script', ['--version'], { encoding: 'utf8' }).status === 0;

const quote = (arg: string): string => `'${arg.replace(/'/g, `'\\''`)}'`;

interface PtyResult {
  code: number | null;
  /** Everything the terminal received, CRs removed. */
  screen: string;
}

/** Runs `keyroll args…` with stdout, stderr and stdin on a 120×40 pseudo-terminal. */
function runOnTerminal(
  args: readonly string[],
  cwd: string,
  env: Record<string, string> = {},
): Promise<PtyResult> {
  if (!scriptAvailable)
    throw new Error('these tests need util-linux `script` (a pseudo-terminal for the CLI)');
  const command = `stty cols 120 rows 40; exec ${[process.execPath, ENTRY, ...args].map(quote).join(' ')}`;
  const child = spawn('script', ['-qec', command, '/dev/null'], {
    cwd,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      KEYROLL_API_TOKEN: OWNER_TOKEN,
      TERM: 'xterm-256color',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let screen = '';
  child.stdout.on('data', (chunk: Buffer) => {
    screen += chunk.toString('utf8');
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      resolve({ code, screen: screen.replace(/\r/g, '') });
    });
  });
}

const visible = (text: string): string => text.replace(new RegExp(`${ESC}\\[[0-9;?]*[A-Za-z]`, 'g'), '');
const jsonAuditLines = (text: string): string[] =>
  visible(text)
    .split('\n')
    .filter((line) => line.startsWith('{"level":'));

describe('keyroll on a terminal', () => {
  it('demo shows the progress view, what happened and the summary, and no JSON audit line', async () => {
    const result = await runOnTerminal(['demo', '--dir', join(cli.dir, 'demo')], cli.dir);
    expect(result.code).toBe(0);
    const screen = visible(result.screen);
    expect(jsonAuditLines(result.screen)).toEqual([]);
    for (const id of ['key_demo_billing', 'key_demo_search', 'key_demo_ingest', 'billing-api']) {
      expect(screen).toMatch(
        new RegExp(`✔ ${id} +rotated +files:\\S+ v1 · exposure \\d+ ms · fingerprint [0-9a-f]{12}`),
      );
    }
    expect(screen).toContain('What happened:');
    expect(screen.trimEnd().split('\n').at(-1)).toBe('rotated 4, failed 0, skipped 0');
  });

  it('demo --log-format json on a terminal prints the JSON lines as a pipe would', async () => {
    const result = await runOnTerminal(
      ['demo', '--dir', join(cli.dir, 'demo'), '--log-format', 'json'],
      cli.dir,
    );
    expect(result.code).toBe(0);
    const events = jsonAuditLines(result.screen).map((line) => (JSON.parse(line) as { event: string }).event);
    expect(events[0]).toBe('run.started');
    expect(events.filter((event) => event === 'key.succeeded')).toHaveLength(4);
    expect(result.screen).not.toContain('✔');
  });

  it('NO_COLOR and TERM=dumb: no colour; dumb also no cursor movement', async () => {
    const noColor = await runOnTerminal(['demo', '--dir', join(cli.dir, 'demo')], cli.dir, { NO_COLOR: '1' });
    expect(noColor.code).toBe(0);
    expect(noColor.screen).not.toMatch(new RegExp(`${ESC}\\[[0-9;]*m`));
    const dumb = await runOnTerminal(['demo', '--dir', join(cli.dir, 'demo')], cli.dir, { TERM: 'dumb' });
    expect(dumb.code).toBe(0);
    expect(dumb.screen).not.toContain(ESC);
    expect(dumb.screen).toMatch(/^ok key_demo_billing +rotated/m);
    expect(dumb.screen.trimEnd().split('\n').at(-1)).toBe('rotated 4, failed 0, skipped 0');
  });

  it('run: a line per key (a failure says where and why), the summary, the trail in --audit-file only, never a secret', async () => {
    await cli.writePolicy({
      extraKeys: `  - id: key_unknown_to_the_api
    organization: org_demo_acme
    destinations: [{ backend: files, path: unknown.json }]
`,
    });
    const auditFile = join(cli.dir, 'audit.jsonl');
    const result = await runOnTerminal(['run', '-p', 'policy.yaml', '--audit-file', auditFile], cli.dir);
    expect(result.code).toBe(1);
    const screen = visible(result.screen);
    expect(jsonAuditLines(result.screen)).toEqual([]);
    expect(screen).toMatch(/✔ key_demo_billing +rotated +files:billing\.json v1/);
    expect(screen).toMatch(/✖ key_unknown_to_the_api +failed +at roll: KR_API_NOT_FOUND/);
    expect(screen.trimEnd().split('\n').at(-1)).toBe('rotated 3, failed 1, skipped 0');
    const trail = (await readFile(auditFile, 'utf8'))
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as { event: string });
    expect(trail.filter((event) => event.event === 'key.succeeded')).toHaveLength(3);
    expect(trail.at(-1)?.event).toBe('run.finished');
    expect((await stat(auditFile)).mode & 0o777).toBe(0o600);
    expectNoSecrets(
      [result.screen, await readFile(auditFile, 'utf8')],
      [...cli.emulator.state.mintedSecrets(), OWNER_TOKEN],
    );
  });

  it('rotate --log-format pretty prints one readable line per event, then the summary', async () => {
    await cli.writePolicy();
    const result = await runOnTerminal(
      [
        'rotate',
        '-p',
        'policy.yaml',
        '--key',
        'key_demo_search',
        '--reason',
        'leak',
        '--actor',
        'alice',
        '--log-format',
        'pretty',
      ],
      cli.dir,
      { NO_COLOR: '1' },
    );
    expect(result.code).toBe(0);
    expect(result.screen).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: key_demo_search key\.succeeded /m);
    expect(jsonAuditLines(result.screen)).toEqual([]);
    expect(result.screen.trimEnd().split('\n').at(-1)).toBe('rotated 1, failed 0, skipped 0');
    expectNoSecrets([result.screen], [...cli.emulator.state.mintedSecrets(), OWNER_TOKEN]);
  });

  it('an --audit-file that cannot be opened exits 2 before anything is rolled', async () => {
    await cli.writePolicy();
    const result = await cli.run([
      'run',
      '-p',
      'policy.yaml',
      '--audit-file',
      join(cli.dir, 'no', 'such', 'dir', 'audit.jsonl'),
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(
      /^keyroll: --audit-file .* cannot be opened for appending as 0600 \(ENOENT\)\n$/,
    );
    expect(cli.emulator.state.totalRolls()).toBe(0);
  });
});

describe('keyroll piped', () => {
  it('demo prints its JSON audit lines as before, then what happened and the summary', async () => {
    const result = await cli.run(['demo', '--dir', join(cli.dir, 'demo')]);
    expect(result.code).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    const trail = lines.slice(1, lines.indexOf(''));
    expect(trail.length).toBeGreaterThan(10);
    expect(trail.every((line) => line.startsWith('{"level":'))).toBe(true);
    expect(result.events[0]?.event).toBe('run.started');
    expect(result.stdout).not.toContain('✔');
    expect(result.lastLine).toBe('rotated 4, failed 0, skipped 0');
  });

  it('run with --audit-file writes the same JSON lines to stdout and to the file', async () => {
    await cli.writePolicy();
    const auditFile = join(cli.dir, 'audit.jsonl');
    const result = await cli.run(['run', '-p', 'policy.yaml', '--audit-file', auditFile]);
    expect(result.code).toBe(0);
    const stdoutTrail = result.stdout.trimEnd().split('\n').slice(0, -1);
    expect((await readFile(auditFile, 'utf8')).trimEnd().split('\n')).toEqual(stdoutTrail);
  });
});
