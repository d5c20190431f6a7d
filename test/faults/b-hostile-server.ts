// A loopback stand-in for the key-management API that answers each key's FIRST roll with a
// scripted hostile answer, and passes everything else (later rolls, the stored-secret probes, the
// verification calls) through to the emulator. An applied hostile roll is a real roll of the
// emulator (the old secret dies, a new one is minted and embedded in the hostile body), so
// "is the stored secret the live one" is answered by the emulator itself.
import { randomBytes } from 'node:crypto';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RunningEmulator } from '../../src/emulator/server.ts';
import type { HostileAnswer } from './b-hostile-answers.ts';

const ROLL_PATH = /^\/v1\/auth\/keys\/([^/?]+)\/roll(?:\?|$)/;

export interface KeyLog {
  /** Roll requests keyroll sent for the key. */
  rollRequests: number;
  /** Every secret minted for the key while scripted (hostile first roll and rolls passed through). */
  minted: string[];
  /** The value embedded in the hostile body: the minted secret, or a fake when nothing was minted. */
  embedded?: string;
  /** The hostile body as sent (before any cut). */
  body?: string;
}

export interface HostileApi {
  readonly url: string;
  script(keyId: string, answer: HostileAnswer): void;
  log(keyId: string): KeyLog;
  close(): Promise<void>;
}

function passThrough(
  emulator: RunningEmulator,
  req: IncomingMessage,
  res: ServerResponse,
  onBody?: (text: string) => void,
): void {
  const headers = { ...req.headers };
  delete headers.host;
  const upstream = request(
    new URL(req.url ?? '/', emulator.url),
    { method: req.method, headers },
    (answer) => {
      const chunks: Buffer[] = [];
      answer.on('data', (chunk: Buffer) => chunks.push(chunk));
      answer.on('end', () => {
        const body = Buffer.concat(chunks);
        onBody?.(body.toString('utf8'));
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        res.end(body);
      });
    },
  );
  upstream.on('error', () => res.socket?.destroy());
  req.pipe(upstream);
}

function send(
  req: IncomingMessage,
  res: ServerResponse,
  answer: HostileAnswer,
  body: string,
  timers: Set<NodeJS.Timeout>,
): void {
  const headers: Record<string, string> = {};
  if (answer.contentType !== undefined) headers['content-type'] = answer.contentType;
  if (answer.retryAfter !== undefined) headers['retry-after'] = answer.retryAfter;
  const every = (ms: number, tick: () => boolean): void => {
    const timer = setInterval(() => {
      if (!tick()) {
        clearInterval(timer);
        timers.delete(timer);
      }
    }, ms);
    timers.add(timer);
    res.on('close', () => {
      clearInterval(timer);
      timers.delete(timer);
    });
  };
  switch (answer.delivery) {
    case 'whole':
      res.writeHead(answer.status, headers);
      res.end(body);
      return;
    case 'drip': {
      // The whole body, 16 bytes every 20 ms: slow, but done well within the body timeout.
      res.writeHead(answer.status, headers);
      let at = 0;
      every(20, () => {
        res.write(body.slice(at, at + 16));
        at += 16;
        if (at < body.length) return true;
        res.end();
        return false;
      });
      return;
    }
    case 'drip-forever':
      // Half the body, then one byte every 100 ms for as long as the client listens.
      res.writeHead(answer.status, headers);
      res.write(body.slice(0, Math.floor(body.length / 2)));
      every(100, () => res.write(' '));
      return;
    case 'no-headers':
      // Never answer; the socket stays open until the client gives up.
      return;
    case 'cut-mid-body':
      res.writeHead(answer.status, headers);
      res.write(body.slice(0, Math.floor(body.length / 2)));
      every(20, () => {
        req.socket.destroy();
        return false;
      });
      return;
    case 'reset':
      req.socket.destroy();
      return;
  }
}

export async function startHostileApi(emulator: RunningEmulator): Promise<HostileApi> {
  const scripts = new Map<string, HostileAnswer>();
  const logs = new Map<string, KeyLog>();
  const timers = new Set<NodeJS.Timeout>();
  const logOf = (keyId: string): KeyLog => {
    let log = logs.get(keyId);
    if (!log) {
      log = { rollRequests: 0, minted: [] };
      logs.set(keyId, log);
    }
    return log;
  };

  const server = createServer((req, res) => {
    const match = ROLL_PATH.exec(req.url ?? '');
    const keyId = match?.[1] === undefined ? undefined : decodeURIComponent(match[1]);
    if (keyId === undefined || !scripts.has(keyId)) {
      passThrough(emulator, req, res);
      return;
    }
    const log = logOf(keyId);
    log.rollRequests++;
    if (log.rollRequests > 1) {
      // Later rolls are the real API's, recorded so the test knows every secret of the key.
      passThrough(emulator, req, res, (text) => {
        const key = (JSON.parse(text) as { data?: { key?: string } }).data?.key;
        if (typeof key === 'string') log.minted.push(key);
      });
      return;
    }
    req.resume();
    const answer = scripts.get(keyId) as HostileAnswer;
    const embedded = answer.applies
      ? emulator.state.rollKey(keyId)
      : `kmk_live_FAKE${randomBytes(18).toString('base64url')}`;
    if (answer.applies) log.minted.push(embedded);
    log.embedded = embedded;
    log.body = answer.body.render(embedded, keyId);
    send(req, res, answer, log.body, timers);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    script: (keyId, answer) => {
      scripts.set(keyId, answer);
    },
    log: logOf,
    close: () =>
      new Promise<void>((resolve, reject) => {
        for (const timer of timers) clearInterval(timer);
        server.closeAllConnections();
        server.close((error) => {
          if (error) reject(error);
          else resolve();
        });
      }),
  };
}
