// The /_emulator/ admin routes (enabled with faultInjection): faults, key facts, secret checks.
import { afterEach, describe, expect, it } from 'vitest';
import { expectNoSecrets } from '../../support/secret-scan.ts';
import { OWNER, dataOf, expectError, startTestEmulator, type EmulatorEnv } from '../support.ts';

let env: EmulatorEnv | undefined;
afterEach(async () => {
  await env?.emu.close();
  env = undefined;
});

describe('emulator admin routes', () => {
  it('POST /_emulator/faults queues a validated fault that the next call meets', async () => {
    env = await startTestEmulator({ faultInjection: true });
    const { api } = env;
    const queued = await api.call('POST', '/_emulator/faults', {
      json: { operation: 'roll', fault: { kind: 'status', status: 500 }, count: 2 },
    });
    expect(dataOf<{ pending: Record<string, number> }>(queued).pending.roll).toBe(2);
    expectError(await api.roll('key_demo_billing', OWNER), 500, 'INTERNAL_ERROR');
    expect(
      dataOf<{ pending: Record<string, number> }>(await api.call('GET', '/_emulator/faults')).pending.roll,
    ).toBe(1);
    expect(
      dataOf<{ pending: Record<string, number> }>(await api.call('DELETE', '/_emulator/faults')).pending.roll,
    ).toBe(0);
    expect((await api.roll('key_demo_billing', OWNER)).status).toBe(200);
  });

  it('POST /_emulator/faults refuses an unknown operation or fault kind with 400', async () => {
    env = await startTestEmulator({ faultInjection: true });
    expectError(
      await env.api.call('POST', '/_emulator/faults', {
        json: { operation: 'deleteKey', fault: { kind: 'drop' } },
      }),
      400,
      'INVALID_PAYLOAD',
    );
    expectError(
      await env.api.call('POST', '/_emulator/faults', {
        json: { operation: 'roll', fault: { kind: 'explode' } },
      }),
      400,
      'INVALID_PAYLOAD',
    );
    expect(env.emu.faults.pending('roll')).toBe(0);
  });

  it('GET /_emulator/keys and /_emulator/stats report roll counts and never a secret', async () => {
    env = await startTestEmulator({ faultInjection: true });
    const { api, emu } = env;
    await api.roll('key_demo_billing', OWNER);
    await api.roll('key_demo_billing', OWNER);
    const key = await api.call('GET', '/_emulator/keys/key_demo_billing');
    expect(dataOf(key)).toEqual({
      keyId: 'key_demo_billing',
      name: 'billing-service',
      organizationId: 'org_demo_acme',
      rateLimitPerMinute: 3000,
      rollCount: 2,
    });
    const stats = await api.call('GET', '/_emulator/stats');
    expect(dataOf(stats)).toEqual({
      totalRolls: 2,
      calls: { roll: 2, listProjects: 0, updateProject: 0, updateConsent: 0 },
    });
    const all = await api.call('GET', '/_emulator/keys');
    for (const secret of emu.state.mintedSecrets()) {
      expectNoSecrets([all.text], [secret]);
      expectNoSecrets([key.text], [secret]);
    }
    expectError(await api.call('GET', '/_emulator/keys/key_nope'), 404, 'NOT_FOUND');
  });

  it('POST /_emulator/keys/{id}/check tells whether a candidate secret is live', async () => {
    env = await startTestEmulator({ faultInjection: true });
    const { api, emu } = env;
    const old = emu.state.currentSecret('key_demo_billing');
    const check = async (secret: string): Promise<unknown> =>
      dataOf<{ live: boolean }>(
        await api.call('POST', '/_emulator/keys/key_demo_billing/check', { json: { secret } }),
      ).live;
    expect(await check(old)).toBe(true);
    await api.roll('key_demo_billing', OWNER);
    expect(await check(old)).toBe(false);
    expect(await check(emu.state.currentSecret('key_demo_billing'))).toBe(true);
    expect(await check(emu.state.currentSecret('key_demo_search'))).toBe(false);
  });

  it('POST /_emulator/keys/{id}/revoke kills the current secret without rolling', async () => {
    env = await startTestEmulator({ faultInjection: true });
    const { api, emu } = env;
    const secret = emu.state.currentSecret('key_demo_ingest');
    expect((await api.call('POST', '/_emulator/keys/key_demo_ingest/revoke')).status).toBe(200);
    expectError(await api.list('?limit=1', secret), 401, 'UNAUTHORIZED');
    expect(emu.state.rollCount('key_demo_ingest')).toBe(0);
  });

  it('PATCH /_emulator/organizations/{id} changes plan and downgrade flag', async () => {
    env = await startTestEmulator({ faultInjection: true });
    const { api, emu } = env;
    const answer = await api.call('PATCH', '/_emulator/organizations/org_demo_acme', {
      json: { downgraded: true },
    });
    expect(dataOf(answer)).toMatchObject({ id: 'org_demo_acme', plan: 'enterprise', downgraded: true });
    expectError(
      await api.list('?limit=1', emu.state.currentSecret('key_demo_billing')),
      402,
      'PLAN_REQUIRED',
    );
    expectError(
      await api.call('PATCH', '/_emulator/organizations/org_demo_acme', { json: { plan: 'platinum' } }),
      400,
      'INVALID_PAYLOAD',
    );
  });
});
