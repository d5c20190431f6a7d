// The real servers the integration tests, the fault suite and the benchmarks talk to: an OpenBao
// dev server (KV v2 at secret/) and moto (AWS Secrets Manager), each on a free loopback port in
// its own process group, started from the venv that scripts/test-servers.sh installs. Every
// server started here is killed when the process exits, so an interrupted run leaves none.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const START_TIMEOUT_MS = 60_000;
const MOTO_SERVER_SCRIPT = resolve(dirname(fileURLToPath(import.meta.url)), '../../scripts/moto-server.py');
const STOP_TIMEOUT_MS = 10_000;

export interface RunningServer {
  url: string;
  stop(): Promise<void>;
}

export interface OpenBao extends RunningServer {
  rootToken: string;
}

export async function freePort(): Promise<number> {
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

/** A server process started by startProcess; `output` keeps its last lines for error messages. */
export interface Started {
  child: ChildProcess;
  output: string[];
}

// Every server started here, so an interrupted bench leaves none behind.
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) killGroup(child, 'SIGKILL');
});

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (child.pid !== undefined) process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

/** `env` is added to this process's environment (a controller's KUBECONFIG). */
export function startProcess(command: string, args: string[], env: Record<string, string> = {}): Started {
  // Own process group, so stop() ends the server and anything it spawned.
  const child = spawn(command, args, {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  running.add(child);
  const output: string[] = [];
  const keep = (chunk: Buffer): void => {
    output.push(chunk.toString('utf8'));
    if (output.length > 200) output.shift();
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  return { child, output };
}

export async function stopProcess({ child }: Started): Promise<void> {
  running.delete(child);
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => {
    child.once('exit', () => {
      r();
    });
  });
  killGroup(child, 'SIGTERM');
  const timer = setTimeout(() => {
    killGroup(child, 'SIGKILL');
  }, STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

/** Polls `isReady` until it answers true; fails when the process exits or the time is up. */
export async function waitReady(
  started: Started,
  name: string,
  isReady: () => Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (started.child.exitCode !== null || started.child.signalCode !== null) {
      throw new Error(`${name} exited before it was ready:\n${started.output.join('').slice(-2000)}`);
    }
    try {
      if (await isReady()) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(
    `${name} was not ready within ${String(START_TIMEOUT_MS)} ms:\n${started.output.join('').slice(-2000)}`,
  );
}

async function waitHealthy(started: Started, url: string, name: string): Promise<void> {
  await waitReady(started, `${name} at ${url}`, async () => {
    const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    await response.body?.cancel();
    return response.ok;
  });
}

/** Starts a server on a fresh free port, trying again when the port was taken meanwhile. */
async function startServer(
  name: string,
  launch: (port: number) => Started,
  healthPath: string,
): Promise<RunningServer> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const started = launch(port);
    const url = `http://127.0.0.1:${String(port)}`;
    try {
      await waitHealthy(started, `${url}${healthPath}`, name);
      return { url, stop: () => stopProcess(started) };
    } catch (error) {
      lastError = error;
      await stopProcess(started);
    }
  }
  throw lastError instanceof Error ? lastError : new Error(`${name} did not start`);
}

/** Starts `bao server -dev` from `binDir` (the venv's bin directory). */
export async function startOpenBao(binDir: string): Promise<OpenBao> {
  const rootToken = `root-${randomBytes(12).toString('hex')}`;
  const server = await startServer(
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
  return { ...server, rootToken };
}

/**
 * Starts moto_server with the venv's Python in `binDir` (its bin directory), through
 * scripts/moto-server.py: one request handled at a time, so each is atomic as AWS's are (moto's
 * check-then-change in threads let two racers both create one secret or one version, and both
 * take a key lock: docs/design.md, "Tests use real servers").
 */
export async function startMoto(binDir: string): Promise<RunningServer> {
  return startServer(
    'moto',
    (port) =>
      startProcess(resolve(binDir, 'python'), [MOTO_SERVER_SCRIPT, '-H', '127.0.0.1', '-p', String(port)]),
    '/moto-api/',
  );
}

/** The static credentials moto accepts; set in the environment of everything that calls it. */
export const MOTO_ENV = {
  AWS_ACCESS_KEY_ID: 'testing',
  AWS_SECRET_ACCESS_KEY: 'testing',
  AWS_REGION: 'us-east-1',
  AWS_DEFAULT_REGION: 'us-east-1',
} as const;
