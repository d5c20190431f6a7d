// The terminal output of run/rotate/demo, module by module: which output a terminal, a pipe, a
// dumb terminal and the flags get; the progress view drawn on a fake TTY stream from real audit
// lines (the same pino pipeline, sanitizer included); the audit file.
import { mkdtemp, readFile, rm, stat, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createMemoryAuditLog } from '../../src/audit/logger.ts';
import { Secret } from '../../src/audit/secret.ts';
import type { KeyOutcome } from '../../src/rotation/types.ts';
import { openAuditFile } from '../../src/cli/terminal/audit-file.ts';
import { createProgressView } from '../../src/cli/terminal/live-view.ts';
import { colorWanted, resolveOutputMode } from '../../src/cli/terminal/output-mode.ts';
import { openRunOutput } from '../../src/cli/terminal/run-output.ts';

const ESC = '\u001b';

/** A TTY-like stream that records what was written. */
function fakeTty(columns = 100, rows = 30): { write(text: string): boolean; columns: number; rows: number; isTTY: true; text(): string; writes: string[] } {
  const writes: string[] = [];
  return {
    isTTY: true,
    columns,
    rows,
    writes,
    write(text: string) {
      writes.push(text);
      return true;
    },
    text: () => writes.join(''),
  };
}

function outcome(keyId: string, extra: Partial<KeyOutcome> = {}): KeyOutcome {
  return {
    keyId,
    organizationId: 'org_demo_acme',
    result: 'rotated',
    rolls: 1,
    durationMs: 120,
    exposureMs: 7,
    versions: [{ backend: 'files', path: `${keyId}.json`, version: '1' }],
    ...extra,
  };
}

/** Audit lines of one key's rotation, through the real logger (redaction and sanitizer). */
function rotationLines(keyId: string, fingerprint = 'abcdef012345'): string[] {
  const log = createMemoryAuditLog();
  const key = log.child({ runId: 'run-1', rotationId: `rot-${keyId}`, keyId, organizationId: 'org_demo_acme' });
  key.emit('key.preflight.passed', { step: 'preflight' });
  key.emit('key.lock.acquired', { step: 'lock', tookOver: false });
  key.emit('key.intent.set', { step: 'intent' });
  key.emit('key.rolled', { step: 'roll', fingerprint, rolls: 1 });
  key.emit('key.stored', { step: 'store', backend: 'files', path: `${keyId}.json`, version: '1', attempts: 1, exposureMs: 7 });
  key.emit('key.verified', { step: 'verify', readBack: true, apiCall: true });
  key.emit('key.succeeded', { step: 'finish', durationMs: 120, exposureMs: 7 });
  return log.lines;
}

const visible = (text: string): string =>
  // Drops SGR colours and the cursor movements, keeps the characters a person reads.
  text.replace(new RegExp(`${ESC}\\[[0-9;?]*[A-Za-z]`, 'g'), '').replace(/\r/g, '');

