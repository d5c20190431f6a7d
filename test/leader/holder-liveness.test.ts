// The proof that a key lock's holder is dead (src/leader/holder-liveness.ts), on pod objects as the
// API server returns them: dead only when the pod is gone or replaced, or its keyroll container
// was replaced since the holder started; anything else (alive, an API error, a 404 that is not the
// API server's) proves nothing, so the lock waits for its TTL.
import { ApiException, KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  HolderLiveness,
  isPodNotFound,
  judgeHolder,
  kubePodReader,
  type ContainerStatusView,
  type PodView,
} from '../../src/leader/holder-liveness.ts';
import { lockOwnerOf, parsePodLockOwner } from '../../src/rotation/lock-owner.ts';

const UID = '0b1c5f3e-7a43-4c1e-9b7d-2f6c1e0a9d11';
const STARTED = Date.parse('2026-11-29T10:06:50.000Z');
const OWNER = lockOwnerOf({ POD_NAMESPACE: 'keyroll', POD_NAME: 'keyroll-a', POD_UID: UID }, STARTED);
const HOLDER = parsePodLockOwner(OWNER)!;
const SKEW = 5_000;
const at = (offsetMs: number): Date => new Date(STARTED + offsetMs);

function pod(keyroll: Omit<ContainerStatusView, 'name'> | undefined, uid = UID): PodView {
  const sidecar: ContainerStatusView = { name: 'proxy', state: { running: { startedAt: at(60_000) } } };
  return {
    metadata: { uid },
    status: {
      containerStatuses: keyroll === undefined ? [sidecar] : [sidecar, { name: 'keyroll', ...keyroll }],
    },
  };
}

describe('judging a lock holder from its pod', () => {
  it('dead: the pod is gone (404)', () => {
    expect(judgeHolder(HOLDER, undefined, SKEW)).toEqual({ kind: 'pod-gone', pod: 'keyroll/keyroll-a' });
  });

  it('dead: the name belongs to another pod now (another UID)', () => {
    expect(judgeHolder(HOLDER, pod({ state: { running: { startedAt: at(-1_000) } } }, 'f00d'), SKEW)).toEqual(
      {
        kind: 'pod-replaced',
        pod: 'keyroll/keyroll-a',
        uid: 'f00d',
      },
    );
  });

  it('dead: the keyroll container runs again, started after the holder plus the skew', () => {
    expect(judgeHolder(HOLDER, pod({ state: { running: { startedAt: at(SKEW + 1) } } }), SKEW)).toEqual({
      kind: 'container-restarted',
      pod: 'keyroll/keyroll-a',
      container: 'keyroll',
      startedAt: at(SKEW + 1).toISOString(),
    });
  });

  it('dead: the container waits to restart, its last termination after the holder started', () => {
    const waiting = pod({
      state: { waiting: { reason: 'CrashLoopBackOff' } },
      lastState: { terminated: { finishedAt: at(SKEW + 30_000) } },
    });
    expect(judgeHolder(HOLDER, waiting, SKEW)).toMatchObject({
      kind: 'container-stopped',
      container: 'keyroll',
    });
  });

  it('dead: the container terminated after the holder started', () => {
    const terminated = pod({ state: { terminated: { finishedAt: at(SKEW + 10) } } });
    expect(judgeHolder(HOLDER, terminated, SKEW)).toEqual({
      kind: 'container-stopped',
      pod: 'keyroll/keyroll-a',
      container: 'keyroll',
      finishedAt: at(SKEW + 10).toISOString(),
    });
  });

  it('not proven: the container runs since before the holder started (the holder alive, or only paused)', () => {
    expect(judgeHolder(HOLDER, pod({ state: { running: { startedAt: at(-800) } } }), SKEW)).toBeUndefined();
  });

  it('not proven: a restart within the clock skew of the holder start (the two clocks may disagree)', () => {
    expect(judgeHolder(HOLDER, pod({ state: { running: { startedAt: at(SKEW) } } }), SKEW)).toBeUndefined();
    expect(
      judgeHolder(HOLDER, pod({ state: { terminated: { finishedAt: at(SKEW) } } }), SKEW),
    ).toBeUndefined();
  });

  it('not proven: waiting with no termination since the holder started (e.g. the one before it)', () => {
    expect(
      judgeHolder(
        HOLDER,
        pod({ state: { waiting: {} }, lastState: { terminated: { finishedAt: at(-60_000) } } }),
        SKEW,
      ),
    ).toBeUndefined();
    expect(judgeHolder(HOLDER, pod({ state: { waiting: {} } }), SKEW)).toBeUndefined();
  });

  it('not proven: no status of the keyroll container, no state, no UID, or an unreadable time', () => {
    expect(judgeHolder(HOLDER, pod(undefined), SKEW)).toBeUndefined();
    expect(judgeHolder(HOLDER, pod({}), SKEW)).toBeUndefined();
    expect(judgeHolder(HOLDER, { status: pod({ state: { terminated: {} } }).status }, SKEW)).toBeUndefined();
    expect(judgeHolder(HOLDER, pod({ state: { running: {} } }), SKEW)).toBeUndefined();
    expect(
      judgeHolder(HOLDER, pod({ state: { running: { startedAt: new Date(Number.NaN) } } }), SKEW),
    ).toBeUndefined();
  });

  it("judges only the keyroll container: a sidecar's restart proves nothing", () => {
    const sidecarRestarted: PodView = {
      metadata: { uid: UID },
      status: {
        containerStatuses: [
          { name: 'proxy', state: { running: { startedAt: at(600_000) } } },
          { name: 'keyroll', state: { running: { startedAt: at(-1_000) } } },
        ],
      },
    };
    expect(judgeHolder(HOLDER, sidecarRestarted, SKEW)).toBeUndefined();
  });
});

