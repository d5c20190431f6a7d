// The reflector's resume rules against a scripted stand-in of the API server (the real one is in
// test/integration/kube-crd-watch.test.ts): what a real server does not choose to show on demand —
// a bookmark, a 410 sent as an HTTP answer rather than a watch ERROR event, a handler that throws.
import { describe, expect, it } from 'vitest';
import { createMemoryAuditLog } from '../../../src/audit/logger.ts';
import { answerError, CrdError } from '../../../src/crd/watch/errors.ts';
import type { ListPage, WatchEvent, WatchFrom, WatchRequests } from '../../../src/crd/watch/kube-client.ts';
import { Reflector } from '../../../src/crd/watch/reflector.ts';
import type { WatchedObject } from '../../../src/crd/watch/resource.ts';

const RESOURCE = { group: 'keyroll.io', version: 'v1alpha1', plural: 'rotatedkeys' };
const object = (name: string, resourceVersion: string): WatchedObject => ({
  metadata: { namespace: 'team-a', name, resourceVersion },
});

/** One script step per watch connection: events to send, then how the connection ends. */
type Connection = { events: WatchEvent[]; end?: CrdError };

class ScriptedServer implements WatchRequests {
  readonly lists: ListPage[][];
  readonly connections: Connection[];
  readonly watchedFrom: string[] = [];
  readonly listed: number[] = [];
  readonly #done: AbortController;

  constructor(lists: ListPage[][], connections: Connection[], done: AbortController) {
    this.lists = lists;
    this.connections = connections;
    this.#done = done;
  }

  async list(_resource: unknown, page: { limit: number; continue?: string }): Promise<ListPage> {
    const index = this.listed.length;
    const pages = this.lists[Math.min(index, this.lists.length - 1)] ?? [];
    const at = page.continue === undefined ? 0 : Number(page.continue);
    if (at === 0) this.listed.push(index);
    return Promise.resolve(pages[at] ?? { items: [], resourceVersion: '0' });
  }

  async *watch(_resource: unknown, from: WatchFrom): AsyncIterable<WatchEvent> {
    this.watchedFrom.push(from.resourceVersion);
    const connection = this.connections.shift();
    if (connection === undefined) {
      this.#done.abort();
      return;
    }
    await Promise.resolve();
    yield* connection.events;
    if (connection.end !== undefined) throw connection.end;
  }
}

async function runScript(lists: ListPage[][], connections: Connection[]) {
  const done = new AbortController();
  const server = new ScriptedServer(lists, connections, done);
  const audit = createMemoryAuditLog();
  const changes: string[] = [];
  const reflector = new Reflector({
    requests: server,
    resource: RESOURCE,
    audit,
    backoff: { initialMs: 1, maxMs: 2 },
    onChange: (change) => {
      changes.push(`${change.type} ${change.key}`);
    },
  });
  await reflector.run(done.signal);
  return { server, audit, changes, reflector };
}

describe('Reflector', () => {
  it('lists every page at the first page resourceVersion, then watches from it', async () => {
    const { server, changes, reflector } = await runScript(
      [
        [
          { items: [object('a', '5')], resourceVersion: '10', continue: '1' },
          { items: [object('b', '7')], resourceVersion: '10' },
        ],
      ],
      [],
    );
    expect(changes).toEqual(['added team-a/a', 'added team-a/b']);
    expect(server.watchedFrom).toEqual(['10']);
    expect(reflector.counts.lists).toBe(1);
  });

  it('a bookmark advances the resourceVersion the next watch resumes from', async () => {
    const { server, changes } = await runScript(
      [[{ items: [], resourceVersion: '10' }]],
      [
        { events: [{ type: 'BOOKMARK', object: { metadata: { resourceVersion: '42' } } }] },
        { events: [{ type: 'ADDED', object: object('a', '43') }], end: answerError('watch', 503, 'busy') },
      ],
    );
    expect(server.watchedFrom).toEqual(['10', '42', '43']);
    expect(changes).toEqual(['added team-a/a']);
    expect(server.listed).toHaveLength(1);
  });

  it('410 as a watch ERROR event and 410 as an HTTP answer both relist once and emit the differences', async () => {
    const gone = { code: 410, reason: 'Expired', message: 'too old resource version: 10 (50)' };
    for (const expiry of [
      { events: [{ type: 'ERROR', object: gone }] } satisfies Connection,
      { events: [], end: answerError('watch', 410, gone.message) } satisfies Connection,
    ]) {
      const { server, changes, audit } = await runScript(
        [
          [{ items: [object('a', '5'), object('b', '6')], resourceVersion: '10' }],
          [{ items: [object('a', '55'), object('c', '56')], resourceVersion: '60' }],
        ],
        [expiry],
      );
      expect(changes).toEqual([
        'added team-a/a',
        'added team-a/b',
        'modified team-a/a',
        'added team-a/c',
        'deleted team-a/b',
      ]);
      expect(server.watchedFrom).toEqual(['10', '60']);
      expect(audit.eventsNamed('crd.watch.resync')).toMatchObject([{ resourceVersion: '10' }]);
      expect(audit.eventsNamed('crd.watch.failed')).toEqual([]);
    }
  });

  it('a failed watch backs off and resumes from the same resourceVersion; the audit names the code, not the object', async () => {
    const { server, audit } = await runScript(
      [[{ items: [object('a', '5')], resourceVersion: '10' }]],
      [
        { events: [], end: new CrdError('KR_CRD_UNREACHABLE', 'cut', { where: 'watch' }) },
        { events: [], end: answerError('watch', 403, 'forbidden') },
      ],
    );
    expect(server.watchedFrom).toEqual(['10', '10', '10']);
    expect(audit.eventsNamed('crd.watch.failed')).toMatchObject([
      { errorCode: 'KR_CRD_UNREACHABLE', attempt: 1 },
      { errorCode: 'KR_CRD_FORBIDDEN', attempt: 2 },
    ]);
    expect(audit.lines.join('\n')).not.toContain('"metadata"');
  });

  it('a handler that throws is audited and the watch goes on', async () => {
    const done = new AbortController();
    const server = new ScriptedServer(
      [[{ items: [], resourceVersion: '1' }]],
      [
        {
          events: [
            { type: 'ADDED', object: object('a', '2') },
            { type: 'ADDED', object: object('b', '3') },
          ],
        },
      ],
      done,
    );
    const audit = createMemoryAuditLog();
    const seen: string[] = [];
    const reflector = new Reflector({
      requests: server,
      resource: RESOURCE,
      audit,
      onChange: (change) => {
        seen.push(change.key);
        if (change.key === 'team-a/a') throw new Error('handler bug');
      },
    });
    await reflector.run(done.signal);
    expect(seen).toEqual(['team-a/a', 'team-a/b']);
    expect(audit.eventsNamed('crd.watch.failed')).toMatchObject([{ what: 'handler', object: 'team-a/a' }]);
    expect(reflector.get('team-a/a')).toBeDefined();
  });
});
