// `keyroll aws enable-rotation` / `disable-rotation` against moto, and `run`, `plan`, `status`
// with an aws-native entry: Secrets Manager owns its schedule, so run leaves it alone. moto's
// RotateSecret looks the rotation function up (and runs its testSecret step), so the test gives
// moto a function of its own (moto's Lambda without Docker: every invocation succeeds).
import { randomUUID } from 'node:crypto';
import { CreateSecretCommand, DescribeSecretCommand } from '@aws-sdk/client-secrets-manager';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { useCliFixture } from '../cli/harness.ts';
import { motoEnv, sdkClient } from './aws-fixtures.ts';
import { motoServer, type MotoServer } from './servers.ts';

const cli = useCliFixture();
const SLOT_A = 'key_demo_billing_a';
const SLOT_B = 'key_demo_billing_b';

function authorization(server: MotoServer, service: string): string {
  return `AWS4-HMAC-SHA256 Credential=${server.accessKeyId}/20260101/${server.region}/${service}/aws4_request, SignedHeaders=host, Signature=0`;
}

/** A Lambda function moto knows (and its role), for RotateSecret to find; returns its ARN. */
async function motoRotationFunction(server: MotoServer): Promise<string> {
  await request(`${server.endpoint}/moto-api/config`, {
    method: 'POST',
    body: JSON.stringify({ lambda: { use_docker: false } }),
  }).then((r) => r.body.dump());
  const name = `keyroll-rotation-${randomUUID().slice(0, 8)}`;
  const role = await request(`${server.endpoint}/`, {
    method: 'POST',
    headers: {
      authorization: authorization(server, 'iam'),
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({
      Action: 'CreateRole',
      Version: '2010-05-08',
      RoleName: name,
      AssumeRolePolicyDocument: '{}',
    }).toString(),
  });
  const roleArn = /<Arn>([^<]+)<\/Arn>/.exec(await role.body.text())?.[1];
  if (roleArn === undefined) throw new Error('moto created no role');
  const created = await request(`${server.endpoint}/2015-03-31/functions`, {
    method: 'POST',
    headers: { authorization: authorization(server, 'lambda'), 'content-type': 'application/json' },
    // An empty zip: moto keeps the code, and its Lambda without Docker never runs it.
    body: JSON.stringify({
      FunctionName: name,
      Runtime: 'nodejs24.x',
      Role: roleArn,
      Handler: 'index.handler',
      Code: { ZipFile: 'UEsFBgAAAAAAAAAAAAAAAAAAAAAAAA==' },
    }),
  });
  const fn = (await created.body.json()) as { FunctionArn?: string };
  if (fn.FunctionArn === undefined) throw new Error('moto created no function');
  return fn.FunctionArn;
}

describe('keyroll aws enable-rotation / disable-rotation (moto)', () => {
  it('enables Secrets Manager rotation with the function and the schedule from maxAge, run skips the key, plan and status name the scheduler, disable turns it off', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const org = cli.emulator.state.apiKey(SLOT_A).organizationId;
    const name = `keyroll-native/${randomUUID().slice(0, 8)}/billing`;
    const sdk = sdkClient(server);
    await sdk.send(
      new CreateSecretCommand({
        Name: name,
        SecretString: JSON.stringify({ apiKey: cli.emulator.state.currentSecret(SLOT_A), keyId: SLOT_A }),
      }),
    );
    await cli.writeFile(
      'policy.yaml',
      `version: 1
api:
  baseUrl: ${cli.emulator.url}
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
backends:
  aws: { kind: aws, endpoint: "${server.endpoint}", region: ${server.region}, timeoutMs: 5000 }
keys:
  - id: billing-api
    organization: ${org}
    slots: [${SLOT_A}, ${SLOT_B}]
    consumerRefresh: 1h
    maxAge: 30d
    scheduler: aws-native
    destinations: [{ backend: aws, path: ${name} }]
`,
    );
    const env = { env: motoEnv(server) };
    const functionArn = await motoRotationFunction(server);
    // validate names the missing switch for an aws-native key, and not the other way round.
    const before = await cli.run(['validate'], env);
    expect(before.stdout).toContain(
      'is for AWS-native rotation (scheduler: aws-native) but has no rotation enabled',
    );
    const enabled = await cli.run(
      ['aws', 'enable-rotation', '--key', 'billing-api', '--function-arn', functionArn],
      env,
    );
    expect(enabled.stderr).toBe('');
    expect(enabled.code).toBe(0);
    expect(enabled.lastLine).toContain('every 30 days');
    const described = await sdk.send(new DescribeSecretCommand({ SecretId: name }));
    expect(described.RotationEnabled).toBe(true);
    expect(described.RotationLambdaARN).toBe(functionArn);
    expect(described.RotationRules?.AutomaticallyAfterDays).toBe(30);
    const after = await cli.run(['validate'], env);
    expect(after.code).toBe(0);
    expect(after.stdout).toContain(`destination aws:${name}`);
    expect(after.stdout).not.toContain('rotation enabled');

    const rolls = cli.emulator.state.apiKey(SLOT_B).rollCount + cli.emulator.state.apiKey(SLOT_A).rollCount;
    const ran = await cli.run(['run'], env);
    expect(ran.code).toBe(0);
    expect(ran.events.find((e) => e.event === 'key.skipped')?.why).toBe('aws-native');
    expect(cli.emulator.state.apiKey(SLOT_B).rollCount + cli.emulator.state.apiKey(SLOT_A).rollCount).toBe(
      rolls,
    );

    const plan = await cli.run(['plan', '-o', 'json'], env);
    expect((JSON.parse(plan.stdout) as { keys: { scheduler: string }[] }).keys[0]?.scheduler).toBe(
      'aws-native',
    );
    const status = await cli.run(['status', '-o', 'json'], env);
    expect(status.stdout).toContain('"scheduler": "aws-native"');

    const disabled = await cli.run(['aws', 'disable-rotation', '--key', 'billing-api'], env);
    expect(disabled.code).toBe(0);
    expect((await sdk.send(new DescribeSecretCommand({ SecretId: name }))).RotationEnabled).toBe(false);
    sdk.destroy();
  });
});
