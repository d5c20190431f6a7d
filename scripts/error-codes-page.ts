// docs/error-codes.md as the catalogue (src/error-codes.ts) renders it: written by
// scripts/generate-error-codes.ts, held current by test/error-codes.test.ts. Each code links to
// the section its runbook anchor names, by that section's heading; an anchor that names no
// section of its page is an error here, so a renamed heading cannot leave a dead link behind.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ERROR_CODES, type ErrorCode } from '../src/error-codes.ts';

export const ERROR_CODES_PAGE = 'docs/error-codes.md';

const docsDir = fileURLToPath(new URL('../docs/', import.meta.url));

/** GitHub's anchor of a heading: lower case, punctuation dropped, each space a hyphen. */
export function headingAnchor(heading: string): string {
  return heading
    .trim()
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The headings of a page of docs/, by their anchors. */
export function headingsOf(page: string): Map<string, string> {
  const text = readFileSync(`${docsDir}${page}`, 'utf8').replace(/^```[\s\S]*?^```/gm, '');
  return new Map(
    [...text.matchAll(/^#{1,6} (.+)$/gm)].map((m): [string, string] => [
      headingAnchor(m[1] ?? ''),
      m[1] ?? '',
    ]),
  );
}

export function errorCodesPage(): string {
  const pages = new Map<string, Map<string, string>>();
  const codes = (Object.keys(ERROR_CODES) as ErrorCode[]).sort();
  const rows = codes.map((code) => {
    const { severity, retryable, runbook, meaning } = ERROR_CODES[code];
    const [page = '', anchor = ''] = runbook.split('#');
    const headings = pages.get(page) ?? headingsOf(page);
    pages.set(page, headings);
    const heading = headings.get(anchor);
    if (heading === undefined) throw new Error(`${code}: ${runbook} names no section of docs/${page}`);
    return `| \`${code}\` | ${severity} | ${retryable ? 'yes' : 'no'} | [${page}: ${heading.replace(/\|/g, '\\|')}](${runbook}) | ${meaning} |`;
  });
  return [
    '# Error codes',
    '',
    '<!-- Generated from src/error-codes.ts by `npm run --silent docs:error-codes`; do not edit by hand. -->',
    '',
    'Every code keyroll puts on an error, a `key.failed` or other audit event, an alert or a span. The',
    'codes are stable: alert routing may rely on them, and none ever changes its spelling. An error',
    "that is not keyroll's own keeps the code it came with in audit events (a Node system error's",
    '`ECONNRESET`, say); a rotation step that fails on one reports `KR_UNEXPECTED`.',
    '',
    '- **severity**: how bad it usually is, the severity of the alert that carries it where one is sent',
    '  (an alert may say more, e.g. critical when the key may be unusable: [runbook.md](runbook.md#what-each-alert-means));',
    '- **retryable**: whether the same call, or the next run, may succeed without a person acting;',
    '- **what to do**: the section that says it.',
    '',
    '| code | severity | retryable | what to do | meaning |',
    '|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}
