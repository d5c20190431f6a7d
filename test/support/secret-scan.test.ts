// The scan every test runs over keyroll's output must catch what it claims to catch: every spelling
// the sanitizer knows, and a secret inside a longer base64 text at any alignment; and it must agree
// with the sanitizer, which blanks whatever the scan would find.
import { afterEach, describe, expect, it } from 'vitest';
import { resetSanitizerForTests, sanitizeText } from '../../src/audit/sanitize.ts';
import { formsOf } from '../../src/audit/secret-forms.ts';
import { Secret } from '../../src/audit/secret.ts';
import { findSecrets, secretForms } from './secret-scan.ts';

const SECRET = 'kr_live_3f9a1c2b7d8e4f60a1b2c3d4e5f60718';
/** Has characters that percent-, form- and JSON-encoding each spell their own way. */
const PUNCTUATED = 'p@ss/word+with spaces&"quotes"*';

/** A longer base64 text holding `secret` after `prefix`, in the standard or URL alphabet. */
const blob = (secret: string, prefix: string, alphabet: 'base64' | 'base64url'): string =>
  Buffer.from(`{"x":"${prefix}${secret}","y":1}`).toString(alphabet);

afterEach(() => {
  resetSanitizerForTests();
});

describe('findSecrets', () => {
  it('finds a secret written raw, naming the text and the form', () => {
    expect(findSecrets(['clean', `token=${SECRET}`], [SECRET])).toMatchObject({
      leaked: 1,
      hits: [{ haystack: 1, form: 'raw' }],
    });
  });

  it('finds every spelling the sanitizer blanks (src/audit/secret-forms.ts)', () => {
    for (const secret of [SECRET, PUNCTUATED]) {
      formsOf(secret).forEach((form, index) => {
        expect(
          findSecrets([`before ${form} after`], [secret]).leaked,
          `spelling #${String(index)} of formsOf()`,
        ).toBe(1);
      });
    }
  });

  it('finds hex in any case', () => {
    const hex = Buffer.from(SECRET).toString('hex');
    for (const text of [hex, hex.toUpperCase(), `${hex.slice(0, 20).toUpperCase()}${hex.slice(20)}`])
      expect(findSecrets([text], [SECRET]).leaked).toBe(1);
  });

  it('finds a secret inside a longer base64 text at every alignment, in both alphabets', () => {
    for (const alphabet of ['base64', 'base64url'] as const) {
      for (const prefix of ['', 'a', 'ab']) {
        expect(
          findSecrets([blob(SECRET, prefix, alphabet)], [SECRET]).leaked,
          `${alphabet}, prefix ${JSON.stringify(prefix)}`,
        ).toBe(1);
      }
    }
  });

  it('counts each secret once however often it appears, and reports only a fingerprint, never the secret', () => {
    const result = findSecrets([SECRET, Buffer.from(SECRET).toString('base64')], [SECRET, SECRET]);
    expect(result.leaked).toBe(1);
    expect(JSON.stringify(result)).not.toContain(SECRET);
  });

  it('finds nothing in clean output, and nothing for an empty value', () => {
    expect(findSecrets(['{"event":"key.rolled","fingerprint":"0a1b2c3d4e5f"}'], [SECRET, ''])).toEqual({
      leaked: 0,
      hits: [],
    });
  });
});

describe('the scan and the sanitizer agree', () => {
  it('what the scan finds in a text, the sanitizer has blanked from it', () => {
    for (const secret of [SECRET, PUNCTUATED]) {
      new Secret(secret); // registers it with the sanitizer, as every secret keyroll handles is
      const texts = [
        ...secretForms(secret)
          .filter(([form]) => !form.endsWith('-embedded'))
          .map(([, text]) => `seen: ${text} (end)`),
        ...(['base64', 'base64url'] as const).flatMap((alphabet) =>
          ['', 'a', 'ab'].map((prefix) => `Basic ${blob(secret, prefix, alphabet)}`),
        ),
      ];
      for (const text of texts) expect(findSecrets([text], [secret]).leaked, 'before sanitizing').toBe(1);
      expect(findSecrets(texts.map(sanitizeText), [secret]).hits).toEqual([]);
    }
  });
});