describe('output mode', () => {
  it('a terminal gets the progress view and no trail; a pipe gets JSON lines as before', () => {
    expect(resolveOutputMode({}, { stdoutIsTTY: true, stderrIsTTY: true, env: { TERM: 'xterm' } })).toMatchObject({ trail: 'none', view: 'live', color: true });
    expect(resolveOutputMode({}, { stdoutIsTTY: false, stderrIsTTY: false, env: {} })).toMatchObject({ trail: 'json', view: 'none', color: false, stderrCounter: false });
    expect(resolveOutputMode({ logFormat: 'auto' }, { stdoutIsTTY: false, stderrIsTTY: false, env: { TERM: 'xterm' } })).toMatchObject({ trail: 'json', view: 'none' });
  });

  it('piped stdout with a person on stderr keeps the stderr counter', () => {
    expect(resolveOutputMode({}, { stdoutIsTTY: false, stderrIsTTY: true, env: {} })).toMatchObject({ trail: 'json', view: 'none', stderrCounter: true });
  });

  it('--log-format json|pretty on a terminal prints that trail instead of the view', () => {
    expect(resolveOutputMode({ logFormat: 'json' }, { stdoutIsTTY: true, stderrIsTTY: true, env: {} })).toMatchObject({ trail: 'json', view: 'none', stderrCounter: false });
    expect(resolveOutputMode({ logFormat: 'pretty' }, { stdoutIsTTY: true, stderrIsTTY: true, env: {} })).toMatchObject({ trail: 'pretty', view: 'none', color: true });
    expect(resolveOutputMode({ logFormat: 'pretty' }, { stdoutIsTTY: false, stderrIsTTY: false, env: {} })).toMatchObject({ trail: 'pretty', color: false });
  });

  it('--audit-file is kept in every mode', () => {
    expect(resolveOutputMode({ auditFile: '/tmp/a.jsonl' }, { stdoutIsTTY: true, stderrIsTTY: true, env: {} }).auditFile).toBe('/tmp/a.jsonl');
    expect(resolveOutputMode({ auditFile: '/tmp/a.jsonl' }, { stdoutIsTTY: false, stderrIsTTY: false, env: {} }).auditFile).toBe('/tmp/a.jsonl');
  });

  it('TERM=dumb appends lines without redrawing and without colour', () => {
    expect(resolveOutputMode({}, { stdoutIsTTY: true, stderrIsTTY: true, env: { TERM: 'dumb' } })).toMatchObject({ trail: 'none', view: 'lines', color: false });
  });

  it('NO_COLOR (set and not empty) turns colour off; empty NO_COLOR does not', () => {
    expect(colorWanted(true, { NO_COLOR: '1' })).toBe(false);
    expect(colorWanted(true, { NO_COLOR: '' })).toBe(true);
    expect(colorWanted(false, {})).toBe(false);
  });

  it('an unknown KEYROLL_LOG_FORMAT is a usage error', async () => {
    const tty = fakeTty();
    await expect(openRunOutput({ logFormat: 'yaml' as 'json' }, [], { stdout: tty, stderr: tty, env: {} })).rejects.toMatchObject({ code: 'KR_USAGE' });
  });
});

