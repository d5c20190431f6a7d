// What one claim in a replay record costs at capacity (issue 18, finding 1): time per claim and
// bytes written per claim, with the record full (10,000 live entries) and in a steady state where
// each claim's arrival expires one old entry, so the average includes the compactions. Claims run
// one after another (each waits for its fsync), then 16 at a time (they share fsyncs). Figures
// only, in a temporary directory on the machine's disk; bytes are what this process handed to
// write(2) (`wchar` of /proc/self/io, Linux), so they include compaction.
//
//   node bench/run.ts replay-record     (or: node bench/replay-record.ts --quick)
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_REPLAY_CAPACITY, FileReplayRecord } from '../src/inbound/replay-record.ts';
import type { BenchResult } from './lib/figures.ts';
import { round } from './lib/stats.ts';

const FILE = 'replay-bench.jsonl';
const START = 1_900_000_000;

/** Bytes this process passed to write(2) so far; NaN where /proc/self/io does not exist. */
function bytesWritten(): number {
  try {
    return Number(/wchar: (\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))?.[1] ?? Number.NaN);
  } catch {
    return Number.NaN;
  }
}

/** A GitHub delivery's id in the record: 64 hex digits (the SHA-256 of the body). */
const digestId = (n: number): string => n.toString(16).padStart(64, '0');

interface Measured {
  claims: number;
  msPerClaim: number;
  bytesPerClaim: number;
}

/**
 * A record at capacity whose entry i expires at START + i; claim j comes at START + j and lives
 * for `capacity` seconds, so each claim replaces exactly one expired entry.
 */
async function measureAtCapacity(claims: number, inFlight: number): Promise<Measured> {
  const dir = await mkdtemp(join(tmpdir(), 'keyroll-bench-replay-'));
  try {
    const capacity = DEFAULT_REPLAY_CAPACITY;
    const lines = [JSON.stringify({ version: 2, notBefore: START })];
    for (let i = 0; i < capacity; i++) lines.push(JSON.stringify([digestId(i), START + i]));
    await writeFile(join(dir, FILE), `${lines.join('\n')}\n`);
    const record = await FileReplayRecord.open(dir, FILE, START, capacity);
    let next = 0;
    const claimOne = async (): Promise<void> => {
      while (next < claims) {
        const n = next++;
        const claim = await record.claim(digestId(capacity + n), START + capacity + n, START + n + 1);
        if (claim !== 'claimed')
          throw new Error(`claim ${String(n)} was ${claim}, not claimed (size ${String(record.size)})`);
      }
    };
    const bytesBefore = bytesWritten();
    const began = performance.now();
    await Promise.all(Array.from({ length: inFlight }, claimOne));
    const ms = performance.now() - began;
    return {
      claims,
      msPerClaim: round(ms / claims, 3),
      bytesPerClaim: round((bytesWritten() - bytesBefore) / claims, 1),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export async function runReplayRecordBench(options: { quick: boolean }): Promise<BenchResult> {
  // 12,000 claims include one compaction of the full record (every ~11,000 claims at capacity).
  const sequential = await measureAtCapacity(options.quick ? 2_000 : 12_000, 1);
  const concurrent = await measureAtCapacity(options.quick ? 2_000 : 12_000, 16);
  return {
    figures: [
      { name: 'replayClaimMsAtCapacity', value: sequential.msPerClaim, unit: 'ms' },
      { name: 'replayClaimBytesAtCapacity', value: sequential.bytesPerClaim, unit: 'B' },
      { name: 'replayClaimMsAtCapacity16', value: concurrent.msPerClaim, unit: 'ms' },
    ],
    details: { capacity: DEFAULT_REPLAY_CAPACITY, sequential, concurrent },
    notes: [
      `replay record: a claim at capacity (${String(DEFAULT_REPLAY_CAPACITY)} live entries, 64-hex ids), one at a time and 16 at once (shared fsyncs); bytes include compaction; printed, not goals`,
    ],
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(
    JSON.stringify(await runReplayRecordBench({ quick: process.argv.includes('--quick') }), null, 2),
  );
}
