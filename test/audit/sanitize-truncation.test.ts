// Sanitize first, then cut (issue 12, section 3): a secret cut before it is sanitized leaves a
// prefix no matcher recognises. Every place that cuts text sanitizes before, and a text that
// already arrives cut (a capped read) is blanked from the secret's start to its end.
import { afterEach, describe, expect, it } from 'vitest';
import { statusError } from '../../src/api/decode.ts';
import { createMemoryAuditLog } from '../../src/audit/logger.ts';
import {
  resetSanitizerForTests,
  sanitizeText,
  sanitizeValue,
  truncateSanitized,
} from '../../src/audit/sanitize.ts';
import { Secret } from '../../src/audit/secret.ts';
import { vaultErrorText } from '../../src/backends/vault/client.ts';

afterEach(() => {
  resetSanitizerForTests();
});

// 36 characters.
const TOKEN = 'kr_tok_Q8vX2mN5pL9wR3tY7zB4cF6hJ1kD';

/** Every 8-character piece of the token: none may survive anywhere. */
function expectNoPieceOf(text: string): void {
  for (let i = 0; i + 8 <= TOKEN.length; i++) expect(text).not.toContain(TOKEN.slice(i, i + 8));
}

describe('a secret cut short', () => {
  it('blanks a text that ends with the first 30 of the 36 characters (a capped read)', () => {
    new Secret(TOKEN);
    const body = `{"error":"unauthorized","echo":"Bearer ${TOKEN}"}`;
    const capped = body.slice(0, body.indexOf(TOKEN) + 30);

    const clean = sanitizeText(capped);

    expectNoPieceOf(clean);
    expect(clean).toBe('{"error":"unauthorized","echo":"Bearer [REDACTED]');
  });

  it('blanks the cut-off end of a string inside a value (an alert detail)', () => {
    new Secret(TOKEN);

    const clean = sanitizeValue({ detail: `answered 401: ${TOKEN.slice(0, 20)}`, other: 'kept' });

    expect(clean).toEqual({ detail: 'answered 401: [REDACTED]', other: 'kept' });
  });

  it('does not blank an ending that only shares the first 8 characters in another alphabet', () => {
    new Secret(TOKEN);
    const text = `the prefix is ${TOKEN.slice(0, 8)} (see docs)`;

    expect(sanitizeText(text)).toBe(text);
  });
});

describe('truncateSanitized', () => {
  it('leaves no prefix of a 36-char token echoed in a 401 body cut to 30 of its characters', () => {
    new Secret(TOKEN);
    const body = `401 Unauthorized: token ${TOKEN} is invalid`;
    const cutAt = body.indexOf(TOKEN) + 30;

    const excerpt = truncateSanitized(body, cutAt);

    expectNoPieceOf(excerpt);
    expect(excerpt).toBe('401 Unauthorized: token [REDACTED] is invalid'.slice(0, cutAt));
  });

  it('returns a short text sanitized and whole', () => {
    new Secret(TOKEN);

    expect(truncateSanitized(`a ${TOKEN} b`, 500)).toBe('a [REDACTED] b');
  });
});

describe('the places that cut text', () => {
  it("the API client: an error envelope's message echoing the token, cut to 500 characters", () => {
    new Secret(TOKEN);
    const message = `${'x'.repeat(470)}${TOKEN} was refused`;
    const text = JSON.stringify({ success: false, error: { code: 'UNAUTHORIZED', message } });

    const error = statusError(
      'listProjects',
      { status: 401, headers: {}, contentType: 'application/json', text, bytes: text.length },
      Date.now(),
    );
    const log = createMemoryAuditLog();
    log.emit('key.failed', { err: error });

    expectNoPieceOf(String(error.apiMessage));
    expectNoPieceOf(log.lines[0]!);
  });

  it('the Vault client: an error text echoing the token, cut to 200 characters', () => {
    new Secret(TOKEN);

    const text = vaultErrorText({ errors: [`${'y'.repeat(180)} ${TOKEN}`] });

    expectNoPieceOf(text);
  });
});
