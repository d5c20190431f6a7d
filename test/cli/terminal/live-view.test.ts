// The progress view of run/rotate/demo (src/cli/terminal/live-view.ts), drawn on a fake TTY stream
// from real audit lines (the same pino pipeline, sanitizer included).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Secret } from '../../../src/audit/secret.ts';
import type { ErrorCode } from '../../../src/error-codes.ts';
import { createProgressView } from '../../../src/cli/terminal/live-view.ts';
import { ESC, fakeTty, outcome, rotationLines, visible } from './support.ts';
import { expectNoSecrets } from '../../support/secret-scan.ts';

describe('progress view', () => {
  it('shows each finished key with result, destination, exposure and fingerprint, and never a JSON line', () => {
    const tty = fakeTty();
    const view = createProgressView(tty, {
      keyIds: ['key_a', 'key_b'],
      mode: 'live',
      color: false,
      tickMs: 0,
    });
    for (const line of rotationLines('key_a', 'aaaaaaaaaaaa')) view.auditLine(line);
    view.keyDone(outcome('key_a'));
    view.keyDone(
      outcome('key_b', {
        result: 'failed',
        step: 'preflight',
        errorCode: 'KR_BACKEND_DENIED',
        exposureMs: undefined,
        versions: undefined,
      }),
    );
    view.finish();
    const screen = visible(tty.text());
    expect(screen).toMatch(
      /✔ key_a +rotated +files:key_a\.json v1 · exposure 7 ms · fingerprint aaaaaaaaaaaa/,
    );
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
    const view = createProgressView(tty, {
      keyIds: ['key_a', 'key_b', 'key_c'],
      mode: 'live',
      color: false,
      tickMs: 0,
    });
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
    view.auditLine(
      JSON.stringify({
        event: 'key.failed',
        keyId: 'key_a',
        step: 'roll',
        errorCode: secret.reveal(),
        nextAction: `retry with ${secret.reveal()}`,
      }),
    );
    // Not a catalogue code: the view must stay safe even if one ever carried a secret.
    view.keyDone(
      outcome('key_a', { result: 'failed', step: 'roll', errorCode: secret.reveal() as ErrorCode }),
    );
    view.finish();
    expectNoSecrets([tty.text()], [secret.reveal()]);
    expect(tty.text()).toContain('[REDACTED]');
  });

  it('control characters in a key id or an error cannot drive the terminal', () => {
    const tty = fakeTty();
    const view = createProgressView(tty, { keyIds: ['key_a'], mode: 'lines', color: false, tickMs: 0 });
    view.keyDone(
      outcome(`key_${ESC}]0;pwned\u0007`, {
        result: 'failed',
        step: 'roll',
        errorCode: `E${ESC}[2J` as ErrorCode,
      }),
    );
    view.finish();
    expect(tty.text()).not.toContain(ESC);
    // Shown as escapes, not dropped: an operator sees that something was there.
    expect(tty.text()).toContain('key_\\u001b]0;pwned\\u0007');
    expect(tty.text()).toContain('E\\u001b[2J');
  });

  it('cuts every redrawn line to the terminal width (a wrapped line would break the redraw)', () => {
    const tty = fakeTty(40);
    const view = createProgressView(tty, {
      keyIds: ['key_with_a_rather_long_identifier'],
      mode: 'live',
      color: false,
      tickMs: 0,
    });
    for (const line of rotationLines('key_with_a_rather_long_identifier')) view.auditLine(line);
    view.keyDone(outcome('key_with_a_rather_long_identifier'));
    view.finish();
    const widths = visible(tty.text())
      .split('\n')
      .map((line) => Array.from(line).length);
    expect(Math.max(...widths)).toBeLessThanOrEqual(39);
  });

  it('TERM=dumb: finished keys appended, no escape sequence, no spinner', () => {
    const tty = fakeTty();
    const view = createProgressView(tty, { keyIds: ['key_a'], mode: 'lines', color: false, tickMs: 0 });
    for (const line of rotationLines('key_a')) view.auditLine(line);
    view.keyDone(outcome('key_a'));
    view.finish();
    expect(tty.text()).not.toContain(ESC);
    expect(tty.text()).toMatch(
      /^ok key_a +rotated +files:key_a\.json v1 \| exposure 7 ms \| fingerprint abcdef012345 \| 120 ms\n$/,
    );
  });

  it('colours only when asked', () => {
    const coloured = fakeTty();
    const plain = fakeTty();
    for (const [tty, color] of [
      [coloured, true],
      [plain, false],
    ] as const) {
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
      view.auditLine(
        JSON.stringify({
          event: 'key.roll.retry',
          keyId: 'key_a',
          step: 'roll',
          attempt: 1,
          status: 429,
          waitMs: 1_000,
        }),
      );
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
