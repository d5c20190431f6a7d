// src/http/undici.ts loads only the undici files keyroll uses. These tests hold it to what
// undici's index gives (the API on every dispatcher, request's URL handling and default
// dispatcher), against a real loopback server, and check in a fresh process that the index and
// the parts behind it (fetch, WebSocket, mocks, cache) are never loaded.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request as indexRequest } from 'undici';
import { Agent, getGlobalDispatcher, request } from '../../src/http/undici.ts';
import { startReceiver, type Receiver } from '../alerts/receiver.ts';

function captureError(call: () => unknown): Error & { code?: string } {
  try {
    call();
  } catch (error) {
    return error as Error & { code?: string };
  }
  throw new Error('expected a synchronous throw');
}

describe('src/http/undici.ts', () => {
  let receiver: Receiver;

  beforeAll(async () => {
    receiver = await startReceiver();
  });

  afterAll(async () => {
    await receiver.close();
  });

  it('request() sends the path and query of the URL, GET without a body and PUT with one, as undici does', async () => {
    receiver.requests.length = 0;
    receiver.answer({ status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ok: true }) });
    const get = await request(`${receiver.url}/v1/secret/data/a%2Fb?version=2`);
    expect(get.statusCode).toBe(200);
    expect(await get.body.json()).toEqual({ ok: true });
    const put = await request(new URL(`${receiver.url}/put`), { body: 'x=1' });
    await put.body.dump();
    const post = await request(`${receiver.url}/post`, { method: 'POST', body: '{}' });
    await post.body.dump();
    expect(receiver.requests.map(({ method, path, raw }) => ({ method, url: path, body: raw }))).toEqual([
      { method: 'GET', url: '/v1/secret/data/a%2Fb?version=2', body: '' },
      { method: 'PUT', url: '/put', body: 'x=1' },
      { method: 'POST', url: '/post', body: '{}' },
    ]);
  });

  it('request() refuses what undici’s own request refuses, with the same error (not http/https, no scheme)', () => {
    for (const url of ['ftp://127.0.0.1/x', 'vault.internal:8200/v1/sys/health']) {
      const ours = captureError(() => request(url));
      const undicis = captureError(() => indexRequest(url));
      expect(ours, url).toMatchObject({ name: 'InvalidArgumentError', code: 'UND_ERR_INVALID_ARG' });
      expect(ours, url).toMatchObject({ name: undicis.name, code: undicis.code, message: undicis.message });
    }
    expect(captureError(() => request('not a url')).name).toBe(captureError(() => indexRequest('not a url')).name);
  });

  it('request() uses the dispatcher it is given, and the global one otherwise', async () => {
    const dispatched: string[] = [];
    class RecordingAgent extends Agent {
      override dispatch(options: Parameters<Agent['dispatch']>[0], handler: Parameters<Agent['dispatch']>[1]): boolean {
        dispatched.push(options.path);
        return super.dispatch(options, handler);
      }
    }
    const agent = new RecordingAgent();
    try {
      await (await request(`${receiver.url}/through-agent`, { dispatcher: agent })).body.dump();
      await (await request(`${receiver.url}/through-global`)).body.dump();
      expect(dispatched).toEqual(['/through-agent']);
      expect(getGlobalDispatcher()).not.toBe(agent);
    } finally {
      await agent.close();
    }
  });

  it('gives every dispatcher the API methods (agent.request), as the index does', async () => {
    const agent = new Agent();
    try {
      const answer = await agent.request({ origin: receiver.url, path: '/agent-request', method: 'GET' });
      expect(answer.statusCode).toBe(200);
      await answer.body.dump();
    } finally {
      await agent.close();
    }
  });

  it('loads neither undici’s index nor fetch, WebSocket, the mocks or the cache API (a fresh process)', () => {
    const moduleUrl = new URL('../../src/http/undici.ts', import.meta.url).href;
    const script = `
      const { Agent } = await import(${JSON.stringify(moduleUrl)});
      const { createRequire } = await import('node:module');
      const loaded = Object.keys(createRequire(import.meta.url).cache).filter((p) => p.includes('/undici/'));
      console.log(JSON.stringify({ loaded, agentRequest: typeof new Agent().request }));`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: fileURLToPath(new URL('../../', import.meta.url)), encoding: 'utf8', timeout: 30_000 });
    expect(child.stderr).toBe('');
    const { loaded, agentRequest } = JSON.parse(child.stdout) as { loaded: string[]; agentRequest: string };
    expect(agentRequest).toBe('function');
    expect(loaded.some((path) => path.endsWith('/undici/lib/dispatcher/agent.js'))).toBe(true);
    const relative = loaded.map((path) => path.slice(path.lastIndexOf('/undici/') + '/undici/'.length));
    expect(relative.filter((path) => path === 'index.js' || /^lib\/(web|mock|cache|interceptor)\//.test(path))).toEqual([]);
  });
});