describe('progress view', () => {
  it('shows each finished key with result, destination, exposure and fingerprint, and never a JSON line', () => {
    const tty = fakeTty();
    const view = createProgressView(tty, { keyIds: ['key_a', 'key_b'], mode: 'live', color: false, tickMs: 0 });
    for (const line of rotationLines('key_a', 'aaaaaaaaaaaa')) view.auditLine(line);
    view.keyDone(outcome('key_a'));
    view.keyDone(outcome('key_b', { result: 'failed', step: 'preflight', errorCode: 'KR_BACKEND_DENIED', exposureMs: undefined, versions: undefined }));
    view.finish();
    const screen = visible(tty.text());
    expect(screen).toMatch(/✔ key_a +rotated +files:key_a\.json v1 · exposure 7 ms · fingerprint aaaaaaaaaaaa/);
    expect(screen).toMatch(/✖ key_b +failed +at preflight: KR_BACKEND_DENIED/);
    expect(screen).not.toContain('{"level"');
  });

  it('redraws the keys in progress in place: step by step, then erased when the key finishes', () => {
    const tty = fakeTty();
    const view = createProgressView(tty, { keyIds: ['key_a'], mode: 'live', color: false, tickMs: 0 });
    const lines = rotationLines('key_a');
    view.auditLine(lines[0]!);
    expect(visible(tty.writes.at(-1)!)).toMatch(/key_a +lock/);
    view.auditLine(lines[2]!);
    const redraw = tty.writes.at(-1)!;
    // Cursor up over the two lines drawn before (the key and the counter), erase down, redraw.
    expect(redraw.startsWith(`\r${ESC}[2A${ESC}[J`)).toBe(true);
    expect(visible(redraw)).toMatch(/key_a +roll/);
    view.keyDone(outcome('key_a'));
    view.finish();
    expect(tty.writes.at(-1)!.startsWith(`\r${ESC}[1A${ESC}[J`)).toBe(true);
  });

  it('the counter says how many keys are done and how many are in progress', () => {
    const tty = fakeTty();
    const view = createProgressView(tty, { keyIds: ['key_a', 'key_b', 'key_c'], mode: 'live', color: false, tickMs: 0 });
    view.auditLine(rotationLines('key_a')[0]!);
    view.auditLine(rotationLines('key_b')[0]!);
    view.keyDone(outcome('key_c', { result: 'skipped', detail: 'not-due' }));
    expect(visible(tty.writes.at(-1)!)).toContain('[1/3] skipped 1 · 2 in progress');
    view.finish();
    expect(visible(tty.text())).toMatch(/– key_c +skipped +not-due\n/);
  });

  it('passes every frame through the sanitizer: a secret in an audit field is printed as [REDACTED]', () => {
    const secret = new Secret('sk_live_terminal_view_0123456789abcdef');
    const tty = fakeTty(400);
    const view = createProgressView(tty, { keyIds: ['key_a'], mode: 'live', color: false, tickMs: 0 });
    // A line that did not come through the logger: the view's own sanitizer is the last layer.
    view.auditLine(JSON.stringify({ event: 'key.failed', keyId: 'key_a', step: 'roll', errorCode: secret.reveal(), nextAction: `retry with ${secret.reveal()}` }));
    view.keyDone(outcome('key_a', { result: 'failed', step: 'roll', errorCode: secret.reveal() }));
    view.finish();
    expect(tty.text()).not.toContain(secret.reveal());
    expect(tty.text()).toContain('[REDACTED]');
  });

  it('control characters in a key id or an error cannot drive the terminal', () => {
    const tty = fakeTty();
    const view = createProgressView(tty, { keyIds: ['key_a'], mode: 'lines', color: false, tickMs: 0 });
    view.keyDone(outcome(`key_${ESC}]0;pwned\u0007`, { result: 'failed', step: 'roll', errorCode: `E${ESC}[2J` }));
    view.finish();
    expect(tty.text()).not.toContain(ESC);
    expect(tty.text()).toContain('key_?]0;pwned?');
  });

  it('cuts every redrawn line to the terminal width (a wrapped line would break the redraw)', () => {
    const tty = fakeTty(40);
    const view = createProgressView(tty, { keyIds: ['key_with_a_rather_long_identifier'], mode: 'live', color: false, tickMs: 0 });
    for (const line of rotationLines('key_with_a_rather_long_identifier')) view.auditLine(line);
    view.keyDone(outcome('key_with_a_rather_long_identifier'));
    view.finish();
    const widths = visible(tty.text()).split('\n').map((line) => Array.from(line).length);
    expect(Math.max(...widths)).toBeLessThanOrEqual(39);
  });

  it('TERM=dumb: finished keys appended, no escape sequence, no spinner', () => {
    const tty = fakeTty();
    const view = createProgressView(tty, { keyIds: ['key_a'], mode: 'lines', color: false, tickMs: 0 });
    for (const line of rotationLines('key_a')) view.auditLine(line);
    view.keyDone(outcome('key_a'));
    view.finish();
    expect(tty.text()).not.toContain(ESC);
    expect(tty.text()).toMatch(/^ok key_a +rotated +files:key_a\.json v1 \| exposure 7 ms \| fingerprint abcdef012345 \| 120 ms\n$/);
  });

  it('colours only when asked', () => {
    const coloured = fakeTty();
    const plain = fakeTty();
    for (const [tty, color] of [[coloured, true], [plain, false]] as const) {
      const view = createProgressView(tty, { keyIds: ['key_a'], mode: 'live', color, tickMs: 0 });
      view.keyDone(outcome('key_a'));
      view.finish();
    }
    expect(coloured.text()).toMatch(new RegExp(`${ESC}\\[3[0-9]m`));
    expect(plain.text()).not.toMatch(new RegExp(`${ESC}\\[[0-9;]*m`));
  });

  describe('spinner timer', () => {
    beforeEach(() => {
      vi.useFakeTimers();
    });
    afterEach(() => {
      vi.useRealTimers();
    });

    it('draws nothing of its own while a key may be between its roll answer and its store (invariant 2)', () => {
      const tty = fakeTty();
      const view = createProgressView(tty, { keyIds: ['key_a'], mode: 'live', color: false, tickMs: 100 });
      const lines = rotationLines('key_a');
      view.auditLine(lines[0]!); // preflight passed
      const beforeLock = tty.writes.length;
      vi.advanceTimersByTime(500);
      expect(tty.writes.length).toBeGreaterThan(beforeLock); // it spins before the roll
      view.auditLine(lines[2]!); // intent set: the roll and the store follow
      const atRoll = tty.writes.length;
      vi.advanceTimersByTime(5_000);
      expect(tty.writes.length).toBe(atRoll);
      view.auditLine(lines[3]!); // rolled (emitted after the store)
      view.auditLine(lines[4]!); // stored
      const afterStore = tty.writes.length;
      vi.advanceTimersByTime(500);
      expect(tty.writes.length).toBeGreaterThan(afterStore);
      view.finish();
      const finished = tty.writes.length;
      vi.advanceTimersByTime(1_000);
      expect(tty.writes.length).toBe(finished);
    });

    it('spins again while a roll waits out a 429, then stops when the wait is over', () => {
      const tty = fakeTty();
      const view = createProgressView(tty, { keyIds: ['key_a'], mode: 'live', color: false, tickMs: 100 });
      const lines = rotationLines('key_a');
      view.auditLine(lines[2]!); // intent set
      view.auditLine(JSON.stringify({ event: 'key.roll.retry', keyId: 'key_a', step: 'roll', attempt: 1, status: 429, waitMs: 1_000 }));
      expect(visible(tty.writes.at(-1)!)).toContain('attempt 1 after 429, waiting 1.0 s');
      const atRetry = tty.writes.length;
      vi.advanceTimersByTime(900);
      expect(tty.writes.length).toBeGreaterThan(atRetry);
      vi.advanceTimersByTime(200); // the wait is over: the next attempt may be answered any time
      const atAttempt = tty.writes.length;
      vi.advanceTimersByTime(2_000);
      expect(tty.writes.length).toBe(atAttempt);
      view.finish();
    });
  });
});

