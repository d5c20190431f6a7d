// The RotatedKey conditions a daemon in objects mode writes when things go wrong, end to end on
// the real kube-apiserver (issue 31, "Tests and figures": a failure and its condition, quarantine,
// deletion): the daemon's own status writer (daemon/object-status.ts), its rotations by the
// emulator, its records in a file ClusterKeyStore, and every status and Event read back from the
// API server as `kubectl get`/`describe` would. A refused roll: Ready=False with the failure's
// reason, failedAttempts counted, a Warning Event, and Ready=True after the next rotation that
// works. Failures up to failures.quarantineAfter: Quarantined=True (READY False in `kubectl get`),
// lifted by a rotate-now that rotates. A key rolled outside keyroll (onDrift: alert): Drifted=True
// from the daemon's drift probe, healed by a rotation. No secret in any status or Event.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { waitFor } from '../support/wait-for.ts';
import {
  movableClock,
  OWNER_TOKEN,
  useObjectsDaemons,
  type KeyCondition,
  type KeyObject,
  type ObjectsDaemon,
} from './kube-crd-daemon-support.ts';
import { kubeApiServer } from './servers.ts';

const server = await kubeApiServer();
const BILLING = 'key_demo_billing';
const HOUR = 3600_000;

const conditionOf = (key: KeyObject, type: string): KeyCondition | undefined =>
  key.status?.conditions?.find((condition) => condition.type === type);

/** Waits until the RotatedKey as the API server holds it passes `holds`; returns that copy. */
async function keyWhen(
  objects: ObjectsDaemon,
  name: string,
  holds: (key: KeyObject) => boolean,
  what: string,
): Promise<KeyObject> {
  let key = await objects.readKey(name);
  // Well within the test's 30 s: a status that never comes fails here, naming what it waited for.
  await waitFor(
    async () => {
      key = await objects.readKey(name);
      return holds(key);
    },
    what,
    { timeoutMs: 10_000 },
  );
  return key;
}

const has = (type: string, status: string, reason: string) => (key: KeyObject) => {
  const condition = conditionOf(key, type);
  return condition?.status === status && condition.reason === reason;
};

/** No minted secret, nor keyroll's token, in the object (its status) or any Event on it. */
async function expectNoSecretShown(objects: ObjectsDaemon, name: string): Promise<void> {
  expectNoSecrets(
    [JSON.stringify(await objects.readKey(name)), JSON.stringify(await objects.events(name))],
    [...objects.emulator.state.mintedSecrets(), OWNER_TOKEN],
    `the RotatedKey ${name} and its Events`,
  );
}

