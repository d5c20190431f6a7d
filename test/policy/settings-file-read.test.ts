// The daemon's settings file is read as the policy file is (src/policy/load.ts readPolicyText):
// the same cap, the same UTF-8 rule and the same sentences when it cannot be read.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PolicyError } from '../../src/policy/errors.ts';
import { loadPolicy } from '../../src/policy/load.ts';
import { loadSharedSettings } from '../../src/policy/settings-file.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'keyroll-settings-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function refusal(load: (file: string) => Promise<unknown>, file: string): Promise<PolicyError> {
  const caught: unknown = await load(file).then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(caught).toBeInstanceOf(PolicyError);
  return caught as PolicyError;
}

describe('reading the daemon settings file', () => {
  it.each([
    ['a missing file', (): string => join(dir, 'absent.yaml')],
    ['a directory', (): string => dir],
  ])('refuses %s with the policy file’s code and sentence', async (_, fileOf) => {
    const settings = await refusal(loadSharedSettings, fileOf());
    const policy = await refusal(loadPolicy, fileOf());
    expect(settings.code).toBe('KR_POLICY_UNREADABLE');
    expect(settings.issues.map((issue) => issue.message)).toEqual(
      policy.issues.map((issue) => issue.message),
    );
  });

  it('refuses a file over 1 MiB with the policy file’s sentence', async () => {
    const file = join(dir, 'big.yaml');
    await writeFile(file, `version: 1\n#${'x'.repeat(1024 * 1024)}\n`);
    const settings = await refusal(loadSharedSettings, file);
    const policy = await refusal(loadPolicy, file);
    expect(settings.issues.map((issue) => issue.message)).toEqual(
      policy.issues.map((issue) => issue.message),
    );
  });
});
