// docs/policy.md is where an operator looks a field up: every field a key (and so `defaults`)
// accepts is named there, slot and drift fields included.
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { Defaults, KeyInput } from '../../src/policy/schema.ts';
import { BUILTIN_DEFAULTS } from '../../src/policy/settings.ts';

const DOC = new URL('../../docs/policy.md', import.meta.url);

describe('docs/policy.md', () => {
  it('names every field of a key and of defaults', async () => {
    const text = await readFile(DOC, 'utf8');
    for (const field of new Set([...Object.keys(KeyInput.shape), ...Object.keys(Defaults.shape)])) {
      expect(text, field).toContain(`\`${field}`);
    }
  });

  it('states the built-in defaults of driftCheck and onDrift', async () => {
    const text = await readFile(DOC, 'utf8');
    expect(text).toContain(`| \`driftCheck\` | \`${BUILTIN_DEFAULTS.driftCheck}\` |`);
    expect(text).toContain(`| \`onDrift\` | \`${BUILTIN_DEFAULTS.onDrift}\` |`);
  });

  it('states the built-in defaults of failures (backoff and quarantine)', async () => {
    const text = await readFile(DOC, 'utf8');
    const { backoff, quarantineAfter, remindEvery } = BUILTIN_DEFAULTS.failures;
    expect(text).toContain(`| \`failures.backoff.initial\` | \`${backoff.initial}\` |`);
    expect(text).toContain(`| \`failures.backoff.cap\` | \`${backoff.cap}\` |`);
    expect(text).toContain(`| \`failures.backoff.jitter\` | \`${String(backoff.jitter)}\` |`);
    expect(text).toContain(`| \`failures.quarantineAfter\` | \`${String(quarantineAfter)}\` |`);
    expect(text).toContain(`| \`failures.remindEvery\` | \`${remindEvery}\` |`);
  });
});
