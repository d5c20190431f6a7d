// Issue 27 §2 against moto: whoever may only tag a secret (secretsmanager:TagResource) copies the
// owner and rotation of the intent marker into `keyroll:lock-released` while runner A holds the key
// lock before its roll. Before, that tag freed A's live lock: runner B rotated, A then rolled (B's
// stored secret died) and A's write was refused (KR_LOCK_LOST), leaving the key dead until the next
// run. Now a release mark frees a lock only with the release key whose digest the lock value carries
// (src/backends/aws/lock/value.ts), which only its holder knows: B finds the key busy, A rotates,
// and the forged mark is audited (key.record.distrusted, problem `forged`).
import { randomUUID } from 'node:crypto';
import { DescribeSecretCommand, TagResourceCommand } from '@aws-sdk/client-secrets-manager';
import { expect, it } from 'vitest';
import { emulatorApi, useEmulator } from '../support/emulator.ts';
import { staticCredential } from '../../src/api/credentials.ts';
import { createAuditLog, type AuditRecord } from '../../src/audit/logger.ts';
import { Secret } from '../../src/audit/secret.ts';
import type { BackendConfig } from '../../src/backends/config.ts';
import { TAG_INTENT, TAG_LOCK_RELEASED } from '../../src/backends/aws/record-tags.ts';
import type { Policy } from '../../src/policy/schema.ts';
import { createRuntime, type RuntimeOptions } from '../../src/rotation/runtime.ts';
import { runRotations, type RunSummary } from '../../src/rotation/run.ts';
import type { RunTrigger } from '../../src/rotation/types.ts';
import { RecordingAlerter, keyPolicy } from '../rotation/harness.ts';
import { motoEnv, sdkClient } from './aws-fixtures.ts';
import { describeWithMoto } from '../support/moto.ts';

const KEY = 'key_demo_billing';
describeWithMoto('a forged lock release tag on AWS (moto)', ({ server }) => {
  const emulator = useEmulator();

  it("does not free runner A's live lock: runner B finds the key busy, A rotates, the forgery is audited", async () => {
    const path = `keyroll-forged-release/${randomUUID().slice(0, 8)}/${KEY}`;
    const lines: string[] = [];
    const audit = createAuditLog({ destination: { write: (line: string) => void lines.push(line) } });
    const key = keyPolicy(KEY, emulator.state.apiKey(KEY).organizationId, {
      destinations: [
        {
          backend: 'real',
          target: { path, shape: { format: 'json', secretField: 'apiKey', fields: ['keyId'] } },
        },
      ],
    });
    const backend: BackendConfig = {
      kind: 'aws',
      endpoint: server.endpoint,
      region: server.region,
      createIfMissing: true,
      tags: {},
      timeoutMs: 5000,
    };
    const policy: Policy = {
      file: 'forged-release.yaml',
      api: emulatorApi(emulator.url),
      backends: { real: backend },
      alerts: { sinks: {} },
      keys: [key],
    };
    const run = async (
      trigger: RunTrigger,
      options: Pick<RuntimeOptions, 'checkpoint'> = {},
    ): Promise<RunSummary> => {
      const runtime = await createRuntime(policy, {
        audit,
        alerter: new RecordingAlerter(),
        credentials: staticCredential(new Secret('demo-owner-token')),
        env: motoEnv(server),
        ...options,
      });
      try {
        return await runRotations(runtime, { keys: [key], trigger, concurrency: 1 });
      } finally {
        await runtime.close();
      }
    };
    const leak = (actor: string): RunTrigger => ({ reason: 'leak', force: true, actor });

    // The key has been rotated once: its value and its lock live on the secret.
    expect((await run(leak('setup'))).rotated).toBe(1);
    const rollsBefore = emulator.state.rollCount(KEY);

    // Runner A holds the lock and has set its intent marker; it waits right before its roll.
    let atRoll: () => void = () => undefined;
    const reached = new Promise<void>((resolve) => {
      atRoll = resolve;
    });
    let resume: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      resume = resolve;
    });
    const runA = run(leak('runner-a'), {
      checkpoint: async (step) => {
        if (step !== 'roll') return;
        atRoll();
        await held;
      },
    });
    await reached;

    // A tag-only principal copies the marker's owner and rotation into the release tag.
    const sdk = sdkClient(server);
    try {
      const tags = (await sdk.send(new DescribeSecretCommand({ SecretId: path }))).Tags ?? [];
      const [rotationId, , , owner] = (tags.find((tag) => tag.Key === TAG_INTENT)?.Value ?? '').split(' ');
      expect(owner).toBeDefined();
      await sdk.send(
        new TagResourceCommand({
          SecretId: path,
          Tags: [{ Key: TAG_LOCK_RELEASED, Value: `${owner ?? ''} ${rotationId ?? ''}` }],
        }),
      );
    } finally {
      sdk.destroy();
    }

    const linesBeforeB = lines.length;
    const byB = await run(leak('runner-b'));
    resume();
    const byA = await runA;

    expect(byB.outcomes[0], 'runner B').toMatchObject({ result: 'busy' });
    expect(byA.outcomes[0], 'runner A').toMatchObject({ result: 'rotated' });
    expect(emulator.state.rollCount(KEY) - rollsBefore).toBe(1);
    // What A stored is the key's working secret.
    const runtime = await createRuntime(policy, {
      audit: createAuditLog({ destination: { write: () => undefined } }),
      alerter: new RecordingAlerter(),
      credentials: staticCredential(new Secret('demo-owner-token')),
      env: motoEnv(server),
    });
    try {
      const [stored] = runtime.resolveKey(key).destinations;
      const secret = (await stored.backend.readSecret(stored.target))?.secret.reveal();
      expect(secret !== undefined && emulator.state.isLiveSecret(KEY, secret)).toBe(true);
    } finally {
      await runtime.close();
    }
    // B said why it did not take the lock: the release mark is forged.
    const distrusted = lines
      .slice(linesBeforeB)
      .map((line) => JSON.parse(line) as AuditRecord)
      .filter((e) => e.event === 'key.record.distrusted');
    expect(distrusted.map((e) => [e.record, e.field, e.problem, e.action])).toContainEqual([
      'lock',
      'releaseMark',
      'forged',
      'ignored',
    ]);
  });
});
