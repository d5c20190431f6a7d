// A second, short-lived OpenBao dev server with TLS (`-dev-tls` writes its own CA), for the test
// that proves `caFile` is used. Started only by that test, stopped in its finally block.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { freePort } from '../support/local-servers.ts';
import { createTempDir } from '../support/temp-dir.ts';

export interface TlsOpenBao {
  address: string;
  rootToken: string;
  caFile: string;
  stop(): Promise<void>;
}

export async function startTlsOpenBao(binDir: string): Promise<TlsOpenBao> {
  const temp = await createTempDir('keyroll-bao-tls-');
  const dir = temp.path;
  const port = await freePort();
  const rootToken = `root-${randomBytes(8).toString('hex')}`;
  const child = spawn(
    join(binDir, 'bao'),
    [
      'server',
      '-dev',
      '-dev-tls',
      `-dev-tls-cert-dir=${dir}`,
      `-dev-root-token-id=${rootToken}`,
      `-dev-listen-address=127.0.0.1:${String(port)}`,
      '-dev-no-store-token',
    ],
    { detached: true, stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => {
      resolve();
    });
  });
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) {
      process.kill(-child.pid, 'SIGTERM');
      await exited;
    }
    await temp.remove();
  };
  const address = `https://127.0.0.1:${String(port)}`;
  const caFile = join(dir, 'vault-ca.pem');
  try {
    for (let attempt = 0; ; attempt++) {
      if (attempt > 150) throw new Error('the TLS OpenBao did not become healthy');
      if (child.exitCode !== null) throw new Error('the TLS OpenBao exited');
      try {
        const agent = new Agent({ connect: { ca: await readFile(caFile, 'utf8') } });
        const response = await request(`${address}/v1/sys/health`, { dispatcher: agent });
        await response.body.dump();
        await agent.close();
        if (response.statusCode === 200) break;
      } catch {
        // not up yet (CA file not written or not listening)
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { address, rootToken, caFile, stop };
}
