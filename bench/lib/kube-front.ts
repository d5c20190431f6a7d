// A counting front between a keyroll process and the test kube-apiserver: plain HTTP on
// 127.0.0.1, forwarded over TLS as the cluster admin (client certificate), so the keyroll process
// needs no credential of its own and every request it sends passes here once. Each request is
// counted by what it does to which resource and how it was answered, e.g.
// `PATCH rotatedkeys/status 200`, `PATCH rotatedkeys/status 409`, `POST events 201`,
// `WATCH rotatedkeys 200`: the ground truth of "status writes per rotation" (issue 31), with the
// conflicts a patch met counted apart from the writes the API server took. Bodies and watch
// streams pass through untouched, as they come (a watch is held open as long as the API server holds it).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, request } from 'undici';
import type { KubeApiServerInfo } from '../../test/support/kube-apiserver.ts';

export interface KubeFront {
  /** http://127.0.0.1:PORT: the server a kubeconfig names. */
  url: string;
  /**
   * Requests by `METHOD resource[/sub] STATUS`, counted at the answer's headers; beside them `error`
   * (no answer), `cut` (the answer broke off) and `unsent` (the client's side closed first).
   */
  counts(): Record<string, number>;
  /** When (performance.now(), at the answer) each request of this kind was answered, e.g. times('PATCH rotatedkeys/status 200'). */
  times(kind: string): readonly number[];
  /** How long the API server took to answer each request of this kind (front received → answer headers), ms. */
  latencies(kind: string): readonly number[];
  /** The count of one kind, e.g. count('PATCH', 'rotatedkeys/status', 200). */
  count(method: string, resource: string, status?: number): number;
  /** A kubeconfig (YAML) whose cluster is this front, with no user credential. */
  kubeconfig(): string;
  close(): Promise<void>;
}

/** `rotatedkeys/status` of /apis/keyroll.io/v1alpha1/namespaces/team-0/rotatedkeys/key-1/status. */
export function resourceOf(path: string): string {
  const segments = path.split('/').filter((s) => s !== '');
  // /api/v1/... (core) or /apis/GROUP/VERSION/...
  const rest = segments[0] === 'api' ? segments.slice(2) : segments.slice(3);
  const scoped = rest[0] === 'namespaces' && rest.length >= 3 ? rest.slice(2) : rest;
  const resource = scoped[0] ?? '(discovery)';
  return scoped[2] === undefined ? resource : `${resource}/${scoped[2]}`;
}

/** Not forwarded: the hop's own, and the host and credential the upstream connection sets. */
const HOP = new Set(['connection', 'transfer-encoding', 'keep-alive', 'host', 'authorization']);

function kindOf(req: IncomingMessage): { method: string; resource: string } {
  const url = new URL(req.url ?? '/', 'http://front');
  const method = req.method ?? 'GET';
  const watch = method === 'GET' && url.searchParams.get('watch') === 'true';
  return { method: watch ? 'WATCH' : method, resource: resourceOf(url.pathname) };
}

export async function startKubeFront(kube: KubeApiServerInfo): Promise<KubeFront> {
  // No body or headers timeout: a watch stays quiet for minutes when nothing changes.
  const agent = new Agent({
    connect: { ca: kube.caPem, cert: kube.admin.certPem, key: kube.admin.keyPem },
    connections: 128,
    bodyTimeout: 0,
    headersTimeout: 0,
  });
  const counts = new Map<string, number>();
  const times = new Map<string, number[]>();
  const latencies = new Map<string, number[]>();
  const push = (map: Map<string, number[]>, key: string, value: number): void => {
    const list = map.get(key);
    if (list === undefined) map.set(key, [value]);
    else list.push(value);
  };
  const add = (key: string, receivedAt: number): void => {
    counts.set(key, (counts.get(key) ?? 0) + 1);
    const now = performance.now();
    push(times, key, now);
    push(latencies, key, now - receivedAt);
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const receivedAt = performance.now();
    const { method, resource } = kindOf(req);
    const headers = Object.fromEntries(Object.entries(req.headers).filter(([name]) => !HOP.has(name)));
    request(new URL(req.url ?? '/', kube.server), {
      method: (req.method ?? 'GET') as 'GET',
      headers,
      body: req.method === 'GET' || req.method === 'HEAD' ? null : req,
      dispatcher: agent,
    })
      .then(async (answer) => {
        add(`${method} ${resource} ${String(answer.statusCode)}`, receivedAt);
        const outHeaders: Record<string, string | string[]> = {};
        for (const [name, value] of Object.entries(answer.headers))
          if (value !== undefined && !HOP.has(name)) outHeaders[name] = value;
        res.writeHead(answer.statusCode, outHeaders);
        res.on('close', () => {
          // The daemon's side closed before the whole answer was written to it.
          if (!res.writableFinished) add(`${method} ${resource} unsent`, receivedAt);
          answer.body.destroy();
        });
        for await (const chunk of answer.body) res.write(chunk as Buffer);
        res.end();
      })
      .catch(() => {
        // `error`: no answer from the API server; `cut`: its answer broke off after the headers.
        add(`${method} ${resource} ${res.headersSent ? 'cut' : 'error'}`, receivedAt);
        res.destroy();
      });
  });
  // No timeout of Node's HTTP server between the daemon and the API server (the front must add no
  // failure): with the defaults (5 s keep-alive, the periodic request and headers timeout check) a
  // few answers the API server gave were lost on the way back (runs 1 to 3 of docs/benchmarks.md).
  server.keepAliveTimeout = 0;
  server.requestTimeout = 0;
  server.headersTimeout = 0;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${String(port)}`;
  return {
    url,
    times: (kind) => times.get(kind) ?? [],
    latencies: (kind) => latencies.get(kind) ?? [],
    counts: () => Object.fromEntries([...counts.entries()].sort((a, b) => b[1] - a[1])),
    count: (method, resource, status) =>
      [...counts.entries()]
        .filter(([key]) =>
          status === undefined
            ? key.startsWith(`${method} ${resource} `)
            : key === `${method} ${resource} ${String(status)}`,
        )
        .reduce((sum, [, n]) => sum + n, 0),
    kubeconfig: () =>
      [
        'apiVersion: v1',
        'kind: Config',
        // client-node refuses http:// unless told to skip TLS checks; there is no TLS to check here.
        `clusters: [{ name: bench, cluster: { server: "${url}", insecure-skip-tls-verify: true } }]`,
        'users: [{ name: bench, user: {} }]',
        'contexts: [{ name: bench, context: { cluster: bench, user: bench } }]',
        'current-context: bench',
        '',
      ].join('\n'),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) =>
        server.close(() => {
          resolve();
        }),
      );
      await agent.close();
    },
  };
}
