// "No secret in any form in this output" (invariant 3), the one check every test makes of what
// keyroll printed, logged, alerted, answered or wrote beside a secret. A secret counts as present
// when any spelling the sanitizer blanks appears (src/audit/secret-forms.ts: raw, base64 with and
// without padding, base64url, hex in either case, percent- and form-encoded, JSON-escaped), or a
// base64 run inside a longer base64 text whose bytes hold it (`Basic base64(id:secret)`, a JSON
// blob; sanitize.ts decodes such runs), at each of the three byte alignments and in both alphabets.
// What it reports names a secret by fingerprint only, so a failing test prints no secret either.
import { createHash } from 'node:crypto';
import { expect } from 'vitest';
import { formsOf, MIN_FORM_LENGTH } from '../../src/audit/secret-forms.ts';

export interface LeakHit {
  /** Index of the text that held it. */
  haystack: number;
  /** Which spelling: `raw`, `base64`, `hex`, `percent-encoded`, `base64-embedded`, … */
  form: string;
  /** SHA-256 prefix of the secret, safe to print. */
  fingerprint: string;
}

export interface LeakCheck {
  /** Distinct secrets found in some text. */
  leaked: number;
  hits: LeakHit[];
}

/** Names for the spellings formsOf() produces, in its order; one it adds later is still searched, as `encoded`. */
function spellings(secret: string): [form: string, text: string][] {
  const bytes = Buffer.from(secret, 'utf8');
  const base64 = bytes.toString('base64');
  const hex = bytes.toString('hex');
  const percent = encodeURIComponent(secret);
  return [
    ['raw', secret],
    ['base64', base64],
    ['base64 unpadded', base64.replace(/=+$/, '')],
    ['base64url', bytes.toString('base64url')],
    ['hex', hex],
    ['hex upper-case', hex.toUpperCase()],
    ['percent-encoded', percent],
    ['percent-encoded lower-case', percent.replace(/%[0-9A-F]{2}/g, (escape) => escape.toLowerCase())],
    ['form-encoded', new URLSearchParams({ v: secret }).toString().slice(2)],
    ['JSON-escaped', JSON.stringify(secret).slice(1, -1)],
  ];
}

/** The base64 characters `bytes` fix inside a longer base64 text, for each of the 3 byte alignments. */
function embeddedBase64(bytes: Buffer): string[] {
  const runs: string[] = [];
  for (let offset = 0; offset <= 2; offset++) {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
    runs.push(encoded.slice(Math.ceil((offset * 8) / 6), Math.floor(((offset + bytes.length) * 8) / 6)));
  }
  return runs;
}

/** Every spelling the scan looks for, as [form, text]. The raw value always; encodings of a secret as short as the sanitizer's floor and longer. */
export function secretForms(secret: string): [form: string, text: string][] {
  const named = new Map<string, string>();
  for (const [form, text] of spellings(secret)) if (!named.has(text)) named.set(text, form);
  const forms: [string, string][] = [['raw', secret]];
  for (const text of formsOf(secret)) if (text !== secret) forms.push([named.get(text) ?? 'encoded', text]);
  if (secret.length >= MIN_FORM_LENGTH) {
    for (const run of embeddedBase64(Buffer.from(secret, 'utf8'))) {
      forms.push(
        ['base64-embedded', run],
        ['base64url-embedded', run.replace(/\+/g, '-').replace(/\//g, '_')],
      );
    }
  }
  return forms;
}

const fingerprintOf = (secret: string): string =>
  createHash('sha256').update(secret).digest('hex').slice(0, 12);

/** Which of `secrets` appear in which of `haystacks`, in any form. Hex is matched in any case. */
export function findSecrets(haystacks: readonly string[], secrets: readonly string[]): LeakCheck {
  const hits: LeakHit[] = [];
  const leaked = new Set<string>();
  const lowered = haystacks.map((text) => text.toLowerCase());
  for (const secret of new Set(secrets)) {
    if (secret.length === 0) continue;
    // Hex is searched once, in any case (an upper-case dump, a mixed-case one).
    const forms = secretForms(secret).filter(([form]) => form !== 'hex upper-case');
    for (const [form, text] of forms) {
      const hex = form === 'hex';
      haystacks.forEach((haystack, index) => {
        if (hex ? (lowered[index] ?? '').includes(text) : haystack.includes(text)) {
          hits.push({ haystack: index, form, fingerprint: fingerprintOf(secret) });
          leaked.add(secret);
        }
      });
    }
  }
  return { leaked: leaked.size, hits };
}

/** Fails the test when any of `secrets` appears in any of `texts` in any form; says which form and where, never the value. */
export function expectNoSecrets(
  texts: readonly string[],
  secrets: readonly string[],
  where = 'the output',
): void {
  const { hits } = findSecrets(texts, secrets);
  expect(hits, `${String(hits.length)} spelling(s) of a secret in ${where}`).toEqual([]);
}
