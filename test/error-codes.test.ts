// The error-code catalogue (src/error-codes.ts, issue 29 §3) held against src/ and docs/ both
// ways, in the shape of test/audit/docs.test.ts: every code keyroll names is in the catalogue, every
// catalogue code is named in src/ and documented in docs/error-codes.md (generated, and current),
// and no page of docs/ names a code that does not exist. Operators route alerts on these codes.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, type ErrorCode } from '../src/error-codes.ts';
import { catalogueCode } from '../src/errors.ts';
import { ERROR_CODES_PAGE, errorCodesPage, headingsOf } from '../scripts/error-codes-page.ts';

const root = fileURLToPath(new URL('../', import.meta.url));
const catalogue = Object.keys(ERROR_CODES).sort();
/** A whole code: `KR_API_*` (a family, in prose) is none. */
const CODE = /KR_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_])/g;

function filesUnder(dir: string, ext: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })
    .map((path) => join(dir, path.split('\\').join('/')))
    .filter((path) => path.endsWith(ext));
}

function codesIn(paths: readonly string[]): Map<string, string> {
  const found = new Map<string, string>();
  for (const path of paths)
    for (const [code] of readFileSync(join(root, path), 'utf8').matchAll(CODE))
      if (!found.has(code)) found.set(code, path);
  return found;
}

const page = readFileSync(join(root, ERROR_CODES_PAGE), 'utf8');
// Rows look like: | `KR_API_TIMEOUT` | error | yes | [runbook.md: …](runbook.md#…) | meaning |
const rows = [
  ...page.matchAll(
    /^\| `(KR_[A-Z0-9_]+)` \| (critical|error|warning|info) \| (yes|no) \| \[[^\]]*\]\(([^)]+)\) \| (.*) \|$/gm,
  ),
].map((m) => ({
  code: m[1] ?? '',
  severity: m[2],
  retryable: m[3] === 'yes',
  runbook: m[4],
  meaning: m[5],
}));

describe('the error-code catalogue against src/', () => {
  it('holds every code src/ names (no code built from a template: each is written whole)', () => {
    const named = codesIn(
      filesUnder('src', '.ts')
        .filter((path) => path !== 'src/error-codes.ts')
        .concat(filesUnder('src', '.md')),
    );
    const missing = [...named]
      .filter(([code]) => !Object.hasOwn(ERROR_CODES, code))
      .map(([code, path]) => `${code} (${path})`);
    expect(missing, 'add each to src/error-codes.ts').toEqual([]);
    const templates = filesUnder('src', '.ts').filter(
      (path) =>
        path !== 'src/error-codes.ts' && /`KR_[A-Z0-9_]*\$\{/.test(readFileSync(join(root, path), 'utf8')),
    );
    expect(templates, 'a code built from a template escapes the type check').toEqual([]);
  });

  it('holds no code that src/ never uses', () => {
    const named = codesIn(filesUnder('src', '.ts').filter((path) => path !== 'src/error-codes.ts'));
    expect(catalogue.filter((code) => !named.has(code))).toEqual([]);
  });

  it('gives a wrapped error its catalogue code, and KR_UNEXPECTED for a foreign one', () => {
    expect(catalogueCode(Object.assign(new Error('reset'), { code: 'KR_BACKEND_UNAVAILABLE' }))).toBe(
      'KR_BACKEND_UNAVAILABLE',
    );
    expect(catalogueCode(Object.assign(new Error('reset'), { code: 'ECONNRESET' }))).toBe('KR_UNEXPECTED');
    expect(catalogueCode('KR_VERIFY_API_REJECTED')).toBe('KR_VERIFY_API_REJECTED');
  });
});

describe('docs/error-codes.md', () => {
  it('is the page the catalogue renders now (run `npm run --silent docs:error-codes` after changing it)', () => {
    expect(page).toBe(errorCodesPage());
  });

  it('documents every catalogue code, and no code outside it', () => {
    expect(rows.map((row) => row.code).sort()).toEqual(catalogue);
  });

  it("gives each code the catalogue's severity, retryable, runbook section and meaning", () => {
    for (const row of rows) {
      const entry = ERROR_CODES[row.code as ErrorCode];
      expect(
        { severity: row.severity, retryable: row.retryable, runbook: row.runbook, meaning: row.meaning },
        row.code,
      ).toEqual({ ...entry });
    }
  });

  it('links each code to a section that exists on its page', () => {
    const dead = Object.entries(ERROR_CODES)
      .filter(([, { runbook }]) => {
        const [file = '', anchor = ''] = runbook.split('#');
        return !headingsOf(file).has(anchor);
      })
      .map(([code, { runbook }]) => `${code} → ${runbook}`);
    expect(dead).toEqual([]);
  });
});

describe('the error codes docs/ names', () => {
  it('are all in the catalogue (no page names a code keyroll never raises)', () => {
    const named = codesIn(filesUnder('docs', '.md').concat(['README.md']));
    expect(
      [...named]
        .filter(([code]) => !Object.hasOwn(ERROR_CODES, code))
        .map(([code, path]) => `${code} (${path})`),
    ).toEqual([]);
  });
});
