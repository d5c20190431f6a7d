// The intake's webhook secrets are HMAC keys like the trigger's, held to the same 32-byte minimum
// (issue 18, finding 5): a shorter one is refused where the daemon reads it (at start: exit 2; on
// reload: the old policy stays), naming the policy field and the reference, never the value.
import { appendFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { MIN_SIGNING_KEY_BYTES } from '../../src/inbound/signature.ts';
import { WebhookSecretError } from '../../src/leaks/errors.ts';
import { resolveIntake } from '../../src/leaks/settings.ts';
import { parsePolicy } from '../../src/policy/load.ts';
import { policyYaml, useCliFixture } from '../cli/harness.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';

const SHORT = 's'.repeat(MIN_SIGNING_KEY_BYTES - 1);
const LONG = 'l'.repeat(MIN_SIGNING_KEY_BYTES);

const withIntake = (intake: string): ReturnType<typeof parsePolicy> =>
  parsePolicy(`${policyYaml({ baseUrl: 'http://127.0.0.1:1' })}intake:\n${intake}`, 'policy.yaml');

describe('resolveIntake', () => {
  it('refuses a GitHub webhook secret shorter than 32 bytes, naming the field, without echoing it', async () => {
    const policy = withIntake('  github:\n    webhookSecret: env:GH_SECRET\n    token: env:GH_TOKEN\n');
    const error = await resolveIntake(policy, { GH_SECRET: SHORT }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(WebhookSecretError);
    expect(error).toMatchObject({ code: 'KR_USAGE', field: 'intake.github.webhookSecret' });
    expect((error as Error).message).toContain('intake.github.webhookSecret (env:GH_SECRET)');
    expect((error as Error).message).toContain(`shorter than ${String(MIN_SIGNING_KEY_BYTES)} bytes`);
    expectNoSecrets([(error as Error).message], [SHORT]);
  });

  it('refuses a short GitGuardian signature token the same way, and accepts 32 bytes', async () => {
    const policy = withIntake('  gitguardian:\n    webhookSecret: env:GG_TOKEN\n');
    await expect(resolveIntake(policy, { GG_TOKEN: SHORT })).rejects.toMatchObject({
      field: 'intake.gitguardian.webhookSecret',
    });
    expect((await resolveIntake(policy, { GG_TOKEN: LONG })).gitguardian?.webhookSecret.reveal()).toBe(LONG);
  });
});

describe('keyroll daemon with a short webhook secret', () => {
  const cli = useCliFixture();

  it('exits 2 before serving, naming intake.github.webhookSecret', async () => {
    const file = await cli.writePolicy();
    await appendFile(
      file,
      'intake:\n  github:\n    webhookSecret: env:KR_SHORT_WEBHOOK_SECRET\n    token: env:KR_GITHUB_TOKEN\n',
    );
    const result = await cli.run(
      ['daemon', '-p', 'policy.yaml', '--listen', '127.0.0.1:0', '--state-dir', 'state'],
      { env: { KR_SHORT_WEBHOOK_SECRET: SHORT, KR_GITHUB_TOKEN: 'unused' } },
    );
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('intake.github.webhookSecret (env:KR_SHORT_WEBHOOK_SECRET)');
    expectNoSecrets([result.stderr], [SHORT]);
    expect(cli.emulator.state.totalRolls()).toBe(0);
  });
});
