// Installs the keyroll.io CRDs (deploy/crds/keyroll.io.yaml) on a test API server as the files
// say, byte for byte in JSON. Not through @kubernetes/client-node's typed
// createCustomResourceDefinition (installCustomResourceDefinition in kube-apiserver.ts): its
// serializer maps a schema's `properties` through V1JSONSchemaProps, whose field is
// `xKubernetesValidations`, and silently drops every `x-kubernetes-validations` written the way
// YAML writes it; the CRD is accepted, and none of those CEL rules is enforced.
import { readFile } from 'node:fs/promises';
import { Agent, request } from 'undici';
import { parseAllDocuments } from 'yaml';
import type { KubeApiServerInfo } from './kube-apiserver.ts';

const BUNDLE = new URL('../../deploy/crds/keyroll.io.yaml', import.meta.url);
const CRDS = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';

interface Crd {
  metadata: { name: string };
  status?: { conditions?: { type: string; status: string }[] };
}

/** An undici agent acting as the cluster admin (client certificate in system:masters). */
export function adminAgent(kube: KubeApiServerInfo): Agent {
  return new Agent({ connect: { ca: kube.caPem, cert: kube.admin.certPem, key: kube.admin.keyPem } });
}

/** POSTs `body` to `path` as the agent; created (201) or already there (409) is fine, anything else throws. */
export async function createObject(
  kube: KubeApiServerInfo,
  agent: Agent,
  path: string,
  body: object,
): Promise<void> {
  const response = await request(`${kube.server}${path}`, {
    method: 'POST',
    dispatcher: agent,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.body.text();
  if (response.statusCode !== 201 && response.statusCode !== 409)
    throw new Error(`the API server refused POST ${path} (${String(response.statusCode)}): ${text}`);
}

/** Creates each CRD of the bundle (409, already there, is fine) and waits until every one is Established. */
export async function installKeyrollCrds(kube: KubeApiServerInfo): Promise<void> {
  const agent = adminAgent(kube);
  try {
    const definitions = parseAllDocuments(await readFile(BUNDLE, 'utf8')).map((doc) => doc.toJS() as Crd);
    for (const definition of definitions) await createObject(kube, agent, CRDS, definition);
    for (const definition of definitions) await waitEstablished(kube, agent, definition.metadata.name);
  } finally {
    await agent.close();
  }
}

async function waitEstablished(kube: KubeApiServerInfo, agent: Agent, name: string): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt++) {
    const response = await request(`${kube.server}${CRDS}/${name}`, { dispatcher: agent });
    const crd = (await response.body.json()) as Crd;
    if (crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') === true) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the CustomResourceDefinition ${name} was not established within 30 s`);
}