describe('proving a holder dead', () => {
  it('reads the pod the owner names and answers its proof; a death is remembered', async () => {
    const reads: string[] = [];
    const liveness = new HolderLiveness({
      readPod: (namespace, name) => {
        reads.push(`${namespace}/${name}`);
        return Promise.resolve(undefined);
      },
    });
    expect(await liveness.proveDead(OWNER, SKEW)).toEqual({ kind: 'pod-gone', pod: 'keyroll/keyroll-a' });
    expect(await liveness.proveDead(OWNER, SKEW)).toEqual({ kind: 'pod-gone', pod: 'keyroll/keyroll-a' });
    expect(reads).toEqual(['keyroll/keyroll-a']);
  });

  it('proves nothing for an old-form owner (no read), an API error or no answer', async () => {
    const reads: string[] = [];
    const failing = new HolderLiveness({
      readPod: (_namespace, name) => {
        reads.push(name);
        return Promise.reject(new ApiException(403, 'Forbidden', {}, {}));
      },
    });
    expect(await failing.proveDead('keyroll-a/1/abcd1234', SKEW)).toBeUndefined();
    expect(reads).toEqual([]);
    expect(await failing.proveDead(OWNER, SKEW)).toBeUndefined();
    expect(reads).toEqual(['keyroll-a']);
    const silent = new HolderLiveness({
      timeoutMs: 20,
      readPod: (_namespace, _name, signal) =>
        new Promise((_resolve, reject) => {
          signal.addEventListener('abort', () => {
            reject(signal.reason as Error);
          });
        }),
    });
    expect(await silent.proveDead(OWNER, SKEW)).toBeUndefined();
  });

  it("a restart proven with one key's clock skew is not remembered for a key that allows more", async () => {
    // The keyroll container started again 10 s after the holder: dead for a 5 s skew, not for 60 s.
    const liveness = new HolderLiveness({
      readPod: () => Promise.resolve(pod({ state: { running: { startedAt: at(10_000) } } })),
    });
    expect(await liveness.proveDead(OWNER, 5_000)).toMatchObject({ kind: 'container-restarted' });
    expect(await liveness.proveDead(OWNER, 60_000)).toBeUndefined();
  });

  it('does not remember a holder it could not prove dead: it asks again next time', async () => {
    let alive = true;
    const liveness = new HolderLiveness({
      readPod: () =>
        Promise.resolve(alive ? pod({ state: { running: { startedAt: at(-1_000) } } }) : undefined),
    });
    expect(await liveness.proveDead(OWNER, SKEW)).toBeUndefined();
    alive = false;
    expect(await liveness.proveDead(OWNER, SKEW)).toMatchObject({ kind: 'pod-gone' });
  });
});

describe("a 404 proves a pod gone only when it is the API server's NotFound for that pod", () => {
  const notFound = {
    kind: 'Status',
    apiVersion: 'v1',
    status: 'Failure',
    message: 'pods "keyroll-a" not found',
    reason: 'NotFound',
    details: { name: 'keyroll-a', kind: 'pods' },
    code: 404,
  };

  it('accepts the Status, as an object or as text', () => {
    expect(isPodNotFound(notFound, 'keyroll-a')).toBe(true);
    expect(isPodNotFound(JSON.stringify(notFound), 'keyroll-a')).toBe(true);
  });

  it.each([
    ['another pod', { ...notFound, details: { name: 'keyroll-b', kind: 'pods' } }],
    ['another kind', { ...notFound, details: { name: 'keyroll-a', kind: 'namespaces' } }],
    ['no details', { ...notFound, details: undefined }],
    ['another reason', { ...notFound, reason: 'Forbidden' }],
    ['a proxy page', '<html>404 Not Found</html>'],
    ['nothing', undefined],
  ])('refuses %s', (_why, body) => {
    expect(isPodNotFound(body, 'keyroll-a')).toBe(false);
  });

  it('a reader on a server that answers 404 without the Status proves nothing', async () => {
    const { createServer } = await import('node:http');
    const server = createServer((_request, response) => {
      response.writeHead(404, { 'content-type': 'text/plain' });
      response.end('404 page not found');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const address = server.address();
      if (address === null || typeof address === 'string') throw new Error('no port');
      const config = new KubeConfig();
      config.loadFromOptions({
        clusters: [{ name: 'c', server: `http://127.0.0.1:${String(address.port)}`, skipTLSVerify: true }],
        users: [{ name: 'u', token: 'not-a-real-token' }],
        contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
        currentContext: 'x',
      });
      const liveness = new HolderLiveness({ readPod: kubePodReader(config) });
      expect(await liveness.proveDead(OWNER, SKEW)).toBeUndefined();
    } finally {
      server.close();
    }
  });
});
