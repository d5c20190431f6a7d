// `keyroll status --keys-from kubernetes` without a cluster (src/cli/status-objects.ts): every
// kind listed page by page, the policy built as the daemon builds it, each key named by its
// RotatedKey, and each refused object (a copy of a key's id, a KeyStore that does not parse) a row
// of its own that reads nothing. The kube-apiserver test is test/integration/kube-crd-status-cli.test.ts.
import { join } from 'node:path';
import { writeFile } from 'node:fs/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { nameObjects, objectsStatusPolicy, refusalRows } from '../../src/cli/status-objects.ts';
import type { StatusRow } from '../../src/cli/status-table.ts';
import { CrdError } from '../../src/crd/watch/errors.ts';
import type { ListPage, WatchRequests } from '../../src/crd/watch/kube-client.ts';
import type { WatchedObject, WatchedResource } from '../../src/crd/watch/resource.ts';
import { useTempDir } from '../support/temp-dir.ts';
import { api, billingKey, rotatedKey, vault, vaultDestination } from '../crd/policy/fixtures.ts';

const temp = useTempDir('keyroll-status-objects-');

const copy = rotatedKey('billing', 'copy', {
  id: 'key_billing',
  organization: 'org_billing',
  destinations: [vaultDestination('teams/billing/copy')],
});
const badStore: WatchedObject = {
  apiVersion: 'keyroll.io/v1alpha1',
  kind: 'KeyStore',
  metadata: { namespace: 'evil', name: 'bad' },
  spec: { kind: 'nowhere' },
};

/** The API server as status lists it: RotatedKeys over two pages, the rest on one. */
class Pages implements WatchRequests {
  readonly asked: { plural: string; continue?: string }[] = [];

  list(resource: WatchedResource, page: { limit: number; continue?: string }): Promise<ListPage> {
    this.asked.push({
      plural: resource.plural,
      ...(page.continue === undefined ? {} : { continue: page.continue }),
    });
    const items = (objects: readonly object[], next?: string): Promise<ListPage> =>
      Promise.resolve({
        items: objects as WatchedObject[],
        resourceVersion: '7',
        ...(next === undefined ? {} : { continue: next }),
      });
    switch (resource.plural) {
      case 'rotatedkeys':
        return page.continue === undefined ? items([billingKey], 'page-2') : items([copy]);
      case 'keystores':
        return items([badStore]);
      case 'clusterkeystores':
        return items([vault]);
      case 'clusterkeyapis':
        return items([api]);
      default:
        return items([
          { metadata: { name: 'billing', labels: { 'keyroll.io/store': 'yes' } } },
          { metadata: { name: 'evil' } },
        ]);
    }
  }

  // eslint-disable-next-line require-yield -- status lists once and never watches
  async *watch(): AsyncIterable<never> {
    await Promise.resolve();
    throw new Error('status never watches');
  }
}

async function settings(): Promise<string> {
  const file = join(temp.path(), 'settings.yaml');
  await writeFile(file, 'version: 1\nkeyApi: acme\n');
  return file;
}

const keysFrom = { kubeConfig: new KubeConfig(), namespace: 'keyroll' };

describe('status --keys-from kubernetes: the objects listed once', () => {
  it('lists each kind page by page and builds the policy as the daemon does: the key named by its object, the refused as rows', async () => {
    const pages = new Pages();
    const objects = await objectsStatusPolicy(await settings(), keysFrom, pages);
    expect(pages.asked.filter((asked) => asked.plural === 'rotatedkeys')).toEqual([
      { plural: 'rotatedkeys' },
      { plural: 'rotatedkeys', continue: 'page-2' },
    ]);
    expect(pages.asked.map((asked) => asked.plural).sort()).toEqual([
      'clusterkeyapis',
      'clusterkeystores',
      'keystores',
      'namespaces',
      'rotatedkeys',
      'rotatedkeys',
    ]);
    expect(objects.policy.keys.map((key) => key.id)).toEqual(['key_billing']);

    const keyRow = { keyId: 'key_billing' } as StatusRow;
    nameObjects([keyRow], objects);
    expect(keyRow.object).toBe('billing/billing-api');

    const refused = refusalRows(objects).map((row) => ({
      object: row.object,
      kind: row.kind,
      keyId: row.keyId,
      organizationId: row.organizationId,
      reason: row.refused?.reason,
      lastRotatedAt: row.lastRotatedAt,
    }));
    expect(refused).toEqual([
      {
        object: 'KeyStore evil/bad',
        kind: 'KeyStore',
        keyId: '',
        organizationId: '',
        reason: 'InvalidSpec',
        lastRotatedAt: null,
      },
      {
        object: 'billing/copy',
        kind: 'RotatedKey',
        keyId: 'key_billing',
        organizationId: 'org_billing',
        reason: 'KeyIdInUse',
        lastRotatedAt: null,
      },
    ]);
  });

  it('a list the API server refuses fails the whole status with its error (naming the request)', async () => {
    const pages = new Pages();
    const forbidden = new CrdError(
      'KR_CRD_FORBIDDEN',
      'get /api/v1/namespaces: the API server answered 403',
      {
        where: 'get /api/v1/namespaces',
        status: 403,
      },
    );
    pages.list = (resource, page) =>
      resource.plural === 'namespaces'
        ? Promise.reject(forbidden)
        : Pages.prototype.list.call(pages, resource, page);
    await expect(objectsStatusPolicy(await settings(), keysFrom, pages)).rejects.toBe(forbidden);
  });

  it('a settings file that still lists keys is refused as the daemon refuses it (KR_POLICY_INVALID: exit 2)', async () => {
    const file = join(temp.path(), 'policy.yaml');
    await writeFile(file, 'version: 1\nkeys: []\n');
    await expect(objectsStatusPolicy(file, keysFrom, new Pages())).rejects.toMatchObject({
      code: 'KR_POLICY_INVALID',
    });
  });
});
