// The daemon's HTTP server on node:http: GET /healthz, GET /readyz, GET /metrics and the signed
// POST endpoints (the trigger, the leak intake: routes.ts wires them). node:http rather than
// fastify: a handful of routes, and every signed endpoint needs the raw body bytes (the signature
// covers them) with a hard size cap, which is plainer here than through a framework's body parsers. The port is reachable by whoever the network lets in, so
// the server bounds what one peer can hold: a connection cap and timeouts of a few seconds on
// headers, bodies and idle keep-alive connections (HttpLimits).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { UsageError } from '../errors.ts';
import type { HttpAnswer, InboundRequest } from '../inbound/public/answers.ts';

export interface ListenAddress {
  host: string;
  port: number;
}

/** `0.0.0.0:8080`, `[::]:8080`, `127.0.0.1:0`, `:8080` (all IPv4 interfaces) or `8080` (loopback). */
export function parseListenAddress(text: string): ListenAddress {
  const match = /^(?:(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):)?(\d{1,5})$/.exec(text.trim());
  const port = Number(match?.[2]);
  if (!match || !Number.isInteger(port) || port > 65_535) {
    throw new UsageError(
      `--listen ${JSON.stringify(text)} is not an address (use host:port, e.g. 127.0.0.1:8080, 0.0.0.0:8080 or [::]:8080)`,
    );
  }
  // A bare port keeps the safe default host; `:port` asks for every interface explicitly (as in Go).
  const host =
    match[1] === undefined ? '127.0.0.1' : match[1] === '' ? '0.0.0.0' : match[1].replace(/^\[(.*)\]$/, '$1');
  return { host, port };
}

export interface MetricsRequest {
  authorization: string | undefined;
}

export interface DaemonRoutes {
  readiness(): { ready: boolean; body: unknown };
  /** The exposition, or a refusal (a wrong bearer token). */
  metrics(request: MetricsRequest): Promise<{ contentType: string; text: string } | HttpAnswer>;
  /** The signed endpoints by path (POST /v1/rotations, /v1/leaks/github, /v1/leaks/gitguardian), each with its body cap. */
  signed: ReadonlyMap<string, SignedRoute>;
}

export interface SignedRoute {
  maxBodyBytes: number;
  handle(request: InboundRequest): Promise<HttpAnswer>;
}

export interface HttpLimits {
  /** Open connections at most; more are closed as they arrive. */
  maxConnections: number;
  /** From the first byte of a request until its headers are complete. */
  headersTimeoutMs: number;
  /** From the first byte of a request until its body is complete. */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
}

/** A signed body is at most a few hundred KiB; a caller that needs seconds to send headers or that is stuck. */
export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  maxConnections: 64,
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
};

function send(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    'content-length': Buffer.byteLength(text),
  });
  response.end(text);
}

/**
 * Reads at most `maxBytes`. Past that, answers 'too-large' at once and drops the
 * rest as it arrives (the answer closes the connection; the server's request timeout bounds a
 * sender that never stops).
 */
function readCappedBody(request: IncomingMessage, maxBytes: number): Promise<Buffer | 'too-large'> {
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    request.resume();
    return Promise.resolve('too-large');
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    let ended = false;
    request.on('data', (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > maxBytes) {
        over = true;
        chunks.length = 0;
        resolve('too-large');
        return;
      }
      chunks.push(chunk);
    });
    request.on('end', () => {
      ended = true;
      if (!over) resolve(Buffer.concat(chunks, size));
    });
    request.on('error', reject);
    // A request timeout destroys the socket without 'end' or always an 'error': settle anyway.
    request.on('close', () => {
      if (!ended && !over) reject(new Error('the request was closed before its body ended'));
    });
  });
}