describe('run output', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'keyroll-terminal-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('on a terminal: the view, no JSON on stdout, and --audit-file gets every line as JSON (0600)', async () => {
    const tty = fakeTty();
    const file = join(dir, 'audit.jsonl');
    const output = await openRunOutput({ auditFile: file }, ['key_a'], { stdout: tty, stderr: fakeTty(), env: { TERM: 'xterm' } });
    const key = output.audit.child({ runId: 'run-1', rotationId: 'rot-1', keyId: 'key_a' });
    output.audit.emit('run.started', { command: 'run', keys: 1, force: false });
    key.emit('key.preflight.passed', { step: 'preflight' });
    output.keyDone(outcome('key_a'));
    output.finishView();
    output.close();
    expect(tty.text()).not.toContain('{"level"');
    expect(visible(tty.text())).toMatch(/✔ key_a +rotated/);
    const lines = (await readFile(file, 'utf8')).trimEnd().split('\n');
    expect(lines.map((line) => (JSON.parse(line) as { event: string }).event)).toEqual(['run.started', 'key.preflight.passed']);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
  });

  it('piped: the JSON lines on stdout, exactly as the logger writes them', async () => {
    const pipe = { ...fakeTty(), isTTY: undefined };
    const output = await openRunOutput({}, ['key_a'], { stdout: pipe, stderr: { ...fakeTty(), isTTY: undefined }, env: {} });
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
    const output = await openRunOutput({ logFormat: 'pretty' }, ['key_a'], { stdout: tty, stderr: fakeTty(), env: { NO_COLOR: '1' } });
    output.audit.child({ keyId: 'key_a' }).emit('key.failed', { step: 'roll', errorCode: 'KR_X', error: `boom ${secret.reveal()}` });
    output.finishView();
    output.close();
    expect(tty.text()).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] ERROR: key_a key\.failed \{.*"errorCode":"KR_X"/);
    expect(tty.text()).not.toContain(secret.reveal());
    expect(tty.text()).not.toContain(ESC);
  });

  it('an audit file others could read is narrowed to 0600; one that cannot be opened is a usage error', async () => {
    const file = join(dir, 'wide.jsonl');
    await writeFile(file, '');
    await chmod(file, 0o644);
    openAuditFile(file).close();
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(() => openAuditFile(join(dir, 'missing', 'audit.jsonl'))).toThrow(expect.objectContaining({ code: 'KR_USAGE' }));
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
