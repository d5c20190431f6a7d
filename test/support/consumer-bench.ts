// Rotations with their consumers' refresh, in process, as `keyroll run` and `rotate` do them
// (src/cli/execute-run.ts): the emulator and file backends of the rotation bench, the test
// Kubernetes API server acting as keyroll's service account, and one refresher per "process".
// useConsumerBench() is the set-up of the consumer tests: a bench and stand-in controllers per
// test, both stopped after it.
import type { AuditRecord } from '../../src/audit/logger.ts';
import { createRefresher } from '../../src/consumers/create.ts';
import { keyRecordsOf } from '../../src/consumers/key-records.ts';
import type { KeyRecords } from '../../src/consumers/pick-up.ts';
import type { KubeClient } from '../../src/consumers/kubernetes/client.ts';
import type { ConsumerRefresher } from '../../src/consumers/refresher.ts';
import type { DeliveryReport } from '../../src/consumers/types.ts';
import type { ConsumerRef, ConsumerSettings } from '../../src/policy/consumers.ts';
import type { KeyPolicy, Policy } from '../../src/policy/schema.ts';
import type { RuntimeOptions } from '../../src/rotation/runtime.ts';
import { runRotations, type RunSummary } from '../../src/rotation/run.ts';
import type { RunTrigger } from '../../src/rotation/types.ts';
import { afterEach } from 'vitest';
import { keyPolicy, startBench, type Bench } from '../rotation/harness.ts';
import { StandInControllers } from './consumer-cluster.ts';

export const LEAK: RunTrigger = { reason: 'leak', force: true, actor: 'test' };
export const SCHEDULED: RunTrigger = { reason: 'scheduled', force: false };

export const FAST_SETTINGS: ConsumerSettings = {
  kubernetes: {},
  syncTimeoutMs: 10_000,
  rolloutTimeoutMs: 10_000,
  reloaderTimeoutMs: 10_000,
  maxConcurrentRestarts: 2,
};

export interface ConsumerBench {
  bench: Bench;
  /** A refresher as one process has it (its own restart queue). */
  refresher(settings?: Partial<ConsumerSettings>, client?: KubeClient): ConsumerRefresher;
  /** One run over `keyIds` with its delivery finished, as execute-run does it. */
  run(
    keyIds: readonly string[],
    trigger: RunTrigger,
    refresher?: ConsumerRefresher,
  ): Promise<{ summary: RunSummary; report: DeliveryReport | undefined }>;
  /** The keys' records in the bench's backends, as a run's pick-up of owed restarts reads them. */
  records: KeyRecords;
  events(name: string): AuditRecord[];
  close(): Promise<void>;
}

/**
 * Keys of the emulator's demo organization, each listing `consumers(keyId)`; extra emulator keys
 * made as needed. `options` adds backends to the policy (an OpenBao the real external-secrets
 * reads) and settings to the runtime (the environment their tokens come from).
 */
export async function consumerBench(
  client: KubeClient,
  keys: { id: string; consumers: ConsumerRef[]; overrides?: Partial<KeyPolicy> }[],
  options: { policy?: Partial<Policy>; runtime?: Partial<RuntimeOptions> } = {},
): Promise<ConsumerBench> {
  const bench = await startBench({
    keys: () => {
      return keys.map(({ id, consumers, overrides }) =>
        keyPolicy(id, 'org_demo_acme', { consumers, ...overrides }),
      );
    },
    ...(options.policy ? { policy: options.policy } : {}),
  });
  for (const { id, overrides } of keys) {
    for (const apiKey of overrides?.slots ?? [id]) {
      try {
        bench.emulator.state.apiKey(apiKey);
      } catch {
        bench.emulator.state.addApiKey({ id: apiKey, name: apiKey, organizationId: 'org_demo_acme' });
      }
    }
  }
  const runtime = await bench.runtime(options.runtime);
  const make = (settings: Partial<ConsumerSettings> = {}, kube: KubeClient = client): ConsumerRefresher =>
    createRefresher(
      { consumers: { ...FAST_SETTINGS, ...settings } },
      { alerter: bench.alerter, notifier: runtime.notifier, kubeClient: () => kube },
    );
  const shared = make();
  return {
    bench,
    refresher: make,
    async run(keyIds, trigger, refresher = shared) {
      const inScope = bench.policy.keys.filter((key) => keyIds.includes(key.id));
      const delivery = refresher.begin(bench.audit, bench.policy.keys);
      const summary = await runRotations(runtime, {
        keys: inScope,
        trigger,
        concurrency: 4,
        onKeyDone: (outcome) => {
          const key = inScope.find((candidate) => candidate.id === outcome.keyId);
          if (key) delivery.stored(key, outcome);
        },
      });
      return { summary, report: await delivery.finish() };
    },
    records: keyRecordsOf(runtime, () => new Date()),
    events: (name) => bench.events().filter((event) => event.event === name),
    async close() {
      await runtime.close();
      await bench.close();
    },
  };
}

export interface ConsumerBenchFixture {
  /** Starts this test's bench (consumerBench's arguments); closed after the test. */
  start(...args: Parameters<typeof consumerBench>): Promise<ConsumerBench>;
  /** Starts this test's stand-in controllers (StandInControllers' arguments); stopped after the test, before the bench closes. */
  standIns(...args: ConstructorParameters<typeof StandInControllers>): StandInControllers;
  /** The bench `start` gave this test. */
  readonly bench: ConsumerBench;
  /** The stand-ins `standIns` gave this test. */
  readonly controllers: StandInControllers;
}

/**
 * Call inside the describe block (or at the top of a file): registers an afterEach that stops the
 * stand-in controllers and closes the bench the test started, so no test leaves a watch or a
 * server running into the next.
 */
export function useConsumerBench(): ConsumerBenchFixture {
  let bench: ConsumerBench | undefined;
  let controllers: StandInControllers | undefined;
  afterEach(async () => {
    await controllers?.stop();
    await bench?.close();
    controllers = undefined;
    bench = undefined;
  });
  return {
    async start(...args) {
      bench = await consumerBench(...args);
      return bench;
    },
    standIns(...args) {
      controllers = new StandInControllers(...args);
      return controllers;
    },
    get bench() {
      if (bench === undefined) throw new Error('useConsumerBench: this test started no bench');
      return bench;
    },
    get controllers() {
      if (controllers === undefined) throw new Error('useConsumerBench: this test started no stand-ins');
      return controllers;
    },
  };
}
