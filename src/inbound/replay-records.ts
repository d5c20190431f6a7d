// One replay record per signed source, each its own file (or object) and its own capacity: a flood
// of leak intake deliveries can fill the intake's record at worst, never the trigger's, so nothing a
// scanner (or whoever replays a scanner's delivery) sends can make POST /v1/rotations refuse an
// emergency rotation.
//
// Where the records live is the daemon's --replay-store: files in the state directory for a single
// daemon (the default), or one ConfigMap per source that every replica claims in (the chart's
// choice with more than one replica; docs/daemon.md says why the Kubernetes API).
import type { KubeConfig } from '@kubernetes/client-node';
import { ConfigMapReplayObject } from './configmap-replay-object.ts';
import { KubeReplayRecord } from './kube-replay-record.ts';
import type { ReplayRecord } from './replay-claim.ts';
import { DEFAULT_REPLAY_CAPACITY, FileReplayRecord } from './replay-record.ts';

export type ReplaySource = 'trigger' | 'github' | 'gitguardian';

export const REPLAY_SOURCES: readonly ReplaySource[] = ['trigger', 'github', 'gitguardian'];

export const REPLAY_RECORD_FILES: Record<ReplaySource, string> = {
  trigger: 'replay-trigger.jsonl',
  github: 'replay-github.jsonl',
  gitguardian: 'replay-gitguardian.jsonl',
};

/** Where the records live: the state directory of one daemon, or ConfigMaps `<prefix>-<source>` shared by every replica. */
export type ReplayStore =
  | { kind: 'file'; dir: string }
  | { kind: 'kubernetes'; namespace: string; prefix: string; kubeConfig: KubeConfig };

/** The ConfigMap of `source` in a kubernetes store: `<prefix>-trigger`, `<prefix>-github`, `<prefix>-gitguardian`. */
export function replayConfigMapName(prefix: string, source: ReplaySource): string {
  return `${prefix}-${source}`;
}

type Opener<K extends ReplayStore['kind']> = (
  store: Extract<ReplayStore, { kind: K }>,
  source: ReplaySource,
  nowSeconds: number,
  capacity: number,
) => Promise<ReplayRecord>;

const OPENERS: { [K in ReplayStore['kind']]: Opener<K> } = {
  file: (store, source, nowSeconds, capacity) =>
    FileReplayRecord.open(store.dir, REPLAY_RECORD_FILES[source], nowSeconds, capacity),
  kubernetes: (store, source, nowSeconds, capacity) =>
    KubeReplayRecord.open(
      new ConfigMapReplayObject(store.kubeConfig, {
        namespace: store.namespace,
        name: replayConfigMapName(store.prefix, source),
      }),
      nowSeconds,
      capacity,
    ),
};

/** The store as the audit trail and messages name it: the directory, or `kubernetes:NAMESPACE/PREFIX`. */
export function describeReplayStore(store: ReplayStore): string {
  return store.kind === 'file' ? store.dir : `kubernetes:${store.namespace}/${store.prefix}`;
}

export class ReplayRecords {
  readonly store: ReplayStore;
  readonly #nowSeconds: () => number;
  readonly #capacity: number;
  readonly #opening = new Map<ReplaySource, Promise<ReplayRecord>>();
  readonly #open = new Map<ReplaySource, ReplayRecord>();

  constructor(store: ReplayStore, nowSeconds: () => number, capacity = DEFAULT_REPLAY_CAPACITY) {
    this.store = store;
    this.#nowSeconds = nowSeconds;
    this.#capacity = capacity;
  }

  /** The state directory of a file store; undefined for a shared one. */
  get dir(): string | undefined {
    return this.store.kind === 'file' ? this.store.dir : undefined;
  }

  /** Opens the source's record once (later calls get the same one); throws ReplayRecordError when it cannot be read back and written. */
  open(source: ReplaySource): Promise<ReplayRecord> {
    let opening = this.#opening.get(source);
    if (opening === undefined) {
      opening = this.#openRecord(source).then((record) => {
        this.#open.set(source, record);
        return record;
      });
      // A failed open may be retried (the next reload).
      opening.catch(() => this.#opening.delete(source));
      this.#opening.set(source, opening);
    }
    return opening;
  }

  /** The source's record once open; undefined before. */
  get(source: ReplaySource): ReplayRecord | undefined {
    return this.#open.get(source);
  }

  #openRecord(source: ReplaySource): Promise<ReplayRecord> {
    const nowSeconds = this.#nowSeconds();
    const { store } = this;
    return store.kind === 'file'
      ? OPENERS.file(store, source, nowSeconds, this.#capacity)
      : OPENERS.kubernetes(store, source, nowSeconds, this.#capacity);
  }
}
