// Issue 29 §2: the intake rotates through its LeakRotator port (the daemon: Launcher.runOne). A
// port that rejects (the launcher heard no outcome) is the key's failure at step `rotate`, audited
// and alerted with the rejection's code; the alert stays open and no outcome is made up.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Secret } from '../../src/audit/secret.ts';
import { LeakIntake } from '../../src/leaks/intake.ts';
import { LauncherError } from '../../src/scheduler/errors.ts';
import { keyPolicy, startBench, type Bench } from '../rotation/harness.ts';

const KEY = 'key_demo_billing';

let bench: Bench | undefined;
afterEach(async () => {
  await bench?.close();
  bench = undefined;
});

describe('LeakIntake: its rotate port rejects', () => {
  it('reports the key failed at step rotate with the rejection code, and leaves the alert open', async () => {
    bench = await startBench({ keys: (org) => [keyPolicy(KEY, org(KEY))] });
    const b = bench;
    // A first rotation stores a live value: that value leaks.
    expect((await b.run()).rotated).toBe(1);
    const stored = JSON.parse(await readFile(join(b.dir, 'secrets', `${KEY}.json`), 'utf8')) as {
      apiKey: string;
    };
    const runtime = await b.runtime();
    const asked: string[] = [];
    const intake = new LeakIntake({
      policy: () => b.policy,
      runtime: () => runtime,
      alerter: () => b.alerter,
      audit: () => b.audit,
      rotate: (key, _slot, _trigger, rotationId) => {
        asked.push(`${key.id} ${rotationId}`);
        return Promise.reject(
          new LauncherError(
            'KR_LAUNCHER_NO_OUTCOME',
            key.id,
            `the run of key ${key.id} stopped without its outcome`,
          ),
        );
      },
    });
    const verdict = await intake.handleLeak(
      { source: 'github', ref: 'octo/app#1' },
      new Secret(stored.apiKey),
    );
    expect(asked).toHaveLength(1);
    expect(verdict).toMatchObject({ kind: 'open', keys: [{ keyId: KEY, result: 'failed' }] });
    expect(b.events().filter((event) => event.event === 'leak.intake.failed')).toEqual([
      expect.objectContaining({ step: 'rotate', errorCode: 'KR_LAUNCHER_NO_OUTCOME', keyId: KEY }),
    ]);
    expect(b.alerter.alerts.map(({ alert }) => alert)).toContainEqual(
      expect.objectContaining({ step: 'leak-intake', errorCode: 'KR_LAUNCHER_NO_OUTCOME', keyId: KEY }),
    );
    // Nothing claimed a rotation that no one reported.
    expect(b.events().filter((event) => event.event === 'leak.proven-dead')).toHaveLength(0);
  });
});
