// Where the integration tests find the real servers started by global-setup.ts. Under CI=true
// a missing server is an error (the run fails); elsewhere the helpers return undefined and the
// tests that need the server skip, after global-setup printed how to get it.
import { request } from 'undici';
import { inject } from 'vitest';
import type { KubeApiServerInfo } from '../support/kube-apiserver.ts';
import type { KubeOnDemandAnswer } from './kube-on-demand.ts';

// Typed values global-setup.ts provides to the test files.
declare module 'vitest' {
  export interface ProvidedContext {
    vaultServer: VaultServer | null;
    motoServer: MotoServer | null;
    serversMissingReason: string | null;
    /** Where a test file asks for the Kubernetes API server (kube-on-demand.ts). */
    kubeApiServerOnDemand: string;
    /** Where the real controllers' tests find their tools (scripts/test-kube.sh's and test-controllers.sh's directories). */
    realControllers: RealControllersTools | null;
    realControllersMissingReason: string | null;
  }
}

export interface RealControllersTools {
  kubeBinDir: string;
  controllersDir: string;
}

export interface VaultServer {
  /** e.g. http://127.0.0.1:43123 */
  address: string;
  /** The dev server's root token; tests create narrower tokens from it. */
  rootToken: string;
  /** Directory holding the `bao` binary (null for an external server). */
  binDir: string | null;
}

export interface MotoServer {
  /** e.g. http://127.0.0.1:43124; pass as the AWS SDK `endpoint`. */
  endpoint: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
}

function failUnderCi(name: string): void {
  const reason =
    inject('serversMissingReason') ?? `${name} was not started by test/integration/global-setup.ts`;
  if (process.env.CI === 'true') throw new Error(`${name} is required under CI=true. ${reason}`);
}

/** The OpenBao dev server, or undefined (outside CI only) when it could not be started. */
export function vaultServer(): VaultServer | undefined {
  const server = inject('vaultServer');
  if (server === null) failUnderCi('OpenBao');
  return server ?? undefined;
}

/** The moto server, or undefined (outside CI only) when it could not be started. */
export function motoServer(): MotoServer | undefined {
  const server = inject('motoServer');
  if (server === null) failUnderCi('moto');
  return server ?? undefined;
}

/**
 * The directories of kube-apiserver and of the real controllers (test/support/kube-controllers.ts
 * starts them), or undefined (outside CI only) when they could not be built.
 */
export function realControllersTools(): RealControllersTools | undefined {
  const tools = inject('realControllers');
  if (tools !== null) return tools;
  const reason =
    inject('realControllersMissingReason') ??
    'the real controllers were not built by test/integration/global-setup.ts';
  if (process.env.CI === 'true')
    throw new Error(`the real controllers are required under CI=true. ${reason}`);
  console.warn(`keyroll: skipping the tests against the real controllers. ${reason}`);
  return undefined;
}

let kubeAnswer: Promise<KubeOnDemandAnswer> | undefined;

/**
 * The test Kubernetes API server (started on the first call of the run), or undefined (outside
 * CI only) when it could not be built or started. Every test file gets the same server: use a
 * namespace of your own.
 */
export async function kubeApiServer(): Promise<KubeApiServerInfo | undefined> {
  kubeAnswer ??= request(inject('kubeApiServerOnDemand'), { headersTimeout: 0, bodyTimeout: 0 }).then(
    async (response) => (await response.body.json()) as KubeOnDemandAnswer,
  );
  const answer = await kubeAnswer;
  if ('server' in answer) return answer.server;
  if (process.env.CI === 'true')
    throw new Error(`the Kubernetes API server is required under CI=true. ${answer.missingReason}`);
  console.warn(`keyroll: skipping the Kubernetes tests. ${answer.missingReason}`);
  return undefined;
}
