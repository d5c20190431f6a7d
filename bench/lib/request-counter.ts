// A counting HTTP proxy in front of a backend server: how many requests of each kind a rotation
// costs (the figure behind the shell-loop ratio, and the check that an optimisation removed
// requests, not just time). Loopback only; bodies pass through untouched.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, request } from 'undici';

export interface RequestCounter {
  url: string;
  /** Requests by kind: `X-Amz-Target` for AWS, `METHOD /v1/<path shape>` for Vault. */
  counts(): Record<string, number>;
  total(): number;
  reset(): void;
  close(): Promise<void>;
}

/** Vault paths with the key-specific part replaced, so 100 keys give one row per kind. */
function kindOf(req: IncomingMessage): string {
  const target = req.headers['x-amz-target'];
  if (typeof target === 'string') return target.replace(/^secretsmanager\./, '');
  const path = (req.url ?? '').split('?')[0] ?? '';
  const shape = path
    .replace(/\/(data|metadata)\/.*\.keyroll-lock$/, '/$1/<lock>')
    .replace(/\/(data|metadata)\/(?!<lock>).*$/, '/$1/<path>');
  return `${req.method ?? 'GET'} ${shape}`;
}

export async function startRequestCounter(targetUrl: string): Promise<RequestCounter> {
  const agent = new Agent({ connections: 64 });
  const counts = new Map<string, number>();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const kind = kindOf(req);
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
    const headers = { ...req.headers };
    delete headers.connection;
    delete headers['transfer-encoding'];
    request(new URL(req.url ?? '/', targetUrl), {
      method: (req.method ?? 'GET') as 'GET',
      headers,
      body: req.method === 'GET' || req.method === 'HEAD' ? null : req,
      dispatcher: agent,
    })
      .then(async (answer) => {
        const outHeaders: Record<string, string | string[]> = {};
        for (const [name, value] of Object.entries(answer.headers)) {
          if (
            value !== undefined &&
            name !== 'connection' &&
            name !== 'transfer-encoding' &&
            name !== 'keep-alive'
          )
            outHeaders[name] = value;
        }
        res.writeHead(answer.statusCode, outHeaders);
        for await (const chunk of answer.body) res.write(chunk as Buffer);
        res.end();
      })
      .catch(() => {
        res.destroy();
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${String(port)}`,
    counts: () => Object.fromEntries([...counts.entries()].sort((a, b) => b[1] - a[1])),
    total: () => [...counts.values()].reduce((sum, n) => sum + n, 0),
    reset: () => {
      counts.clear();
    },
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
