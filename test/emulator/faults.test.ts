// Fault injection: each fault kind over real loopback HTTP, what it applies and what it loses.
import { request } from 'undici';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { OWNER, dataOf, errorOf, expectError, startTestEmulator, type EmulatorEnv } from './support.ts';

let env: EmulatorEnv | undefined;
afterEach(async () => {
  await env?.emu.close();
  env = undefined;
});

async function start(options: Parameters<typeof startTestEmulator>[0] = {}): Promise<EmulatorEnv> {
  env = await startTestEmulator(options);
  return env;
}

/** A roll whose connection is expected to die: resolves to the transport error's code. */
async function rollExpectingNoAnswer(url: string, keyId: string): Promise<string> {
  try {
    const res = await request(`${url}/v1/auth/keys/${keyId}/roll`, {
      method: 'POST',
      headers: { authorization: `Bearer ${OWNER}` },
    });
    await res.body.text();
    return `answered ${res.statusCode}`;
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  }
}

describe('emulator fault injection', () => {
  it('status: answers the status, code and Retry-After for the next N calls only, without applying', async () => {
    const { emu, api } = await start();
    emu.faults.inject('roll', { kind: 'status', status: 429, retryAfter: '3' }, 2);
    expect(emu.faults.pending('roll')).toBe(2);
    for (let i = 0; i < 2; i += 1) {
      const answer = await api.roll('key_demo_billing', OWNER);
      expectError(answer, 429, 'RATE_LIMITED');
      expect(answer.headers['retry-after']).toBe('3');
    }
    expect(emu.state.rollCount('key_demo_billing')).toBe(0);
    expect((await api.roll('key_demo_billing', OWNER)).status).toBe(200);
    expect(emu.faults.pending('roll')).toBe(0);
  });

  it('status: an explicit code replaces the default one for the status', async () => {
    const { emu, api } = await start();
    emu.faults.inject('listProjects', { kind: 'status', status: 400, code: 'INVALID_REGION' });
    expectError(await api.list('?limit=1', OWNER), 400, 'INVALID_REGION');
  });

  it('faults belong to one operation: a roll fault leaves listing alone', async () => {
    const { emu, api } = await start();
    emu.faults.inject('roll', { kind: 'status', status: 503 });
    expect((await api.list('?limit=1', OWNER)).status).toBe(200);
    expect(emu.faults.pending('roll')).toBe(1);
    expect(emu.faults.pending('listProjects')).toBe(0);
  });

  it('clear: drops every queued fault', async () => {
    const { emu, api } = await start();
    emu.faults.inject('roll', { kind: 'drop' }, 5);
    emu.faults.inject('updateConsent', { kind: 'drop' });
    emu.faults.clear();
    expect((await api.roll('key_demo_billing', OWNER)).status).toBe(200);
    expect(emu.faults.pending('updateConsent')).toBe(0);
  });

  it('delay: holds the call before anything is applied, then answers normally', async () => {
    let release: () => void = () => undefined;
    const waited: number[] = [];
    const { emu, api } = await start({
      sleep: (ms) => {
        waited.push(ms);
        return new Promise<void>((resolve) => (release = resolve));
      },
    });
    emu.faults.inject('roll', { kind: 'delay', ms: 2500 });
    const pending = api.roll('key_demo_billing', OWNER);
    await vi.waitFor(() => {
      expect(waited).toEqual([2500]);
    });
    expect(emu.state.rollCount('key_demo_billing')).toBe(0);
    release();
    const answer = await pending;
    expect(dataOf<{ keyId: string }>(answer).keyId).toBe('key_demo_billing');
    expect(emu.state.rollCount('key_demo_billing')).toBe(1);
  });

  it('drop: the connection dies without an answer and the roll is not applied', async () => {
    const { emu } = await start();
    const before = emu.state.currentSecret('key_demo_billing');
    emu.faults.inject('roll', { kind: 'drop' });
    expect(await rollExpectingNoAnswer(emu.url, 'key_demo_billing')).toBe('UND_ERR_SOCKET');
    expect(emu.state.rollCount('key_demo_billing')).toBe(0);
    expect(emu.state.isLiveSecret('key_demo_billing', before)).toBe(true);
  });

  it('failAfterApply status500: the roll happened (old secret dead) but the answer is a 500', async () => {
    const { emu, api } = await start();
    const before = emu.state.currentSecret('key_demo_billing');
    emu.faults.inject('roll', { kind: 'failAfterApply', then: 'status500' });
    const answer = await api.roll('key_demo_billing', OWNER);
    expectError(answer, 500, 'INTERNAL_ERROR');
    expectNoSecrets([answer.text], [emu.state.currentSecret('key_demo_billing')]);
    expect(emu.state.rollCount('key_demo_billing')).toBe(1);
    expect(emu.state.isLiveSecret('key_demo_billing', before)).toBe(false);
    expectError(await api.list('?limit=1', before), 401, 'UNAUTHORIZED');
  });

  it('failAfterApply drop: the roll happened and the connection dies', async () => {
    const { emu } = await start();
    const before = emu.state.currentSecret('key_demo_billing');
    emu.faults.inject('roll', { kind: 'failAfterApply', then: 'drop' });
    expect(await rollExpectingNoAnswer(emu.url, 'key_demo_billing')).toBe('UND_ERR_SOCKET');
    expect(emu.state.rollCount('key_demo_billing')).toBe(1);
    expect(emu.state.isLiveSecret('key_demo_billing', before)).toBe(false);
  });

  it('failAfterApply hang: the roll happened and no answer ever comes; close() still ends the connection', async () => {
    const { emu } = await start();
    emu.faults.inject('roll', { kind: 'failAfterApply', then: 'hang' });
    const outcome = rollExpectingNoAnswer(emu.url, 'key_demo_billing');
    await vi.waitFor(() => {
      expect(emu.state.rollCount('key_demo_billing')).toBe(1);
    });
    await emu.close();
    env = undefined;
    expect(await outcome).toBe('UND_ERR_SOCKET');
  });

  it('failAfterApply on an update: the change is applied and the answer lost', async () => {
    const { emu, api } = await start();
    emu.faults.inject('updateProject', { kind: 'failAfterApply', then: 'status500' });
    expectError(
      await api.updateProject('prj_demo_mobile', OWNER, { description: 'applied' }),
      500,
      'INTERNAL_ERROR',
    );
    expect(emu.state.project('prj_demo_mobile').description).toBe('applied');
  });

  it('malformed on roll: applies, then answers the raw body with {{key}} replaced by the new secret', async () => {
    const { emu, api } = await start();
    const before = emu.state.currentSecret('key_demo_billing');
    emu.faults.inject('roll', {
      kind: 'malformed',
      body: '<html>{"data":{"key":"{{key}}"}}',
      contentType: 'text/html',
      status: 502,
    });
    const answer = await api.roll('key_demo_billing', OWNER);
    expect(answer.status).toBe(502);
    expect(answer.headers['content-type']).toMatch(/^text\/html/);
    expect(answer.text).toBe(`<html>{"data":{"key":"${emu.state.currentSecret('key_demo_billing')}"}}`);
    expect(emu.state.isLiveSecret('key_demo_billing', before)).toBe(false);
  });

  it('malformed on roll: a refused roll still answers its real error (nothing minted to embed)', async () => {
    const { emu, api } = await start();
    emu.faults.inject('roll', { kind: 'malformed', body: '{{key}}' });
    expectError(await api.roll('key_nope', OWNER), 404, 'NOT_FOUND');
    expect(emu.faults.pending('roll')).toBe(0);
  });

  it('malformed on other operations: answers the raw body without applying', async () => {
    const { emu, api } = await start();
    emu.faults.inject('updateProject', { kind: 'malformed', body: '{"success":tru' });
    const answer = await api.updateProject('prj_demo_mobile', OWNER, { description: 'not applied' });
    expect({ status: answer.status, text: answer.text }).toEqual({ status: 200, text: '{"success":tru' });
    expect(emu.state.project('prj_demo_mobile').description).toBe('iOS and Android clients');
  });

  it('faults fire before authentication: the next call meets the fault whoever sends it', async () => {
    const { emu, api } = await start();
    emu.faults.inject('listProjects', { kind: 'status', status: 503 });
    expectError(await api.list('?limit=1', undefined), 503, 'SERVICE_UNAVAILABLE');
    expect(errorOf(await api.list('?limit=1', undefined)).code).toBe('UNAUTHORIZED');
  });
});