if (server === undefined) {
  describe.skip('RotatedKey conditions through the daemon (the Kubernetes API server is not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const startObjectsDaemon = await useObjectsDaemons(server);

  describe('RotatedKey conditions through the daemon in objects mode (kube-apiserver)', () => {
    it('a roll the API refuses: Ready=False RotationFailed with failedAttempts 1 and a Warning Event; the next rotation that works: Ready=True', async () => {
      const clock = movableClock();
      const objects = await startObjectsDaemon({ statusWriter: true, now: clock.now });
      const { daemon, emulator } = objects;
      emulator.faults.inject('roll', { kind: 'status', status: 403 }, 1);
      await objects.createKey('billing', objects.keySpec(BILLING, 'billing.json'));

      let key = await keyWhen(
        objects,
        'billing',
        (read) => has('Ready', 'False', 'RotationFailed')(read) && read.status?.failedAttempts === 1,
        'Ready=False RotationFailed, one failed attempt',
      );
      expect(emulator.state.rollCount(BILLING)).toBe(0);
      expect(conditionOf(key, 'Ready')?.message).toContain('KR_API_FORBIDDEN');
      expect(conditionOf(key, 'Ready')?.observedGeneration).toBe(key.metadata.generation);
      expect(conditionOf(key, 'Quarantined')).toMatchObject({ status: 'False', reason: 'NotQuarantined' });
      expect(key.status?.observedGeneration).toBe(key.metadata.generation);
      // The failure's backoff is the next attempt the status shows.
      expect(key.status?.nextRotation).toEqual(expect.any(String));
      await daemon.idle();
      await waitFor(
        async () => (await objects.events('billing')).some((event) => event.reason === 'RotationFailed'),
        'the RotationFailed Event',
      );
      expect((await objects.events('billing')).map((event) => [event.type, event.reason])).toEqual([
        ['Warning', 'RotationFailed'],
      ]);
      expect((await objects.row('billing'))['READY']).toBe('False');

      // Past the backoff (1h at most) the sweep attempts it again, and the API takes it.
      clock.advance(2 * HOUR);
      await daemon.sweep();
      await daemon.idle();
      expect(emulator.state.rollCount(BILLING)).toBe(1);
      key = await keyWhen(
        objects,
        'billing',
        has('Ready', 'True', 'Rotated'),
        'Ready=True after the rotation',
      );
      expect(key.status?.failedAttempts).toBe(0);
      expect(key.status?.lastRotated).toEqual(expect.any(String));
      await waitFor(
        async () => (await objects.events('billing')).some((event) => event.reason === 'Rotated'),
        'the Rotated Event',
      );
      expect((await objects.row('billing'))['READY']).toBe('True');
      await expectNoSecretShown(objects, 'billing');
      expect(objects.audit.eventsNamed('crd.status.failed')).toEqual([]);
    });

    it('failures up to quarantineAfter: Quarantined=True and READY False, no automatic attempt; a rotate-now that rotates lifts it', async () => {
      const clock = movableClock();
      const objects = await startObjectsDaemon({ statusWriter: true, now: clock.now });
      const { daemon, emulator } = objects;
      emulator.faults.inject('roll', { kind: 'status', status: 403 }, 2);
      await objects.createKey(
        'billing',
        objects.keySpec(BILLING, 'billing.json', { failures: { quarantineAfter: 2 } }),
      );
      await keyWhen(objects, 'billing', has('Ready', 'False', 'RotationFailed'), 'the first failure');
      await daemon.idle();

      clock.advance(2 * HOUR);
      await daemon.sweep();
      await daemon.idle();
      let key = await keyWhen(
        objects,
        'billing',
        has('Quarantined', 'True', 'FailureStreak'),
        'Quarantined=True after the second failure',
      );
      expect(conditionOf(key, 'Ready')).toMatchObject({ status: 'False', reason: 'Quarantined' });
      expect(conditionOf(key, 'Quarantined')?.message).toMatch(/^no automatic rotation since /);
      expect(key.status?.failedAttempts).toBe(2);
      // Quarantined: no automatic attempt is due, so none is shown.
      expect(key.status?.nextRotation).toBeUndefined();
      expect((await objects.row('billing'))['READY']).toBe('False');
      await waitFor(
        async () => (await objects.events('billing')).some((event) => event.reason === 'Quarantined'),
        'the Quarantined Event',
      );
      expect((await objects.events('billing')).map((event) => [event.type, event.reason])).toEqual([
        ['Warning', 'RotationFailed'],
        ['Warning', 'Quarantined'],
      ]);

      // The next sweeps leave it alone (no roll, no Event): a person has to act.
      clock.advance(2 * HOUR);
      await daemon.sweep();
      await daemon.idle();
      expect(emulator.state.rollCount(BILLING)).toBe(0);
      expect(has('Quarantined', 'True', 'FailureStreak')(await objects.readKey('billing'))).toBe(true);

      // The cause fixed (no fault queued any more), a person asks for a rotation: it rotates, and
      // the success ends the streak and its quarantine.
      await objects.patchKey('billing', {
        metadata: { annotations: { 'keyroll.io/rotate-now': 'manual: API permission fixed' } },
      });
      key = await keyWhen(
        objects,
        'billing',
        (read) =>
          has('Quarantined', 'False', 'NotQuarantined')(read) && has('Ready', 'True', 'Rotated')(read),
        'the quarantine lifted by the rotate-now',
      );
      expect(emulator.state.rollCount(BILLING)).toBe(1);
      expect(key.status?.failedAttempts).toBe(0);
      expect(key.status?.nextRotation).toEqual(expect.any(String));
      expect((await objects.row('billing'))['READY']).toBe('True');
      await expectNoSecretShown(objects, 'billing');
      expect(objects.audit.eventsNamed('crd.status.failed')).toEqual([]);
    });

    it('a key rolled outside keyroll (onDrift: alert): Drifted=True from the drift probe, a DriftDetected Event; a rotation heals it', async () => {
      const clock = movableClock();
      const objects = await startObjectsDaemon({ statusWriter: true, now: clock.now });
      const { daemon, emulator } = objects;
      await objects.createKey('billing', objects.keySpec(BILLING, 'billing.json', { onDrift: 'alert' }));
      await keyWhen(objects, 'billing', has('Ready', 'True', 'Rotated'), 'the first rotation');
      await daemon.idle();
      let key = await objects.readKey('billing');
      expect(conditionOf(key, 'Drifted')).toMatchObject({ status: 'False', reason: 'NoDrift' });

      // Someone rolls the key in the provider's dashboard: the stored secret is dead.
      emulator.state.rollKey(BILLING);
      await daemon.sweep();
      await daemon.idle();
      key = await keyWhen(objects, 'billing', has('Drifted', 'True', 'StoredSecretDead'), 'Drifted=True');
      expect(conditionOf(key, 'Ready')).toMatchObject({ status: 'False', reason: 'Drifted' });
      expect(key.status?.failedAttempts).toBe(0);
      expect((await objects.row('billing'))['READY']).toBe('False');
      await waitFor(
        async () => (await objects.events('billing')).some((event) => event.reason === 'DriftDetected'),
        'the DriftDetected Event',
      );
      // onDrift: alert heals nothing by itself.
      expect(emulator.state.rollCount(BILLING)).toBe(2);

      // Past minInterval, a person asks for a rotation: the new value is stored, the drift healed.
      clock.advance(2 * HOUR);
      await objects.patchKey('billing', {
        metadata: { annotations: { 'keyroll.io/rotate-now': 'manual: rolled in the dashboard' } },
      });
      key = await keyWhen(
        objects,
        'billing',
        (read) => has('Drifted', 'False', 'NoDrift')(read) && has('Ready', 'True', 'Rotated')(read),
        'the drift healed',
      );
      expect(key.status?.rotateNow).toMatchObject({ outcome: 'Rotated' });
      expect(emulator.state.rollCount(BILLING)).toBe(3);
      await expectNoSecretShown(objects, 'billing');
      expect(objects.audit.eventsNamed('crd.status.failed')).toEqual([]);
    });

    it('a drifted key whose store someone fixed by hand: the next drift probe finds the stored secret working, and Drifted=False', async () => {
      const clock = movableClock();
      const objects = await startObjectsDaemon({ statusWriter: true, now: clock.now });
      const { daemon, emulator } = objects;
      await objects.createKey('billing', objects.keySpec(BILLING, 'billing.json', { onDrift: 'alert' }));
      await keyWhen(objects, 'billing', has('Ready', 'True', 'Rotated'), 'the first rotation');
      await daemon.idle();
      const rotated = await objects.readKey('billing');
      emulator.state.rollKey(BILLING);
      await daemon.sweep();
      await daemon.idle();
      await keyWhen(objects, 'billing', has('Drifted', 'True', 'StoredSecretDead'), 'Drifted=True');

      // The on-call copies the dashboard's new secret into the store (onDrift: alert leaves it to them).
      const file = join(objects.secretsDir, objects.namespace, 'billing.json');
      const stored = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
      await writeFile(file, JSON.stringify({ ...stored, apiKey: emulator.state.currentSecret(BILLING) }));
      // The next sweep past the failed probe's retry (1h) probes it again: it works.
      clock.advance(2 * HOUR);
      await daemon.sweep();
      await daemon.idle();
      expect(objects.audit.eventsNamed('key.probe').at(-1)).toMatchObject({ verdict: 'stored-secret-works' });
      const key = await keyWhen(
        objects,
        'billing',
        (read) => has('Drifted', 'False', 'NoDrift')(read) && has('Ready', 'True', 'Rotated')(read),
        'Drifted=False once the probe found the stored secret working',
      );
      // Nothing was rotated: the last rotation is still the first one.
      expect(emulator.state.rollCount(BILLING)).toBe(2);
      expect(key.status?.lastRotationId).toBe(rotated.status?.lastRotationId);
      await expectNoSecretShown(objects, 'billing');
    });
  });
}
