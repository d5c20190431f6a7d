// The fault bench of one matrix file: the emulator (real loopback HTTP, fault injection, a gate
// that can hold a delayed call), a loopback alert webhook, a temp dir for fallbacks and escrow,
// an age identity the escrow is sealed to, and one secret store (file, OpenBao or moto). Each
// case gets a fresh API key, seeded into its destination with the key's live secret, so a case's
// roll count and copies are its own.
import { execFile } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { generateIdentity, identityToRecipient } from 'age-encryption';
import type { AlertSinkConfig } from '../../src/alerts/config.ts';
import { Secret } from '../../src/audit/secret.ts';
import { createBackend } from '../../src/backends/registry.ts';
import type { Backend, StoreTarget } from '../../src/backends/types.ts';
import { startEmulator, type RunningEmulator } from '../../src/emulator/server.ts';
import type { KeyPolicy, Policy } from '../../src/policy/schema.ts';
import { startReceiver, type Receiver } from '../support/alert-receiver.ts';
import { JSON_SHAPE, keyPolicy } from '../rotation/harness.ts';
import { createTempDir } from '../support/temp-dir.ts';
import type { SafetyNet } from './cases.ts';
import type { KeyCopies } from './record.ts';
import { startStore, type StoreKind, type StoreOptions, type StoreSide } from './stores.ts';

const execFileAsync = promisify(execFile);
const REPO = resolve(import.meta.dirname, '../..');

export const ORG = 'org_demo_acme';
export const OWNER_TOKEN = 'demo-owner-token';
/** keyroll's API timeout in the matrix: an answer held past it is a timeout. */
export const API_TIMEOUT_MS = 1_000;

export interface CaseKey {
  keyId: string;
  organizationId: string;
  target: StoreTarget;
}

/** Holds emulator `delay` faults until released, so a signal can land while a call is in flight. */
export interface Gate {
  /** Resolves when a delayed call is waiting. */
  reached(): Promise<void>;
  open(): void;
}

export interface FaultBench {
  kind: StoreKind;
  store: StoreSide;
  emulator: RunningEmulator;
  receiver: Receiver;
  gate: Gate;
  dir: string;
  escrowDir: string;
  fallback: Backend;
  ageRecipient: string;
  newKey(label: string): Promise<CaseKey>;
  keyPolicy(key: CaseKey, safetyNet: SafetyNet): KeyPolicy;
  policy(keys: readonly CaseKey[], options: { safetyNet: SafetyNet; sinkUrl: string }): Policy;
  /** Every copy of the key's secret: destination, fallback, escrow (opened with the age CLI). */
  copiesOf(key: CaseKey): Promise<KeyCopies>;
  /** Text keyroll left beside the secrets (bookkeeping, escrow files as bytes), for the leak scan. */
  leftovers(key: CaseKey): Promise<string[]>;
  close(): Promise<void>;
}

function createGate(): Gate & { sleep: (ms: number) => Promise<void> } {
  let waiting: (() => void) | undefined;
  let arrivals: (() => void)[] = [];
  let arrived = false;
  return {
    sleep: () =>
      new Promise<void>((resolveSleep) => {
        waiting = resolveSleep;
        arrived = true;
        for (const wake of arrivals) wake();
        arrivals = [];
      }),
    reached: () => (arrived ? Promise.resolve() : new Promise<void>((r) => arrivals.push(r))),
    open: () => {
      arrived = false;
      waiting?.();
      waiting = undefined;
    },
  };
}

async function findAge(): Promise<string> {
  const { stdout } = await execFileAsync('sh', [join(REPO, 'scripts/test-tools.sh')], { timeout: 300_000 });
  const age = /^age=(.+)$/m.exec(stdout)?.[1];
  if (age === undefined) throw new Error('scripts/test-tools.sh found no age CLI');
  return age;
}

