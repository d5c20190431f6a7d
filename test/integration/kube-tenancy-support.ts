// What the hostile-tenant tests on the real kube-apiserver share: calls made as the cluster admin
// or, through the API server's impersonation (`Impersonate-User` / `Impersonate-Group`, which the
// admin's group system:masters may use), as a team bound to nothing but the Role docs/crds.md
// gives it; the Role read from those docs, so what is tested is what the docs tell a platform team
// to grant; and keyroll's view: every keyroll.io object of the run as the API server stores it
// (after pruning and admission), read as the watch reads it, turned into a policy by objectsToPolicy.
import { readFile } from 'node:fs/promises';
import { request, type Agent } from 'undici';
import { parse } from 'yaml';
import { KeyrollObject } from '../../src/crd/kinds/kinds.ts';
import {
  objectsToPolicy,
  type PolicyFromObjects,
  type PolicyOptions,
} from '../../src/crd/policy/objects-to-policy.ts';
import type { KubeApiServerInfo } from '../support/kube-apiserver.ts';

export const BASE = '/apis/keyroll.io/v1alpha1';
const PLURALS = ['clusterkeyapis', 'clusterkeystores', 'keystores', 'rotatedkeys'] as const;

export interface Answer {
  status: number;
  body: { message?: string; [key: string]: unknown };
}

/** Who sends a call: the cluster admin, or a user in groups, impersonated by the admin. */
export type Caller = 'admin' | { user: string; groups?: readonly string[] };

export interface Kube {
  call(
    as: Caller,
    method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE',
    path: string,
    body?: unknown,
    contentType?: string,
  ): Promise<Answer>;
}

export function kubeAs(kube: KubeApiServerInfo, agent: Agent): Kube {
  return {
    call: async (as, method, path, body, contentType = 'application/json') => {
      const headers: Record<string, string | string[]> = {
        'content-type': contentType,
        accept: 'application/json',
      };
      if (as !== 'admin') {
        headers['impersonate-user'] = as.user;
        if (as.groups !== undefined && as.groups.length > 0) headers['impersonate-group'] = [...as.groups];
      }
      const response = await request(`${kube.server}${path}`, {
        method,
        dispatcher: agent,
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await response.body.text();
      return {
        status: response.statusCode,
        body: text === '' ? {} : (JSON.parse(text) as Answer['body']),
      };
    },
  };
}

/** The Role of docs/crds.md, "RBAC a team needs", as written there (its first YAML block). */
export async function teamRoleFromDocs(): Promise<{ rules: unknown[] }> {
  const docs = await readFile(new URL('../../docs/crds.md', import.meta.url), 'utf8');
  const section = docs.slice(docs.indexOf('## RBAC a team needs'));
  const block = /```yaml\n([\s\S]*?)```/.exec(section)?.[1];
  if (block === undefined) throw new Error('docs/crds.md has no YAML block under "RBAC a team needs"');
  const role = parse(block) as { kind?: string; rules?: unknown[] };
  if (role.kind !== 'Role' || role.rules === undefined) throw new Error('the docs block is not a Role');
  return { rules: role.rules };
}

/** Creates a Role with `rules` in `namespace` and binds it to `group`. */
export async function grant(
  api: Kube,
  namespace: string,
  name: string,
  rules: unknown[],
  subject: { kind: 'Group' | 'User'; name: string },
): Promise<void> {
  const rbac = `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}`;
  for (const [path, body] of [
    [`${rbac}/roles`, { metadata: { name }, rules }],
    [
      `${rbac}/rolebindings`,
      {
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', ...subject }],
      },
    ],
  ] as const) {
    const answer = await api.call('admin', 'POST', path, body);
    if (answer.status !== 201)
      throw new Error(`${path}: ${String(answer.status)} ${answer.body.message ?? ''}`);
  }
}

export function collection(kind: string, namespace?: string): string {
  const plural = `${kind.toLowerCase()}s`;
  return namespace === undefined ? `${BASE}/${plural}` : `${BASE}/namespaces/${namespace}/${plural}`;
}

/**
 * What keyroll builds from the objects of this run (namespaces `mine`, cluster objects named with
 * `suffix`): listed cluster-wide as its watch lists them, read through KeyrollObject, with every
 * namespace's labels as the API server holds them now.
 */
export async function keyrollView(
  api: Kube,
  mine: { namespaces: readonly string[]; suffix: string },
  options: Omit<PolicyOptions, 'namespaces'>,
): Promise<PolicyFromObjects> {
  const objects: KeyrollObject[] = [];
  for (const plural of PLURALS) {
    const list = await api.call('admin', 'GET', `${BASE}/${plural}`);
    for (const item of (list.body['items'] ?? []) as { metadata: { name: string; namespace?: string } }[]) {
      const { name, namespace } = item.metadata;
      const ours = namespace === undefined ? name.endsWith(mine.suffix) : mine.namespaces.includes(namespace);
      if (ours) objects.push(KeyrollObject.parse(item));
    }
  }
  const namespaces = new Map<string, Record<string, string>>();
  const listed = await api.call('admin', 'GET', '/api/v1/namespaces');
  for (const item of listed.body['items'] as {
    metadata: { name: string; labels?: Record<string, string> };
  }[])
    namespaces.set(item.metadata.name, item.metadata.labels ?? {});
  return objectsToPolicy(objects, { ...options, namespaces });
}
