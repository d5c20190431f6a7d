// One replay record per signed source, each its own file and its own capacity: a flood of leak
// intake deliveries can fill the intake's record at worst, never the trigger's, so nothing a
// scanner (or whoever replays a scanner's delivery) sends can make POST /v1/rotations refuse an
// emergency rotation.
import { DEFAULT_REPLAY_CAPACITY, ReplayRecord } from './replay-record.ts';

export type ReplaySource = 'trigger' | 'github' | 'gitguardian';

export const REPLAY_RECORD_FILES: Record<ReplaySource, string> = {
  trigger: 'replay-trigger.jsonl',
  github: 'replay-github.jsonl',
  gitguardian: 'replay-gitguardian.jsonl',
};

export class ReplayRecords {
  readonly dir: string;
  readonly #nowSeconds: () => number;
  readonly #capacity: number;
  readonly #opening = new Map<ReplaySource, Promise<ReplayRecord>>();
  readonly #open = new Map<ReplaySource, ReplayRecord>();

  constructor(dir: string, nowSeconds: () => number, capacity = DEFAULT_REPLAY_CAPACITY) {
    this.dir = dir;
    this.#nowSeconds = nowSeconds;
    this.#capacity = capacity;
  }

  /** Opens the source's record once (later calls get the same one); throws ReplayRecordError when it cannot be read back and written. */
  open(source: ReplaySource): Promise<ReplayRecord> {
    let opening = this.#opening.get(source);
    if (opening === undefined) {
      opening = ReplayRecord.open(this.dir, REPLAY_RECORD_FILES[source], this.#nowSeconds(), this.#capacity).then((record) => {
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
}
