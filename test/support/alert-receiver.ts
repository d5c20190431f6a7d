// A real loopback HTTP receiver for alert tests: it records every request and answers with the
// statuses the test queues (200 once the queue is empty), or hangs up / never answers on demand,
// or answers like a hostile receiver: a huge body streamed as fast as the client reads it, or a
// body dripped one byte at a time. It counts the body bytes it managed to hand to the socket.
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
  | 'silence'
  /** `status`, then `streamBytes` of body, written only as fast as the client reads (backpressure). */
  | { status: number; streamBytes: number }
  /** `status` and headers at once, then one body byte every `dripMs`, until the client goes away. */
  | { status: number; dripMs: number };

export interface Receiver {
  /** Base URL, e.g. http://127.0.0.1:43121 */
  readonly url: string;
  readonly requests: ReceivedRequest[];
  /** Queues the answers to the next requests, in order. */
  answer(...answers: ReceiverAnswer[]): void;
  /** Body bytes of streamed and dripped answers that the socket accepted. */
  readonly bodyBytesSent: number;
  /** Resolves once every streamed or dripped answer has ended (finished, or the client went away). */
  hostileAnswersDone(): Promise<void>;
  close(): Promise<void>;
}

type PlainAnswer = number | { status: number; headers?: Record<string, string>; body?: string };
type HostileAnswer = { status: number; streamBytes: number } | { status: number; dripMs: number };

const STREAM_CHUNK = Buffer.alloc(64 * 1024, 'e');

/** Writes the hostile body; resolves when it ended or the client closed. Counts accepted bytes. */
function replyHostile(
  res: ServerResponse,
  answer: HostileAnswer,
  count: (bytes: number) => void,
): Promise<void> {
  res.writeHead(answer.status, { 'content-type': 'text/plain' });
  res.flushHeaders();
  return new Promise<void>((resolve) => {
    let closed = false;
    res.on('close', () => {
      closed = true;
      resolve();
    });
    if ('dripMs' in answer) {
      const timer = setInterval(() => {
        if (closed) {
          clearInterval(timer);
          return;
        }
        res.write('e');
        count(1);
      }, answer.dripMs);
      res.on('close', () => {
        clearInterval(timer);
      });
      return;
    }
    let left = answer.streamBytes;
    const pump = (): void => {
      while (!closed && left > 0) {
        const chunk = left >= STREAM_CHUNK.length ? STREAM_CHUNK : STREAM_CHUNK.subarray(0, left);
        left -= chunk.length;
        count(chunk.length);
        if (!res.write(chunk)) {
          res.once('drain', pump);
          return;
        }
      }
      if (!closed) res.end();
    };
    pump();
  });
}

function reply(res: ServerResponse, answer: PlainAnswer): void {
  const {
    status,
    headers = {},
    body = status < 300 ? 'ok' : 'error',
  } = typeof answer === 'number' ? { status: answer } : answer;
  res.writeHead(status, { 'content-type': 'text/plain', ...headers });
  res.end(body);
}

export async function startReceiver(): Promise<Receiver> {
  const requests: ReceivedRequest[] = [];
  const queue: ReceiverAnswer[] = [];
  const hostile: Promise<void>[] = [];
  let bodyBytesSent = 0;
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
      else if (answer === 'silence') return;
      else if (typeof answer === 'object' && ('streamBytes' in answer || 'dripMs' in answer)) {
        hostile.push(replyHostile(res, answer, (bytes) => (bodyBytesSent += bytes)));
      } else reply(res, answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    answer: (...answers) => queue.push(...answers),
    get bodyBytesSent() {
      return bodyBytesSent;
    },
    hostileAnswersDone: async () => {
      await Promise.all(hostile);
    },
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
