// A small TCP fault proxy between keyroll and a real server (OpenBao, moto), so backend faults
// are real network faults: the backend's own client meets resets, silences and lost answers,
// not a mocked exception. One listener on a free loopback port; each accepted connection gets
// its own upstream connection. Switching to `down` cuts the connections already open,
// so a keep-alive pool cannot slip past the fault; the counted modes count requests instead.
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

export type ProxyMode =
  /** Forward both ways. */
  | { kind: 'pass' }
  /** Backend down: every connection is reset as soon as it is accepted. */
  | { kind: 'down' }
  /** Backend slow past any timeout: connections are accepted, requests swallowed, nothing answered. */
  | { kind: 'silent' }
  /**
   * Backend down for the next `requests` requests only: each is reset (a request on a pooled
   * connection, or a new connection), then forwarding resumes. Counting requests, not
   * connections, makes "the first N attempts fail" independent of the client's pool size.
   */
  | { kind: 'downFirst'; requests: number }
  /** The answer is lost: the next `requests` requests reach the server (which applies them), and their connection is reset when the answer starts to come back. */
  | { kind: 'loseAnswer'; requests: number }
  /** Forward, but hold the first request whose bytes match `match` (and the rest of its connection) until release(). */
  | { kind: 'hold'; match: RegExp };

export interface FaultProxy {
  /** `http://127.0.0.1:<port>`, to put in a backend's address or endpoint. */
  readonly url: string;
  readonly port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  set(mode: ProxyMode): void;
  /** Resolves once a `hold` mode caught a request. */
  held(): Promise<void>;
  /** Lets a held request go on and returns to `pass`. */
  release(): void;
  close(): Promise<void>;
}

interface Link {
  client: Socket;
  upstream: Socket;
  loseAnswer: boolean;
  holding: Buffer[] | undefined;
}

export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const { hostname, port: targetPort } = new URL(target);
  let mode: ProxyMode = { kind: 'pass' };
  let budget = 0;
  let accepted = 0;
  let heldLink: Link | undefined;
  let heldWaiters: (() => void)[] = [];
  const links = new Set<Link>();

  const cut = (link: Link): void => {
    links.delete(link);
    link.client.resetAndDestroy();
    link.upstream.destroy();
  };
  const cutAll = (): void => {
    for (const link of [...links]) cut(link);
  };

  const onClientData = (link: Link, chunk: Buffer): void => {
    if (link.holding) {
      link.holding.push(chunk);
      return;
    }
    if (mode.kind === 'silent') return;
    if (mode.kind === 'down' || (mode.kind === 'downFirst' && budget > 0)) {
      if (mode.kind === 'downFirst') budget--;
      cut(link);
      return;
    }
    if (mode.kind === 'loseAnswer' && budget > 0 && !link.loseAnswer) {
      budget--;
      link.loseAnswer = true;
    }
    if (mode.kind === 'hold' && heldLink === undefined && mode.match.test(chunk.toString('latin1'))) {
      heldLink = link;
      link.holding = [chunk];
      const waiters = heldWaiters;
      heldWaiters = [];
      for (const wake of waiters) wake();
      return;
    }
    link.upstream.write(chunk);
  };

  const server: Server = createServer((client) => {
    accepted++;
    if (mode.kind === 'down' || (mode.kind === 'downFirst' && budget > 0)) {
      if (mode.kind === 'downFirst') budget--;
      client.resetAndDestroy();
      return;
    }
    const upstream = connect({ host: hostname, port: Number(targetPort) });
    const link: Link = { client, upstream, loseAnswer: false, holding: undefined };
    links.add(link);
    client.on('data', (chunk: Buffer) => {
      onClientData(link, chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (link.loseAnswer) cut(link);
      else client.write(chunk);
    });
    const end = (): void => {
      if (links.has(link)) cut(link);
    };
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    get accepted() {
      return accepted;
    },
    set(next) {
      mode = next;
      budget = next.kind === 'downFirst' || next.kind === 'loseAnswer' ? next.requests : 0;
      if (next.kind === 'down') cutAll();
    },
    held: () => (heldLink ? Promise.resolve() : new Promise<void>((resolve) => heldWaiters.push(resolve))),
    release() {
      const link = heldLink;
      heldLink = undefined;
      mode = { kind: 'pass' };
      if (!link?.holding) return;
      const queued = link.holding;
      link.holding = undefined;
      for (const chunk of queued) link.upstream.write(chunk);
    },
    close: () =>
      new Promise<void>((resolve) => {
        cutAll();
        server.close(() => {
          resolve();
        });
      }),
  };
}