async function route(
  routes: DaemonRoutes,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  const path = (request.url ?? '/').split('?')[0] ?? '/';
  const method = request.method ?? 'GET';
  const readOnly = method === 'GET' || method === 'HEAD';
  if (path === '/healthz' && readOnly) {
    // Alive means the event loop answers; readiness is the separate question.
    send(response, 200, { status: 'ok' });
    return;
  }
  if (path === '/readyz' && readOnly) {
    const { ready, body } = routes.readiness();
    send(response, ready ? 200 : 503, body);
    return;
  }
  if (path === '/metrics' && readOnly) {
    const answer = await routes.metrics({ authorization: request.headers.authorization });
    if ('status' in answer) {
      send(response, answer.status, answer.body);
      return;
    }
    const { contentType, text } = answer;
    response.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
    response.end(text);
    return;
  }
  const signed = routes.signed.get(path);
  if (signed !== undefined && method === 'POST') {
    // Capped raw bytes; the handler verifies the sender before it reads any of them.
    const body = await readCappedBody(request, signed.maxBodyBytes);
    // Proxies' X-Forwarded-For is not trusted: the audit names the peer that connected.
    const answer = await signed.handle({
      headers: request.headers,
      body,
      remoteAddress: request.socket.remoteAddress ?? 'unknown',
    });
    // An unread rest of an oversized body is not waited for: the connection is closed instead.
    if (body === 'too-large') response.setHeader('connection', 'close');
    send(response, answer.status, answer.body);
    return;
  }
  const known = path === '/healthz' || path === '/readyz' || path === '/metrics' || signed !== undefined;
  if (known) {
    response.setHeader('allow', signed !== undefined ? 'POST' : 'GET, HEAD');
    send(response, 405, {
      error: { code: 'method-not-allowed', message: `${method} is not allowed on ${path}` },
    });
    return;
  }
  send(response, 404, {
    error: {
      code: 'not-found',
      message: 'no such route (try /healthz, /readyz, /metrics or POST /v1/rotations)',
    },
  });
}

/** The server, built before it listens (the routes read the daemon's state when a request comes). */
export class DaemonServer {
  readonly #server: Server;
  #address: { url: string; port: number } | undefined;

  constructor(routes: DaemonRoutes, limits: HttpLimits = DEFAULT_HTTP_LIMITS) {
    this.#server = createServer(
      {
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: Math.max(limits.requestTimeoutMs, limits.headersTimeoutMs),
        keepAliveTimeout: limits.keepAliveTimeoutMs,
        // node:http enforces the two timeouts above only when it sweeps its connections, every 30 s
        // by default: that is what let a half-open request hold a socket for about 38 s.
        connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 4))),
      },
      (request, response) => {
        route(routes, request, response).catch(() => {
          // The detail stays out of the answer (it could name internals); the routes audit their own failures.
          if (!response.headersSent)
            send(response, 500, { error: { code: 'internal', message: 'internal error' } });
          else response.destroy();
        });
      },
    );
    this.#server.maxConnections = limits.maxConnections;
    // A connection that sends nothing at all never starts a request, so no request timeout covers
    // it: the socket's own inactivity timeout does (without a 'timeout' listener node destroys it).
    this.#server.setTimeout(Math.max(limits.requestTimeoutMs, limits.headersTimeoutMs));
  }

  async listen(address: ListenAddress): Promise<void> {
    const server = this.#server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(address.port, address.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const { port } = server.address() as AddressInfo;
    const reachableHost =
      address.host === '0.0.0.0' ? '127.0.0.1' : address.host === '::' ? '::1' : address.host;
    this.#address = {
      url: `http://${reachableHost.includes(':') ? `[${reachableHost}]` : reachableHost}:${port}`,
      port,
    };
  }

  /** http://host:port as reachable from this machine (once listening). */
  get url(): string {
    return this.#listening().url;
  }

  get port(): number {
    return this.#listening().port;
  }

  /** Stops accepting connections and closes the open ones. */
  close(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#server.close(() => {
        resolve();
      });
      this.#server.closeAllConnections();
    });
  }

  #listening(): { url: string; port: number } {
    if (this.#address === undefined) throw new Error('the daemon server is not listening yet');
    return this.#address;
  }
}
