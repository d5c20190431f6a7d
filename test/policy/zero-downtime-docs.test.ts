// docs/zero-downtime.md is what an operator copies from when moving a key to two slots: every
// policy example on the page must load as written, the migration must list the key consumers use
// today first (slots[0] is active until keyroll has recorded one), and the defaults the page
// quotes must be the ones keyroll applies.
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { parsePolicy } from '../../src/policy/load.ts';
import { BUILTIN_DEFAULTS } from '../../src/policy/settings.ts';

const page = await readFile(new URL('../../docs/zero-downtime.md', import.meta.url), 'utf8');

// The page's examples write to a backend named vault-prod; any backend kind serves the check.
const HEAD = `version: 1
api:
  baseUrl: https://keys.example.com
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
backends:
  vault-prod: { kind: file, directory: ./secrets }
`;

/** The page's YAML blocks, dedented; a block that is one list item becomes a `keys:` list. */
function yamlExamples(): string[] {
  return [...page.matchAll(/^( *)```yaml\n([\s\S]*?)^ *```$/gm)].map((match) => {
    const lines = (match[2] ?? '').split('\n').filter((line) => line.trim() !== '');
    const indent = Math.min(...lines.map((line) => line.length - line.trimStart().length));
    const body = lines.map((line) => line.slice(indent)).join('\n');
    return body.startsWith('keys:') ? `${body}\n` : `keys:\n${body.replace(/^/gm, '  ')}\n`;
  });
}

describe('docs/zero-downtime.md', () => {
  it('every policy example loads as written', () => {
    const examples = yamlExamples();
    expect(examples.length).toBeGreaterThanOrEqual(3);
    for (const example of examples)
      expect(() => parsePolicy(`${HEAD}${example}`, 'zero-downtime.md'), example).not.toThrow();
  });

  it('the migration keeps the destinations and lists the key consumers use today as slots[0]', () => {
    const entries = yamlExamples().map(
      (example) => parsePolicy(`${HEAD}${example}`, 'zero-downtime.md').keys[0],
    );
    const before = entries.find((key) => key?.slots === undefined);
    const after = entries.find((key) => key?.slots?.includes(before?.id ?? '') === true);
    expect(before).toBeDefined();
    expect(after?.slots?.[0]).toBe(before?.id);
    expect(after?.destinations).toEqual(before?.destinations);
    expect(after?.minIntervalMs).toBeGreaterThanOrEqual(after?.consumerRefreshMs ?? Number.POSITIVE_INFINITY);
  });

  it('quotes the defaults keyroll applies', () => {
    const prose = page.replace(/\s+/g, ' ');
    expect(prose).toContain(`\`driftCheck\` (default \`${BUILTIN_DEFAULTS.driftCheck}\`)`);
    expect(prose).toContain(`\`onDrift: ${BUILTIN_DEFAULTS.onDrift}\` (the default)`);
    expect(prose).toContain(`The built-in \`minInterval\` is \`${BUILTIN_DEFAULTS.minInterval}\``);
  });
});
