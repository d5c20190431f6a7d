// The spellings the sanitizer blanks beyond the raw value (issue 12, section 3): upper-case hex,
// base64 of a larger value holding the secret (`Basic base64(id:secret)`), percent- and
// form-encoding, and credentials under 8 characters after a credential marker.
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryAuditLog } from '../../src/audit/logger.ts';
import {
  registerSecretValue,
  resetSanitizerForTests,
  sanitizeText,
  sanitizeValue,
} from '../../src/audit/sanitize.ts';
import { Secret } from '../../src/audit/secret.ts';

afterEach(() => {
  resetSanitizerForTests();
});

const TOKEN = 'whk_live_7fQ2mZp9LxR4vN8sKd3TbY6cWj1H';
const base64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');

describe('encoded forms of a registered secret', () => {
  it('blanks its upper-case hex form', () => {
    new Secret(TOKEN);
    const hex = Buffer.from(TOKEN).toString('hex').toUpperCase();

    expect(sanitizeText(`digest dump ${hex} end`)).toBe('digest dump [REDACTED] end');
  });

  it('blanks Basic base64(id:secret) whole, in a header and in a JSON line', () => {
    new Secret(TOKEN);
    const basic = base64(`keyroll-client:${TOKEN}`);
    const log = createMemoryAuditLog();

    log.emit('key.failed', { detail: `the proxy echoed Authorization: Basic ${basic}` });

    expect(log.lines[0]).not.toContain(basic);
    expect(log.events[0]!.detail).toBe('the proxy echoed Authorization: Basic [REDACTED]');
  });

  it('blanks base64url of a larger value holding the secret (a JSON credential blob)', () => {
    new Secret(TOKEN);
    const blob = Buffer.from(
      JSON.stringify({ client: 'keyroll', secret: TOKEN, scope: 'keys:roll' }),
    ).toString('base64url');

    expect(sanitizeText(`state=${blob}&next=1`)).toBe('state=[REDACTED]&next=1');
  });

  it('keeps a line parseable when the encoded run follows a JSON escape', () => {
    new Secret(TOKEN);
    const log = createMemoryAuditLog();

    log.emit('key.failed', { detail: `line one\n${base64(`id:${TOKEN}`)}` });

    expect(log.events[0]!.detail).toBe('line one\n[REDACTED]');
  });

  it('leaves base64 of a value holding no secret alone', () => {
    new Secret(TOKEN);
    const harmless = `Basic ${base64('keyroll-client:not-the-secret-at-all')}`;

    expect(sanitizeText(harmless)).toBe(harmless);
  });

  it.each([
    ['percent-encoded (upper-case escapes)', encodeURIComponent('p@ss/word+with spaces&more')],
    [
      'percent-encoded (lower-case escapes)',
      encodeURIComponent('p@ss/word+with spaces&more').replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase()),
    ],
    ['form-encoded', new URLSearchParams({ v: 'p@ss/word+with spaces&more' }).toString().slice(2)],
  ])('blanks its %s form in a query string', (_form, encoded) => {
    new Secret('p@ss/word+with spaces&more');

    expect(sanitizeText(`GET /login?user=ops&password=${encoded}&x=1`)).toBe(
      'GET /login?user=ops&password=[REDACTED]&x=1',
    );
  });
});

describe('credentials under 8 characters', () => {
  const SHORT = 'Zq7#k2';

  it.each([
    ['an Authorization header', `Authorization: ${SHORT}`, 'Authorization: [REDACTED]'],
    [
      'a Bearer value',
      `retrying with Bearer ${SHORT} after 401`,
      'retrying with Bearer [REDACTED] after 401',
    ],
    [
      'a token= parameter',
      `https://hooks.example/x?token=${SHORT}&a=1`,
      'https://hooks.example/x?token=[REDACTED]&a=1',
    ],
    [
      'a JSON password field',
      `{"user":"ops","password":"${SHORT}"}`,
      '{"user":"ops","password":"[REDACTED]"}',
    ],
    [
      'Basic base64(id:pw)',
      `Authorization: Basic ${base64(`ops:${SHORT}`)}`,
      'Authorization: Basic [REDACTED]',
    ],
  ])('blanks one after %s', (_context, text, expected) => {
    new Secret(SHORT);

    expect(sanitizeText(text)).toBe(expected);
  });

  it('blanks one inside a JSON-escaped body in an audit line', () => {
    new Secret(SHORT);
    const log = createMemoryAuditLog();

    log.emit('key.failed', { detail: `sink said {"api_key":"${SHORT}"}` });

    expect(log.lines[0]).not.toContain(SHORT);
    expect(log.events[0]!.detail).toBe('sink said {"api_key":"[REDACTED]"}');
  });

  it('leaves the same characters alone where no credential marker precedes them', () => {
    registerSecretValue('admin');

    expect(sanitizeText('the admin role may roll keys')).toBe('the admin role may roll keys');
    expect(sanitizeValue({ note: 'admin' })).toEqual({ note: 'admin' });
  });

  it('leaves another short value after a marker alone', () => {
    new Secret(SHORT);

    expect(sanitizeText('token=abc123')).toBe('token=abc123');
  });
});
