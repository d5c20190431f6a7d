// What keyroll relies on from undici's public API (`import { Agent, request } from 'undici'`),
// checked against a real loopback server: the Vault client, the alert sinks and the Pushgateway
// call request(url, …); the API client calls `dispatcher.request({ origin, path, … })` on its own
// Agent. An undici upgrade that changes one of these fails here rather than in a rotation.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, getGlobalDispatcher, request } from 'undici';
import { startReceiver, type Receiver } from '../support/alert-receiver.ts';

describe('undici, as keyroll uses it', () => {
  let receiver: Receiver;

  beforeAll(async () => {
    receiver = await startReceiver();
  });

  afterAll(async () => {
    await receiver.close();
  });

  it('request() sends the URL’s path and query as written (a Vault path’s %2F stays), and the method asked for', async () => {
    receiver.requests.length = 0;
    receiver.answer({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ok: true }),
    });
    const get = await request(`${receiver.url}/v1/secret/data/a%2Fb?version=2`);
    expect(get.statusCode).toBe(200);
    expect(await get.body.json()).toEqual({ ok: true });
    const post = await request(new URL(`${receiver.url}/post`), { method: 'POST', body: '{}' });
    await post.body.dump();
    expect(receiver.requests.map(({ method, path, raw }) => ({ method, url: path, body: raw }))).toEqual([
      { method: 'GET', url: '/v1/secret/data/a%2Fb?version=2', body: '' },
      { method: 'POST', url: '/post', body: '{}' },
    ]);
  });

  it('request() refuses an address that is not http(s) with a typed error the callers map (a Vault address without its scheme)', async () => {
    for (const url of ['ftp://127.0.0.1/x', 'vault.internal:8200/v1/sys/health']) {
      // undici throws this synchronously today; the callers await inside try, so a rejection would do as well.
      await expect(
        Promise.resolve().then(() => request(url)),
        url,
      ).rejects.toMatchObject({ name: 'InvalidArgumentError', code: 'UND_ERR_INVALID_ARG' });
    }
  });

  it('request() uses the dispatcher it is given, and the global one otherwise', async () => {
    const dispatched: string[] = [];
    class RecordingAgent extends Agent {
      override dispatch(
        options: Parameters<Agent['dispatch']>[0],
        handler: Parameters<Agent['dispatch']>[1],
      ): boolean {
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

  it('gives an Agent the request API (agent.request), which the API client calls', async () => {
    const agent = new Agent();
    try {
      const answer = await agent.request({ origin: receiver.url, path: '/agent-request', method: 'GET' });
      expect(answer.statusCode).toBe(200);
      await answer.body.dump();
    } finally {
      await agent.close();
    }
  });
});
