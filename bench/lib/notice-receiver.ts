// A loopback webhook standing for a service outside Kubernetes that listens to keyroll's success
// notice (a `webhook` consumer, policy keys[].consumers): it records when the notice of each key
// arrived and tells the caller at once, so a simulated consumer can drop its cache. The notice
// carries no secret (src/alerts/webhook.ts); the receiver keeps only the key id and the time.
import { createServer, type IncomingMessage, type Server } from 'node:http';

export interface NoticeReceiver {
  /** The sink URL for the policy's `alerts.sinks`. */
  url: string;
  /** Per key id: when each notice arrived (performance.now()). */
  arrivals: Map<string, number[]>;
  close(): Promise<void>;
}

export async function startNoticeReceiver(
  onNotice: (keyId: string) => void = () => undefined,
): Promise<NoticeReceiver> {
  const arrivals = new Map<string, number[]>();
  const server: Server = createServer((request: IncomingMessage, response) => {
    const at = performance.now();
    let body = '';
    request.on('data', (chunk: Buffer) => {
      body += chunk.toString('utf8');
    });
    request.on('end', () => {
      try {
        const notice = JSON.parse(body) as { event?: unknown; keyId?: unknown };
        if (notice.event === 'rotation.succeeded' && typeof notice.keyId === 'string') {
          arrivals.set(notice.keyId, [...(arrivals.get(notice.keyId) ?? []), at]);
          onNotice(notice.keyId);
        }
      } catch {
        // Not a notice (a failure alert, if any): counted nowhere.
      }
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the notice receiver has no port');
  return {
    url: `http://127.0.0.1:${String(address.port)}/notices`,
    arrivals,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  };
}
