// Where run/rotate/demo write (src/cli/terminal/run-output.ts): the view on a terminal, JSON lines
// on a pipe, and the audit file (src/cli/terminal/audit-file.ts) beside either.
import { readFile, stat, writeFile, chmod } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Secret } from '../../../src/audit/secret.ts';
import { openAuditFile } from '../../../src/cli/terminal/audit-file.ts';
import { openRunOutput } from '../../../src/cli/terminal/run-output.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { ESC, fakeTty, outcome, visible } from './support.ts';
import { expectNoSecrets } from '../../support/secret-scan.ts';
import { rawControls } from '../../support/raw-controls.ts';

describe('run output', () => {
  const dir = useTempDir('keyroll-terminal-');

  it('on a terminal: the view, no JSON on stdout, and --audit-file gets every line as JSON (0600)', async () => {
    const tty = fakeTty();
    const file = join(dir.path(), 'audit.jsonl');
    const output = await openRunOutput({ auditFile: file }, ['key_a'], {
      stdout: tty,
      stderr: fakeTty(),
      env: { TERM: 'xterm' },
    });
    const key = output.audit.child({ runId: 'run-1', rotationId: 'rot-1', keyId: 'key_a' });
    output.audit.emit('run.started', { command: 'run', keys: 1, force: false });
    key.emit('key.preflight.passed', { step: 'preflight' });
    output.keyDone(outcome('key_a'));
    output.finishView();
    output.close();
    expect(tty.text()).not.toContain('{"level"');
    expect(visible(tty.text())).toMatch(/✔ key_a +rotated/);
    const lines = (await readFile(file, 'utf8')).trimEnd().split('\n');
    expect(lines.map((line) => (JSON.parse(line) as { event: string }).event)).toEqual([
      'run.started',
      'key.preflight.passed',
    ]);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
  });

  it('piped: the JSON lines on stdout, exactly as the logger writes them', async () => {
    const pipe = { ...fakeTty(), isTTY: undefined };
    const output = await openRunOutput({}, ['key_a'], {
      stdout: pipe,
      stderr: { ...fakeTty(), isTTY: undefined },
      env: {},
    });
    output.audit.emit('run.started', { command: 'run', keys: 1, force: false });
    output.keyDone(outcome('key_a'));
    output.finishView();
    output.close();
    expect(pipe.writes).toHaveLength(1);
    expect(JSON.parse(pipe.writes[0]!)).toMatchObject({ event: 'run.started', level: 'info' });
  });

  it('--log-format pretty: one readable line per event, from the sanitized line', async () => {
    const secret = new Secret('sk_live_pretty_trail_0123456789abcdef');
    const tty = fakeTty();
    const output = await openRunOutput({ logFormat: 'pretty' }, ['key_a'], {
      stdout: tty,
      stderr: fakeTty(),
      env: { NO_COLOR: '1' },
    });
    output.audit
      .child({ keyId: 'key_a' })
      .emit('key.failed', { step: 'roll', errorCode: 'KR_X', error: `boom ${secret.reveal()}` });
    output.finishView();
    output.close();
    expect(tty.text()).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] ERROR: key_a key\.failed \{.*"errorCode":"KR_X"/);
    expectNoSecrets([tty.text()], [secret.reveal()]);
    expect(tty.text()).not.toContain(ESC);
  });

  it('--log-format pretty: an escape sequence in a value shows as an escape (issue 27, finding 4)', async () => {
    const tty = fakeTty();
    const output = await openRunOutput({ logFormat: 'pretty' }, ['key_a'], {
      stdout: tty,
      stderr: fakeTty(),
      env: { NO_COLOR: '1' },
    });
    output.audit.child({ keyId: `key_a${ESC}[1A${ESC}[2K` }).emit('key.failed', {
      step: 'roll',
      errorCode: 'KR_X',
      error: `server said \u009b2J${ESC}]0;pwned\u0007`,
    });
    output.finishView();
    output.close();
    expect(rawControls(tty.text())).toEqual([]);
    expect(tty.text()).toContain('key_a\\u001b[1A\\u001b[2K key.failed');
  });

  it('piped: DEL, C1 and bidi controls in a JSON line are \\u escapes, the same value once parsed', async () => {
    const pipe = { ...fakeTty(), isTTY: undefined };
    const output = await openRunOutput({}, ['key_a'], {
      stdout: pipe,
      stderr: { ...fakeTty(), isTTY: undefined },
      env: {},
    });
    const error = `x\u009b2J\u202ey\u007f`;
    output.audit.child({ keyId: 'key_a' }).emit('key.failed', { step: 'roll', errorCode: 'KR_X', error });
    output.close();
    expect(rawControls(pipe.writes[0] ?? '')).toEqual([]);
    expect(JSON.parse(pipe.writes[0]!)).toMatchObject({ error });
  });

  it('an audit file others could read is narrowed to 0600; one that cannot be opened is a usage error', async () => {
    const file = join(dir.path(), 'wide.jsonl');
    await writeFile(file, '');
    await chmod(file, 0o644);
    openAuditFile(file).close();
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(() => openAuditFile(join(dir.path(), 'missing', 'audit.jsonl'))).toThrow(
      expect.objectContaining({ code: 'KR_USAGE' }),
    );
  });

  it('a failing audit file stops, says so once on stderr, and never throws into the run', () => {
    const warnings: string[] = [];
    const sink = openAuditFile('/dev/full', (line) => warnings.push(line));
    sink.write('{"event":"run.started"}\n');
    sink.write('{"event":"run.finished"}\n');
    sink.close();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('write failed (ENOSPC)');
  });
});
