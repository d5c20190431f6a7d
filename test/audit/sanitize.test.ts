import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryAuditLog } from '../../src/audit/logger.ts';
import {
  registerSecretValue,
  resetSanitizerForTests,
  sanitizeText,
  sanitizeValue,
} from '../../src/audit/sanitize.ts';
import { Secret } from '../../src/audit/secret.ts';
import { KeyrollError } from '../../src/errors.ts';

afterEach(() => {
  resetSanitizerForTests();
});

const VALUE = 'sk_live_Zm9vYmFyLXNlY3JldC0xMjM0NTY3ODkw';
const encoded = {
  base64: Buffer.from(VALUE).toString('base64'),
  base64url: Buffer.from(VALUE).toString('base64url'),
  hex: Buffer.from(VALUE).toString('hex'),
};

describe('the sanitizer in audit lines', () => {
  it('blanks a registered secret passed as a plain string field', () => {
    new Secret(VALUE);
    const log = createMemoryAuditLog();

    log.emit('key.failed', { detail: `the API answered with ${VALUE}` });

    expect(log.lines[0]).not.toContain(VALUE);
    expect(log.events[0]!.detail).toBe('the API answered with [REDACTED]');
  });

  it.each(Object.entries(encoded))('blanks its %s form', (_form, text) => {
    new Secret(VALUE);
    const log = createMemoryAuditLog();

    log.emit('key.store.retry', { echoed: `body=${text};` });

    expect(log.lines[0]).not.toContain(text);
    expect(log.events[0]!.echoed).toBe('body=[REDACTED];');
  });

  it('blanks it inside an error message and its cause', () => {
    new Secret(VALUE);
    const log = createMemoryAuditLog();
    const error = new KeyrollError('KR_BACKEND_FAILED', `write of ${VALUE} refused`, {
      cause: new Error(`echo: ${encoded.base64}`),
    });

    log.emit('key.failed', { err: error, error: error.message });

    expect(log.lines[0]).not.toContain(VALUE);
    expect(log.lines[0]).not.toContain(encoded.base64);
    expect(log.lines[0]).toContain('write of [REDACTED] refused');
  });

  it('blanks it in nested objects and arrays', () => {
    new Secret(VALUE);
    const log = createMemoryAuditLog();

    log.emit('key.verify.failed', {
      failures: [{ check: 'read-back', got: VALUE }],
      meta: { deep: { deeper: encoded.hex } },
    });

    expect(log.lines[0]).not.toContain(VALUE);
    expect(log.lines[0]).not.toContain(encoded.hex);
  });

  it('blanks a value only registered, never wrapped (e.g. a resolved header)', () => {
    registerSecretValue('hvs.CAESIJ-vault-token-0001');
    const log = createMemoryAuditLog();

    log.emit('key.preflight.failed', { note: 'token hvs.CAESIJ-vault-token-0001 expired' });

    expect(log.events[0]!.note).toBe('token [REDACTED] expired');
  });

  it('keeps every line parseable JSON after blanking', () => {
    new Secret('quote"and\\backslash-secret');
    const log = createMemoryAuditLog();

    log.emit('key.failed', { detail: 'x quote"and\\backslash-secret y' });

    expect(log.events[0]!.detail).toBe('x [REDACTED] y');
  });

  it('never lets any registered alphanumeric secret through a line, whatever the field', () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[A-Za-z0-9_-]{16,48}$/),
        fc.constantFrom('raw', 'base64', 'base64url', 'hex'),
        (value, form) => {
          resetSanitizerForTests();
          new Secret(value);
          const log = createMemoryAuditLog();
          const text = form === 'raw' ? value : Buffer.from(value).toString(form);

          log.emit('key.failed', { detail: `prefix ${text} suffix` });

          return !log.lines[0]!.includes(text);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('sanitizeValue and sanitizeText', () => {
  it('returns text unchanged when no secret is registered', () => {
    expect(sanitizeText('nothing to hide here')).toBe('nothing to hide here');
  });

  it('blanks every string of a JSON-like value, keeping its shape', () => {
    new Secret(VALUE);

    expect(sanitizeValue({ summary: `leaked ${VALUE}`, details: { list: [encoded.base64url, 3] } })).toEqual({
      summary: 'leaked [REDACTED]',
      details: { list: ['[REDACTED]', 3] },
    });
  });

  it('ignores values too short to be secrets', () => {
    registerSecretValue('short');

    expect(sanitizeText('a short word')).toBe('a short word');
  });
});
