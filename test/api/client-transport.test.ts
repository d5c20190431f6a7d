// Transport failures over real loopback sockets: a server that never answers, stalls mid-body,
// drops the connection or is not there at all. Timeouts are short but the outcome never depends
// on how fast the machine is: the server never answers at all.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiClient } from '../../src/api/client.ts';
import { staticCredential } from '../../src/api/credentials.ts';
import { ApiError } from '../../src/api/errors.ts';
import { Secret } from '../../src/audit/secret.ts';

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function serve(handler: Handler): Promise<{ url: string; server: Server; connections: () => number }> {
  let connections = 0;
  const server = createServer(handler);
  server.on('connection', () => {
    connections += 1;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  );
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, server, connections: () => connections };
}

function client(
  url: string,
  timeouts: { headersTimeoutMs?: number; bodyTimeoutMs?: number } = {},
): ApiClient {
  const api = new ApiClient({
    baseUrl: url,
    credentials: staticCredential(new Secret('transport-test-bearer')),
    ...timeouts,
  });
  cleanups.push(() => api.close());
  return api;
}

async function failure(promise: Promise<unknown>): Promise<ApiError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiError);
  return error as ApiError;
}

const EMPTY_PAGE = JSON.stringify({
  success: true,
  data: [],
  pagination: { nextCursor: null, hasMore: false },
});

describe('ApiClient transport', () => {
  it('reuses kept-alive connections across consecutive calls', async () => {
    const { url, connections } = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(EMPTY_PAGE);
    });
    const api = client(url);
    for (let i = 0; i < 6; i += 1) await api.listProjects({ limit: 1 });
    // undici may open a second socket when the next call starts before the first socket is marked
    // idle; what matters is that calls do not each pay for a new connection.
    expect(connections()).toBeLessThanOrEqual(2);
  });

  it('times out when no response headers arrive, and the roll outcome is unknown', async () => {
    const { url } = await serve(() => {
      // never answers
    });
    const error = await failure(client(url, { headersTimeoutMs: 100 }).rollKey('key_a'));
    expect(error.code).toBe('KR_API_TIMEOUT');
    expect(error.outcomeUnknown).toBe(true);
    expect(error.retryable).toBe(true);
  });

  it('times out when the body stalls after the headers', async () => {
    const { url } = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '500' });
      res.write('{"success":true,');
    });
    const error = await failure(client(url, { bodyTimeoutMs: 100 }).rollKey('key_a'));
    expect(error.code).toBe('KR_API_TIMEOUT');
    expect(error.message).toContain('body');
    expect(error.outcomeUnknown).toBe(true);
  });

  it('reports a connection dropped after the request as a connection error with unknown outcome', async () => {
    const { url } = await serve((req) => {
      req.socket.destroy();
    });
    const error = await failure(client(url).rollKey('key_a'));
    expect(error.code).toBe('KR_API_CONNECTION');
    expect(error.outcomeUnknown).toBe(true);
  });

  it('reports a body cut short of its content-length as a connection error', async () => {
    const { url } = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '200' });
      res.write('{"success":true,"data":{"key":"kmk_live_');
      setImmediate(() => res.socket?.destroy());
    });
    const error = await failure(client(url).rollKey('key_a'));
    expect(error.code).toBe('KR_API_CONNECTION');
    expect(error.outcomeUnknown).toBe(true);
  });

  it('reports a refused connection as not rolled', async () => {
    const { url, server } = await serve(() => undefined);
    await new Promise<void>((resolve) =>
      server.close(() => {
        resolve();
      }),
    );
    const error = await failure(client(url).rollKey('key_a'));
    expect(error.code).toBe('KR_API_CONNECTION');
    expect(error.message).toContain('ECONNREFUSED');
    expect(error.outcomeUnknown).toBe(false);
  });

  it('gives up on a body far larger than any API answer', async () => {
    const { url } = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(1024 * 1024, 0x20);
      for (let i = 0; i < 5; i += 1) res.write(chunk);
      res.end();
    });
    const error = await failure(client(url).listProjects({ limit: 1 }));
    expect(error.code).toBe('KR_API_MALFORMED_RESPONSE');
    expect(error.message).toContain('larger than');
  });

  it('reports an aborted call as aborted', async () => {
    const { url } = await serve(() => undefined);
    const controller = new AbortController();
    const pending = client(url).listProjects({ limit: 1 }, { signal: controller.signal });
    setImmediate(() => {
      controller.abort();
    });
    const error = await failure(pending);
    expect(error.code).toBe('KR_API_ABORTED');
    expect(error.retryable).toBe(false);
  });
});
