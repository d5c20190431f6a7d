// The emulator against docs/api.md: one row per spec statement, each on a
// fresh emulator over real loopback HTTP, with an injected clock for rate-limit windows.
import { afterEach, describe, it } from 'vitest';
import { consentStatements } from './conformance/consent.ts';
import { envelopeStatements } from './conformance/envelope.ts';
import { listStatements } from './conformance/list.ts';
import { rollStatements } from './conformance/roll.ts';
import type { SpecStatement } from './conformance/statement.ts';
import { updateProjectStatements } from './conformance/update-project.ts';
import { startTestEmulator, type EmulatorEnv } from './support.ts';

const SPEC_STATEMENTS: readonly SpecStatement[] = [
  ...rollStatements,
  ...listStatements,
  ...updateProjectStatements,
  ...consentStatements,
  ...envelopeStatements,
];

describe('emulator conformance to the key-management API spec', () => {
  let env: EmulatorEnv | undefined;
  afterEach(async () => {
    await env?.emu.close();
    env = undefined;
  });

  for (const row of SPEC_STATEMENTS) {
    it(row.statement, async () => {
      env = await startTestEmulator(row.options);
      await row.check(env);
    });
  }
});
