// The emulator in a process of its own (`keyroll emulator`), for the benchmark that runs keyroll
// in the bench process: an in-process emulator would finish serving each roll on the same
// thread that keyroll needs for the store, and its work would be counted as keyroll's.
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadEmulatorSeed } from '../../src/emulator/seed.ts';
import { ORG } from './world.ts';

const ENTRY = fileURLToPath(new URL('../../src/cli/entry.ts', import.meta.url));
const START_TIMEOUT_MS = 30_000;

export interface EmulatorProcess {
  url: string;
  stop(): Promise<void>;
}

/** Starts `keyroll emulator` on a free port with the default seed plus `keyIds` in the demo enterprise org. */
export async function startEmulatorProcess(options: {
  dir: string;
  keyIds: readonly string[];
  rollRateLimitPerMinute: number;
}): Promise<EmulatorProcess> {
  const seed = await loadEmulatorSeed();
  seed.apiKeys.push(...options.keyIds.map((id) => ({ id, name: id, organizationId: ORG })));
  const seedFile = join(options.dir, 'emulator-seed.json');
  await writeFile(seedFile, JSON.stringify(seed));
  const child = spawn(
    process.execPath,
    [
      ENTRY,
      'emulator',
      '--port',
      '0',
      '--seed',
      seedFile,
      '--roll-rate-limit',
      String(options.rollRateLimitPerMinute),
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      resolve();
    }),
  );
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  let output = '';
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`keyroll emulator did not start within ${String(START_TIMEOUT_MS)} ms:\n${output}`));
      }, START_TIMEOUT_MS);
      const onData = (chunk: Buffer): void => {
        output += chunk.toString('utf8');
        const match = /listening on (http:\/\/\S+)/.exec(output);
        if (match?.[1]) {
          clearTimeout(timer);
          resolve(match[1]);
        }
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`keyroll emulator exited before it listened:\n${output}`));
      });
    });
    return { url, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
