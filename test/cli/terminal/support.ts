// What the terminal tests share: a TTY-like stream that records what was written, the text a
// person reads on it, and a rotation's outcome and audit lines.
import { createMemoryAuditLog } from '../../../src/audit/logger.ts';
import type { KeyOutcome } from '../../../src/rotation/types.ts';

export const ESC = '\u001b';

/** A TTY-like stream that records what was written. */
export function fakeTty(
  columns = 100,
  rows = 30,
): {
  write(text: string): boolean;
  columns: number;
  rows: number;
  isTTY: true;
  text(): string;
  writes: string[];
} {
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

/** A finished key's outcome as the run reports it; `extra` may give any variant (or a hostile value). */
export function outcome(keyId: string, extra: Partial<KeyOutcome> = {}): KeyOutcome {
  return {
    keyId,
    organizationId: 'org_demo_acme',
    result: 'rotated',
    rolls: 1,
    durationMs: 120,
    exposureMs: 7,
    versions: [{ backend: 'files', path: `${keyId}.json`, version: '1' }],
    ...extra,
  } as KeyOutcome;
}

/** Audit lines of one key's rotation, through the real logger (redaction and sanitizer). */
export function rotationLines(keyId: string, fingerprint = 'abcdef012345'): string[] {
  const log = createMemoryAuditLog();
  const key = log.child({
    runId: 'run-1',
    rotationId: `rot-${keyId}`,
    keyId,
    organizationId: 'org_demo_acme',
  });
  key.emit('key.preflight.passed', { step: 'preflight' });
  key.emit('key.lock.acquired', { step: 'lock', tookOver: false });
  key.emit('key.intent.set', { step: 'intent' });
  key.emit('key.rolled', { step: 'roll', fingerprint, rolls: 1 });
  key.emit('key.stored', {
    step: 'store',
    backend: 'files',
    path: `${keyId}.json`,
    version: '1',
    attempts: 1,
    exposureMs: 7,
  });
  key.emit('key.verified', { step: 'verify', readBack: true, apiCall: true });
  key.emit('key.succeeded', { step: 'finish', durationMs: 120, exposureMs: 7 });
  return log.lines;
}

export const visible = (text: string): string =>
  // Drops SGR colours and the cursor movements, keeps the characters a person reads.
  text.replace(new RegExp(`${ESC}\\[[0-9;?]*[A-Za-z]`, 'g'), '').replace(/\r/g, '');
