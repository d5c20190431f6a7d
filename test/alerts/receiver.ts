// A real loopback HTTP receiver for alert tests: it records every request and answers with the
// statuses the test queues (200 once the queue is empty), or hangs up / never answers on demand.
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  raw: string;
  body: unknown;
}

export type ReceiverAnswer =
  | number
  | { status: number; headers?: Record<string, string>; body?: string }
  /** Destroys the socket without answering (a reset as the client sees it). */
  | 'hang-up'
  /** Never answers (for timeouts); the connection is closed when the receiver closes. */
  | 'silence';

export interface Receiver {
  /** Base URL, e.g. http://127.0.0.1:43121 */
  readonly url: string;
  readonly requests: ReceivedRequest[];
  /** Queues the answers to the next requests, in order. */
  answer(...answers: ReceiverAnswer[]): void;
  close(): Promise<void>;
}

function reply(res: ServerResponse, answer: Exclude<ReceiverAnswer, 'hang-up' | 'silence'>): void {
  const { status, headers = {}, body = status < 300 ? 'ok' : 'error' } = typeof answer === 'number' ? { status: answer } : answer;
  res.writeHead(status, { 'content-type': 'text/plain', ...headers });
  res.end(body);
}

export async function startReceiver(): Promise<Receiver> {
  const requests: ReceivedRequest[] = [];
  const queue: ReceiverAnswer[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown = raw;
      try {
        body = JSON.parse(raw);
      } catch {
        // Not JSON: keep the raw text.
      }
      requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, raw, body });
      const answer = queue.shift() ?? 200;
      if (answer === 'hang-up') req.socket.destroy();
      else if (answer !== 'silence') reply(res, answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    answer: (...answers) => queue.push(...answers),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => {
          if (error) reject(error);
          else resolve();
        });
      }),
  };
}

/** A URL on which nothing listens (a port that was free a moment ago). */
export async function refusedUrl(): Promise<string> {
  const receiver = await startReceiver();
  await receiver.close();
  return receiver.url;
}
