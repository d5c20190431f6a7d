// The test Kubernetes API server is started the first time a test file asks for it, not for every
// run of the integration or fault projects: most of their files never talk to Kubernetes, and
// etcd + kube-apiserver take about 5 s of two busy cores and 300 MB to start. Test files
// run in worker processes, so they ask global-setup.ts over loopback HTTP, on a path holding a
// random token; every file of a run gets the same server (each test uses its own namespace).
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { KubeApiServerInfo } from '../support/kube-apiserver.ts';

/** The answer a test worker gets: the server, or why there is none. */
export type KubeOnDemandAnswer = { server: KubeApiServerInfo } | { missingReason: string };

export interface KubeOnDemand {
  /** What test workers GET to obtain the server. */
  url: string;
  close(): Promise<void>;
}

/**
 * Serves `start()`'s result to every request; `start` runs once, on the first request, and a
 * failure is kept too (a second test file would only fail the same way, slower).
 */
export async function serveKubeOnDemand(
  start: () => Promise<KubeApiServerInfo>,
  describeFailure: (error: unknown) => string,
): Promise<KubeOnDemand> {
  let answer: Promise<KubeOnDemandAnswer> | undefined;
  const path = `/${randomBytes(16).toString('hex')}`;
  const server = createServer((request, response) => {
    if (request.url !== path) {
      response.writeHead(404).end();
      return;
    }
    answer ??= start().then(
      (started) => ({ server: started }),
      (error: unknown) => ({ missingReason: describeFailure(error) }),
    );
    void answer.then((body) => {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
  });
  // No limit of the server's own: the start has its limits (test/support/kube-apiserver.ts).
  server.requestTimeout = 0;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${String(port)}${path}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  };
}
