// The shared rate limiter paces keyroll's own credential only. A probe made with a rolled key's
// secret counts against that key's own limit at the API, so it neither waits for keyroll's budget,
// spends it, nor pauses keyroll's calls when the key's own limit answers 429. Against the emulator
// over real loopback HTTP; the limiter runs on a fake clock, so nothing waits for real.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApiClient } from '../../src/api/client.ts';
import { staticCredential } from '../../src/api/credentials.ts';
import { RateLimiter } from '../../src/api/rate-limiter.ts';
import { Secret } from '../../src/audit/secret.ts';
import { startEmulator, type RunningEmulator } from '../../src/emulator/server.ts';
import { fakeClock } from './mock-api.ts';

const OWNER = 'demo-owner-token';
const ACME = 'org_demo_acme';

let emulator: RunningEmulator;
let client: ApiClient;
let waits: number[];
let limiter: RateLimiter;

beforeEach(async () => {
  emulator = await startEmulator({ port: 0 });
  const clock = fakeClock(0);
  waits = clock.sleeps;
  // One call per second, no burst beyond one: any call that takes a slot is visible in `waits`.
  limiter = new RateLimiter({ perMinute: 60, burst: 1, now: clock.now, sleep: clock.sleep });
  client = new ApiClient({
    baseUrl: emulator.url,
    credentials: staticCredential(new Secret(OWNER), 'owner'),
    limiter,
  });
});

afterEach(async () => {
  await client.close();
  await emulator.close();
});

describe('ApiClient: the shared limiter and calls made with another credential', () => {
  it("a probe with the rolled secret neither waits for nor spends keyroll's budget", async () => {
    const first = emulator.state.addApiKey({ name: 'first', organizationId: ACME });
    const second = emulator.state.addApiKey({ name: 'second', organizationId: ACME });
    const rolled = await client.rollKey(first.id, { organizationId: ACME });
    expect(await client.probeSecret(rolled.secret, { organizationId: ACME })).toBe('valid');
    expect(waits).toEqual([]);
    // keyroll's next own call waits for the one slot the roll spent, not for a second one.
    await client.rollKey(second.id, { organizationId: ACME });
    expect(waits).toEqual([1000]);
  });

  it("a 429 from the probed key's own limit does not pause keyroll's calls", async () => {
    const key = emulator.state.addApiKey({ name: 'slow', organizationId: ACME, rateLimitPerMinute: 1 });
    const secret = new Secret(key.secret);
    expect(await client.probeSecret(secret, { organizationId: ACME })).toBe('valid');
    await expect(client.probeSecret(secret, { organizationId: ACME })).rejects.toMatchObject({ status: 429 });
    expect(limiter.pausedUntil()).toBeUndefined();
  });
});