/** undefined when the store's server is unavailable outside CI (the file then skips its tests). */
export async function startFaultBench(
  kind: StoreKind,
  options: StoreOptions = {},
): Promise<FaultBench | undefined> {
  const temp = await createTempDir(`keyroll-faults-${kind}-`);
  const dir = temp.path;
  const store = await startStore(kind, dir, options);
  if (!store) {
    await temp.remove();
    return undefined;
  }
  const gate = createGate();
  const emulator = await startEmulator({ port: 0, rollRateLimitPerMinute: 60_000, sleep: gate.sleep });
  const receiver = await startReceiver();
  const escrowDir = join(dir, 'escrow');
  const fallbackDir = join(dir, 'fallback');
  const fallback = await createBackend('fallback', { kind: 'file', directory: fallbackDir });
  const identity = await generateIdentity();
  const ageRecipient = await identityToRecipient(identity);
  const identityFile = join(dir, 'operator.agekey');
  await writeFile(identityFile, `${identity}\n`, { mode: 0o600 });
  const age = await findAge();

  const keyPolicyFor = (key: CaseKey, safetyNet: SafetyNet): KeyPolicy =>
    keyPolicy(key.keyId, key.organizationId, {
      destinations: [{ backend: 'primary', target: key.target }],
      fallbacks:
        safetyNet === 'fallback'
          ? [{ backend: 'fallback', target: { path: `${key.keyId}.json`, shape: JSON_SHAPE } }]
          : [],
    });

  const escrowCopies = async (key: CaseKey): Promise<string[]> => {
    const names = await readdir(escrowDir).catch(() => [] as string[]);
    const found: string[] = [];
    for (const name of names.filter((n) => n.endsWith('.age') && n.includes(key.keyId))) {
      const { stdout } = await execFileAsync(age, ['-d', '-i', identityFile, join(escrowDir, name)]);
      const content = JSON.parse(stdout) as { keyId?: string; apiKey?: string };
      if (content.keyId === key.keyId && typeof content.apiKey === 'string') found.push(content.apiKey);
    }
    return found;
  };

  return {
    kind,
    store,
    emulator,
    receiver,
    gate,
    dir,
    escrowDir,
    fallback,
    ageRecipient,
    newKey: async (label) => {
      const { id, secret } = emulator.state.addApiKey({ name: label.slice(0, 100), organizationId: ORG });
      const target: StoreTarget = { path: store.targetPath(id), shape: JSON_SHAPE };
      // The key's working secret is where consumers read it, as after an earlier rotation.
      await store.direct.writeSecret(target, {
        secret: new Secret(secret),
        keyId: id,
        organizationId: ORG,
        rotationId: `seed-${id}`,
        rotatedAt: new Date().toISOString(),
      });
      return { keyId: id, organizationId: ORG, target };
    },
    keyPolicy: keyPolicyFor,
    policy: (keys, { safetyNet, sinkUrl }) => {
      const sinks: Record<string, AlertSinkConfig> = {
        hook: { kind: 'webhook', url: sinkUrl, headers: {}, timeoutMs: 2_000, deadlineMs: 10_000 },
      };
      return {
        file: `faults-${kind}.yaml`,
        api: {
          baseUrl: emulator.url,
          credential: { type: 'bearer', token: 'env:KEYROLL_FAULTS_UNUSED' },
          methods: { roll: 'POST', listProjects: 'GET', updateProject: 'PATCH', updateConsent: 'PATCH' },
          timeouts: { headersMs: API_TIMEOUT_MS, bodyMs: API_TIMEOUT_MS },
          rateLimitPerMinute: 60_000,
        },
        backends: { primary: store.config, fallback: { kind: 'file', directory: fallbackDir } },
        alerts: { sinks },
        ...(safetyNet === 'escrow' ? { escrow: { directory: escrowDir, recipients: [ageRecipient] } } : {}),
        keys: keys.map((key) => keyPolicyFor(key, safetyNet)),
      };
    },
    copiesOf: async (key) => {
      const destination = await store.direct.readSecret(key.target);
      const fallbackCopy = await fallback.readSecret({ path: `${key.keyId}.json`, shape: JSON_SHAPE });
      return {
        keyId: key.keyId,
        secrets: [destination?.secret.reveal(), fallbackCopy?.secret.reveal(), ...(await escrowCopies(key))],
      };
    },
    leftovers: async (key) => {
      const names = await readdir(escrowDir).catch(() => [] as string[]);
      const sealed = await Promise.all(
        names.filter((n) => n.includes(key.keyId)).map((n) => readFile(join(escrowDir, n), 'latin1')),
      );
      return [await store.bookkeeping(key.target), ...sealed];
    },
    close: async () => {
      gate.open();
      await emulator.close();
      await receiver.close();
      await fallback.close();
      await store.close();
      await temp.remove();
    },
  };
}
