// keyroll's own API credential in the AWS-native rotation function (src/lambda/api-credential.ts):
// the function's environment holds only the ARN of the secret that holds it
// (KEYROLL_API_TOKEN_SECRET_ARN), and the function reads the value from Secrets Manager (moto) at
// run time. Fails on the commit before it: the handler had no way to read the credential, only a
// value resolved into its environment at deploy time.
import { randomUUID } from 'node:crypto';
import { CreateSecretCommand, PutSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { afterEach, describe, expect, it } from 'vitest';
import { useEmulator } from '../support/emulator.ts';
import { errorCode } from '../../src/errors.ts';
import { SLOT_B, pendingVersions, startNativeBench, type NativeBench } from '../support/aws-native-bench.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { run, sdkClient } from './aws-fixtures.ts';
import { motoServer, type MotoServer } from './servers.ts';

const OWNER = 'usr_demo_owner';

const emulator = useEmulator();
let current: NativeBench | undefined;
let counter = 0;

afterEach(() => {
  current?.close();
  current = undefined;
});

/** A secret in moto holding `value` as keyroll's API credential; its ARN. */
async function credentialSecret(server: MotoServer, value: string): Promise<string> {
  counter += 1;
  const client = sdkClient(server);
  try {
    const created = await client.send(
      new CreateSecretCommand({
        Name: `keyroll-test/${run}/api-credential-${String(counter)}`,
        SecretString: value,
      }),
    );
    if (created.ARN === undefined) throw new Error('moto returned no ARN');
    return created.ARN;
  } finally {
    client.destroy();
  }
}

/** The error and every cause under it. */
function chain(error: unknown): unknown[] {
  const errors: unknown[] = [];
  for (let at = error; at !== undefined && errors.length < 5; at = at instanceof Error ? at.cause : undefined)
    errors.push(at);
  return errors;
}

describe("aws-native rotation: keyroll's API credential read from Secrets Manager", () => {
  it('rotates with only KEYROLL_API_TOKEN_SECRET_ARN set: no value in process.env, the audit lines or the alerts', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const credential = emulator.state.issueAccessToken(OWNER, 3600).token;
    const arn = await credentialSecret(server, credential);
    current = await startNativeBench(server, emulator, { apiTokenSecretArn: arn });
    const before = process.env.KEYROLL_API_TOKEN;

    expect(await current.rotate(randomUUID())).toEqual(['rolled', 'nothing-to-do', 'tested', 'finished']);
    expect((await current.value('AWSCURRENT'))?.keyId).toBe(SLOT_B);
    expect(process.env.KEYROLL_API_TOKEN).toBe(before);
    expectNoSecrets(
      [...current.lines, JSON.stringify(current.alerter.alerts)],
      [credential, ...emulator.state.mintedSecrets()],
      "the rotation function's audit lines and alerts",
    );
  });

  it('reads the credential again at once when the API refuses it (401), not only after the cache time', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const dead = `kmo_at_${randomUUID()}`;
    const arn = await credentialSecret(server, dead);
    current = await startNativeBench(server, emulator, { apiTokenSecretArn: arn });
    const rollsBefore = emulator.state.rollCount(SLOT_B);

    const refused = await current.step('createSecret', randomUUID()).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(errorCode(refused)).toBe('KR_RUN_CREDENTIAL_REFUSED');
    expect(emulator.state.rollCount(SLOT_B)).toBe(rollsBefore);
    expect(pendingVersions(await current.stages())).toEqual([]);

    // The credential is rotated: the new value in the secret, the cached one dead at the API.
    const live = emulator.state.issueAccessToken(OWNER, 3600).token;
    const client = sdkClient(server);
    await client.send(new PutSecretValueCommand({ SecretId: arn, SecretString: live }));
    client.destroy();
    // The same container, well within the cache time: the 401 makes it read the secret again.
    expect(await current.rotate(randomUUID())).toEqual(['rolled', 'nothing-to-do', 'tested', 'finished']);
    expect(emulator.state.rollCount(SLOT_B)).toBe(rollsBefore + 1);
    expectNoSecrets(
      [...current.lines, JSON.stringify(current.alerter.alerts)],
      [dead, live, ...emulator.state.mintedSecrets()],
      "the rotation function's audit lines and alerts",
    );
  });

  it('fails createSecret with a typed error naming the ARN when the secret cannot be read; nothing is rolled', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const arn = `arn:aws:secretsmanager:${server.region}:123456789012:secret:keyroll-test/${run}/no-such-credential-AbCdEf`;
    current = await startNativeBench(server, emulator, { apiTokenSecretArn: arn });
    const rollsBefore = emulator.state.rollCount(SLOT_B);

    const failed = await current.step('createSecret', randomUUID()).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(errorCode(failed)).toBe('KR_API_CREDENTIAL_UNAVAILABLE');
    expect(failed instanceof Error ? failed.message : '').toContain(arn);
    const unreadable = chain(failed).find(
      (error) => errorCode(error) === 'KR_NATIVE_API_CREDENTIAL_UNREADABLE',
    );
    expect(unreadable).toBeInstanceOf(Error);
    expect((unreadable as Error).message).toContain(arn);
    expect((unreadable as Error).message).toContain('ResourceNotFoundException');
    expect(emulator.state.rollCount(SLOT_B)).toBe(rollsBefore);
    expect(pendingVersions(await current.stages())).toEqual([]);
    // Audited as any failed rotation (invariant 7), with the code and the ARN.
    const failure = current.lines
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((line) => line.event === 'key.failed');
    expect(failure).toMatchObject({ errorCode: 'KR_API_CREDENTIAL_UNAVAILABLE' });
    expect(String(failure?.error)).toContain(arn);
  });
});
