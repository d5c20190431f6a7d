// The sanitizer keeps digests, not plaintext (issue 12, section 3): whatever a heap dump or an
// inspector shows of its state holds no secret, no encoded form of it and no 8-character piece.
import { inspect } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { resetSanitizerForTests, sanitizeText, withSecretScope } from '../../src/audit/sanitize.ts';
import { registryStateForTests } from '../../src/audit/secret-registry.ts';
import { formsOf } from '../../src/audit/secret-forms.ts';
import { Secret } from '../../src/audit/secret.ts';

afterEach(() => {
  resetSanitizerForTests();
});

const LONG = 'sk_live_RegistryDumpCheck_9f8e7d6c5b4a3210';
const SHORT = 'Zq7#k2';

function dumps(): string[] {
  const state = registryStateForTests();
  const asJson = JSON.stringify(state, (_key, value: unknown) => {
    if (value instanceof Map) return [...(value as Map<unknown, unknown>).entries()];
    if (value instanceof Set) return [...(value as Set<unknown>).values()];
    return value;
  });
  return [
    asJson,
    inspect(state, {
      depth: Infinity,
      maxArrayLength: Infinity,
      maxStringLength: Infinity,
      showHidden: true,
    }),
  ];
}

describe('the registry state', () => {
  it('holds no plaintext of long or short secrets, pinned, loose or scoped', async () => {
    new Secret(LONG);
    new Secret(SHORT).pinned();
    await withSecretScope(() => {
      new Secret(`${LONG}-scoped`);
      const dumped = dumps();
      for (const text of dumped) expect(text).not.toContain(`${LONG}-scoped`);
      return Promise.resolve();
    });

    for (const text of dumps()) {
      for (const form of formsOf(LONG))
        for (let i = 0; i + 8 <= form.length; i++) expect(text).not.toContain(form.slice(i, i + 8));
      expect(text).not.toContain(SHORT);
    }
    // The digests are enough to find both.
    expect(sanitizeText(`${LONG} and token=${SHORT}`)).toBe('[REDACTED] and token=[REDACTED]');
  });
});
