// `keyroll daemon --keys-from kubernetes` on the real kube-apiserver with the keyroll.io CRDs
// applied (issue 31 §5): the daemon builds its policy from the objects it watches and swaps it in
// through its reload path. A RotatedKey created while it runs is rotated (the emulator rolls it,
// the file store holds the live value); an update is a new generation in force; a delete stops
// the rotations, is audited, and leaves the stored secret as it is; a refused object is audited
// once with its reason and handed to the observer; a hostile copy of a key's id is refused and
// the key it copied stays in force. The setup (keyroll's service account bound to the chart's
// ClusterRole, a namespace, ClusterKeyApi and ClusterKeyStore per test) is
// kube-crd-daemon-support.ts; the conditions of failures, quarantine and drift are in
// kube-crd-daemon-conditions.test.ts.
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import {
  apiKeyOf,
  mine,
  movableClock,
  storedValue,
  useObjectsDaemons,
  type KeyObject,
} from './kube-crd-daemon-support.ts';
import { createTempDir } from '../support/temp-dir.ts';
import { waitFor } from '../support/wait-for.ts';
import { kubeApiServer } from './servers.ts';

const server = await kubeApiServer();
const BILLING = 'key_demo_billing';
const SEARCH = 'key_demo_search';

if (server === undefined) {
  describe.skip('the daemon with keys from keyroll.io objects (the Kubernetes API server is not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const startObjectsDaemon = await useObjectsDaemons(server);

  describe('the daemon with keys from keyroll.io objects (kube-apiserver)', () => {
    it('rotates a RotatedKey created while it runs, takes an update as a new generation, and on delete stops and leaves the secret as stored', async () => {
      const objects = await startObjectsDaemon();
      const { daemon, namespace, emulator, told } = objects;
      expect(objects.audit.eventsNamed('daemon.started')).toEqual([
        expect.objectContaining({ keysFrom: 'kubernetes' }),
      ]);
      expect(told.leading).toEqual([true]);

      await objects.createKey('billing', objects.keySpec(BILLING, 'billing.json'));
      await waitFor(() => emulator.state.rollCount(BILLING) === 1, 'the new RotatedKey rotated');
      await daemon.idle();
      const stored = await storedValue(objects, 'billing.json');
      expect(emulator.state.isLiveSecret(BILLING, apiKeyOf(stored))).toBe(true);
      expect(told.generations.at(-1)?.keys).toEqual({ [`${namespace}/billing`]: BILLING });
      expect(told.outcomes).toContainEqual({ keyId: BILLING, result: 'rotated' });

      // A new spec (maxAge 30d → 20d) is a new generation, swapped in through the reload path.
      await objects.patchKey('billing', { spec: { maxAge: '20d' } });
      await waitFor(
        () => daemon.policy().keys[0]?.maxAgeMs === 20 * 24 * 3600_000,
        'the updated RotatedKey in force',
      );
      expect(emulator.state.rollCount(BILLING)).toBe(1);

      await objects.deleteKey('billing');
      await waitFor(() => daemon.policy().keys.length === 0, 'the deleted RotatedKey out of the policy');
      expect(objects.audit.eventsNamed('crd.key_deleted')).toEqual([
        expect.objectContaining({ object: `${namespace}/billing`, keyId: BILLING }),
      ]);
      expect(told.generations.at(-1)?.keys).toEqual({});
      await daemon.sweep();
      await daemon.idle();
      expect(emulator.state.rollCount(BILLING)).toBe(1);
      expect(await storedValue(objects, 'billing.json')).toBe(stored);
    });

    it('a RotatedKey deleted while every new generation fails to prepare stops being rotated at once, audited, its secret left as stored', async () => {
      // The daemon's --metrics-token is read again by each generation's prepare: gone, every
      // build from the objects fails (as a backend that cannot be opened would).
      const clock = movableClock();
      const temp = await createTempDir('keyroll-metrics-token-');
      onTestFinished(() => temp.remove());
      const metricsToken = join(temp.path, 'metrics-token');
      await writeFile(metricsToken, 'metrics-reader-token\n');
      const objects = await startObjectsDaemon({ now: clock.now, metricsTokenRef: `file:${metricsToken}` });
      const { daemon, namespace, emulator, told } = objects;
      await objects.createKey('billing', objects.keySpec(BILLING, 'billing.json'));
      await objects.createKey('search', objects.keySpec(SEARCH, 'search.json'));
      await waitFor(
        () => emulator.state.rollCount(BILLING) === 1 && emulator.state.rollCount(SEARCH) === 1,
        'both RotatedKeys rotated',
      );
      await daemon.idle();
      const stored = await storedValue(objects, 'billing.json');

      await rm(metricsToken);
      await objects.deleteKey('billing');
      await waitFor(
        () => objects.audit.eventsNamed('policy.reload_failed').length > 0,
        'the build after the deletion failed',
      );
      // SIGHUP builds again, after the build under way: it fails alike, and the deletion still wins.
      expect(await daemon.reload()).toMatchObject({ ok: false, errorCode: 'KR_REF_UNRESOLVED' });
      expect(mine(objects, 'crd.key_deleted')).toEqual([
        expect.objectContaining({ object: `${namespace}/billing`, keyId: BILLING }),
      ]);
      // Deletion wins: the key in force before the failed build is gone, the other one stays.
      expect(daemon.policy().keys.map((key) => key.id)).toEqual([SEARCH]);
      expect(told.generations.at(-1)?.keys).toEqual({ [`${namespace}/search`]: SEARCH });
      // Both long past their maxAge: the sweep rotates the key kept, never the deleted one.
      clock.advance(31 * 24 * 3600_000);
      await daemon.sweep();
      await daemon.idle();
      expect(emulator.state.rollCount(SEARCH)).toBe(2);
      expect(emulator.state.rollCount(BILLING)).toBe(1);
      expect(await storedValue(objects, 'billing.json')).toBe(stored);

      // The cause fixed, the next build swaps a whole generation in; the deletion is not audited again.
      await writeFile(metricsToken, 'metrics-reader-token\n');
      expect(await daemon.reload()).toEqual({ ok: true, keys: 1 });
      expect(daemon.policy().keys.map((key) => key.id)).toEqual([SEARCH]);
      expect(mine(objects, 'crd.key_deleted')).toHaveLength(1);
    });

    it('without an observer writes the RotatedKey status after its rotation and serves a rotate-now annotation once', async () => {
      const objects = await startObjectsDaemon({ statusWriter: true });
      const { daemon, emulator } = objects;
      await objects.createKey('billing', objects.keySpec(BILLING, 'billing.json'));
      await waitFor(() => emulator.state.rollCount(BILLING) === 1, 'the new RotatedKey rotated');
      await daemon.idle();
      const ready = (key: KeyObject) => key.status?.conditions?.find((c) => c.type === 'Ready');
      let key = await objects.readKey('billing');
      await waitFor(async () => {
        key = await objects.readKey('billing');
        return ready(key)?.status === 'True' && key.status?.lastRotated !== undefined;
      }, 'Ready=True with the last rotation in the status');
      const firstRotation = key.status?.lastRotationId;
      expect(firstRotation).toEqual(expect.any(String));

      // keyroll.io/rotate-now: rotated once more through the launcher (compromise, like leak,
      // bypasses the minInterval the first rotation just started), settled, the annotation removed.
      await objects.patchKey('billing', {
        metadata: { annotations: { 'keyroll.io/rotate-now': 'compromise: test' } },
      });
      await waitFor(() => emulator.state.rollCount(BILLING) === 2, 'the rotate-now rotated');
      await waitFor(async () => {
        key = await objects.readKey('billing');
        return (
          key.metadata.annotations?.['keyroll.io/rotate-now'] === undefined &&
          key.status?.rotateNow?.value === 'compromise: test' &&
          key.status.lastRotationId !== firstRotation
        );
      }, 'the rotate-now settled in the status and the annotation removed');
      expect(key.status?.rotateNow).toMatchObject({ outcome: 'Rotated' });
      expect(ready(key)?.status).toBe('True');
      await daemon.sweep();
      await daemon.idle();
      expect(emulator.state.rollCount(BILLING)).toBe(2);
      const stored = await storedValue(objects, 'billing.json');
      expect(emulator.state.isLiveSecret(BILLING, apiKeyOf(stored))).toBe(true);
      expect(objects.audit.eventsNamed('crd.status.failed')).toEqual([]);
    });

    it('audits a refused RotatedKey once with its reason, hands it to the observer, and rotates the good key beside it', async () => {
      const objects = await startObjectsDaemon();
      const { daemon, namespace, emulator, told } = objects;
      await objects.createKey('search', objects.keySpec(SEARCH, 'search.json'));
      // An organization the ClusterKeyApi does not admit for this namespace.
      await objects.createKey(
        'foreign',
        objects.keySpec(BILLING, 'foreign.json', { organization: 'org_demo_starter' }),
      );
      await waitFor(() => emulator.state.rollCount(SEARCH) === 1, 'the good key rotated');
      await waitFor(() => mine(objects, 'crd.key_refused').length > 0, 'the refusal audited');
      expect(mine(objects, 'crd.key_refused')).toEqual([
        expect.objectContaining({
          kind: 'RotatedKey',
          object: `${namespace}/foreign`,
          reason: 'OrganizationNotAdmitted',
        }),
      ]);
      const refusedToObserver = told.generations
        .at(-1)
        ?.refusals.filter((refusal) => refusal.object.namespace === namespace);
      expect(refusedToObserver?.map((refusal) => [refusal.object.name, refusal.reason])).toEqual([
        ['foreign', 'OrganizationNotAdmitted'],
      ]);

      // Another object's change builds again: the refusal, unchanged, is not audited again.
      await objects.patchKey('search', { spec: { maxAge: '20d' } });
      await waitFor(
        () => daemon.policy().keys.some((key) => key.maxAgeMs === 20 * 24 * 3600_000),
        'the updated key in force',
      );
      expect(mine(objects, 'crd.key_refused')).toHaveLength(1);
      expect(emulator.state.rollCount(BILLING)).toBe(0);
      expect(daemon.policy().keys.map((key) => key.id)).toEqual([SEARCH]);

      // A settings file that still lists keys fails the reload (SIGHUP): the keys in force stay.
      await writeFile(objects.settingsFile, 'version: 1\nkeys: []\n');
      expect(await daemon.reload()).toMatchObject({ ok: false, errorCode: 'KR_POLICY_INVALID' });
      expect(objects.audit.eventsNamed('policy.reload_failed')).toEqual([
        expect.objectContaining({ file: objects.settingsFile, keysFrom: 'kubernetes' }),
      ]);
      expect(daemon.policy().keys.map((key) => key.id)).toEqual([SEARCH]);
    });

    it('a newcomer copying a key in force is refused (KeyIdInUse) and the key it copied keeps its place, unswapped', async () => {
      const objects = await startObjectsDaemon();
      const { daemon, namespace, emulator, told } = objects;
      await objects.createKey('billing', objects.keySpec(BILLING, 'billing.json'));
      await waitFor(() => emulator.state.rollCount(BILLING) === 1, 'the key rotated');
      await daemon.idle();
      const reloads = objects.audit.eventsNamed('policy.reloaded').length;

      await objects.createKey('copycat', objects.keySpec(BILLING, 'copy.json'));
      await waitFor(() => mine(objects, 'crd.key_refused').length > 0, 'the copy refused');
      expect(mine(objects, 'crd.key_refused')).toEqual([
        expect.objectContaining({ object: `${namespace}/copycat`, reason: 'KeyIdInUse' }),
      ]);
      // The policy did not change: no generation was swapped, the key is the first object's.
      expect(objects.audit.eventsNamed('policy.reloaded')).toHaveLength(reloads);
      expect(told.generations.at(-1)?.keys).toEqual({ [`${namespace}/billing`]: BILLING });
      expect(daemon.policy().keys.map((key) => key.id)).toEqual([BILLING]);
      expect(emulator.state.rollCount(BILLING)).toBe(1);
    });
  });
}
