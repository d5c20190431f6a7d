// `keyroll emulator` as a user runs it: the real bin script, a free port, SIGTERM to stop.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../../bin/keyroll', import.meta.url));

let child: ChildProcess | undefined;
afterEach(() => {
  if (child?.exitCode === null) child.kill('SIGKILL');
  child = undefined;
});

/** Resolves with the first stdout line of the child. */
async function firstLine(proc: ChildProcess): Promise<string> {
  let buffered = '';
  for await (const chunk of proc.stdout ?? []) {
    buffered += String(chunk);
    const end = buffered.indexOf('\n');
    if (end >= 0) return buffered.slice(0, end);
  }
  throw new Error(`emulator exited before printing its URL: ${buffered}`);
}

describe('keyroll emulator (CLI)', () => {
  it('prints its URL, answers an unauthenticated list with 401 in the envelope, and exits 0 on SIGTERM', async () => {
    child = spawn(BIN, ['emulator', '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const line = await firstLine(child);
    const url = /(http:\/\/127\.0\.0\.1:\d+)/.exec(line)?.[1];
    expect(url).toBeDefined();
    const res = await request(`${url ?? ''}/v1/projects?limit=1`);
    expect(res.statusCode).toBe(401);
    expect(await res.body.json()).toMatchObject({ success: false, error: { code: 'UNAUTHORIZED' } });
    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(0);
  });

  it('limits principal rolls with a token bucket under --roll-burst-seconds', async () => {
    // 60 per minute with a 1 s burst holds one roll; the next is refused until a token is back.
    child = spawn(BIN, ['emulator', '--port', '0', '--roll-rate-limit', '60', '--roll-burst-seconds', '1'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const url = /(http:\/\/127\.0\.0\.1:\d+)/.exec(await firstLine(child))?.[1] ?? '';
    const roll = () =>
      request(`${url}/v1/auth/keys/key_demo_billing/roll`, {
        method: 'POST',
        headers: { authorization: 'Bearer demo-owner-token' },
      });
    const first = await roll();
    await first.body.dump();
    expect(first.statusCode).toBe(200);
    const second = await roll();
    expect({ status: second.statusCode, retryAfter: second.headers['retry-after'] }).toEqual({
      status: 429,
      retryAfter: '1',
    });
    expect(await second.body.json()).toMatchObject({ success: false, error: { code: 'RATE_LIMITED' } });
  });

  it('exits 2 on a bad flag and on an unreadable seed', async () => {
    for (const args of [
      ['--port', 'abc'],
      ['--port', '0', '--roll-burst-seconds', '0'],
      ['--port', '0', '--seed', '/nonexistent/seed.yaml'],
    ]) {
      child = spawn(BIN, ['emulator', ...args], { stdio: 'ignore' });
      const [code] = (await once(child, 'exit')) as [number | null];
      expect({ args, code }).toEqual({ args, code: 2 });
    }
  });
});
