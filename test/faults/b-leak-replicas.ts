// The world the replica fault cases of issue 30 share when a GitHub leak is what the replicas
// meet (dead-holder.test.ts, replica-accept-kill.test.ts): a fault world with one key, rotated a
// minute ago (not due, so no sweep touches it on its own), the fake GitHub, and the policy's
// GitHub intake, whose reconcile runs when a replica becomes leader, then hourly. The replicas
// themselves come from b-replicas.ts; this file owns their clean-up and the four questions over
// their audit trails.
import { findSecrets } from '../support/secret-scan.ts';
import { startFakeGithub, type FakeGithub } from '../support/fake-github.ts';
import { OWNER_TOKEN, type ChildResult, type RunningChild } from './b-child.ts';
import { faultPolicyYaml, openWorld, type FaultKey, type FaultWorld, type PolicyOptions } from './b-world.ts';
import { checkNoDoubleRoll, checkNotLost, reportedRolls } from './record.ts';

export interface LeakWorld {
  world: FaultWorld;
  github: FakeGithub;
  /** The value consumers hold now: the one that leaks. */
  leaked: string;
  /** The env a replica needs for the intake: the webhook secret and the fake GitHub's token. */
  intakeEnv: Record<string, string>;
  /** Adds a replica to those `close` kills. */
  track(child: RunningChild): RunningChild;
  /** Kills every tracked replica (resumed first: a SIGSTOPped one would not die), then closes the world. */
  close(): Promise<void>;
}

export interface LeakWorldOptions {
  key: FaultKey;
  /** The secret the intake checks deliveries' signatures with (env KR_GITHUB_WEBHOOK_SECRET). */
  webhookSecret: string;
  policy?: Pick<PolicyOptions, 'lockTtl' | 'clockSkew'>;
}

export async function openLeakWorld(options: LeakWorldOptions): Promise<LeakWorld> {
  const world = await openWorld();
  const github = await startFakeGithub();
  const children: RunningChild[] = [];
  const close = async (): Promise<void> => {
    for (const child of children) {
      child.process.kill('SIGCONT');
      child.process.kill('SIGKILL');
    }
    await Promise.all(children.map((child) => child.result));
    await github.close();
    await world.close();
  };
  try {
    const { key } = options;
    const policy = faultPolicyYaml({
      baseUrl: world.emulator.url,
      alertUrl: `${world.receiver.url}/alerts`,
      keys: [key],
      ...options.policy,
    });
    await world.writeFile(
      'policy.yaml',
      `${policy}intake:
  github:
    webhookSecret: env:KR_GITHUB_WEBHOOK_SECRET
    apiUrl: ${github.url}
    token: env:KR_GITHUB_TOKEN
    organizations: [octo-org]
    secretTypes: [keyroll_api_key]
    reconcileInterval: 1h
`,
    );
    await world.seedRotated(key, new Date(Date.now() - 60_000));
    const leaked = await world.storedSecret(key);
    if (leaked === undefined) throw new Error('seeded');
    const track = (child: RunningChild): RunningChild => {
      children.push(child);
      return child;
    };
    const intakeEnv = { KR_GITHUB_WEBHOOK_SECRET: options.webhookSecret, KR_GITHUB_TOKEN: github.token };
    return { world, github, leaked, intakeEnv, track, close };
  } catch (error) {
    await close();
    throw error;
  }
}

export interface LeakVerdict {
  lost: ReturnType<typeof checkNotLost>;
  leaks: ReturnType<typeof findSecrets>;
  rolls: ReturnType<typeof checkNoDoubleRoll>;
}

/** The four questions over the replicas' audit trails (`runs`) for `key`. */
export async function judgeLeakRuns(
  leak: LeakWorld,
  key: FaultKey,
  runs: readonly ChildResult[],
): Promise<LeakVerdict> {
  const { world, github } = leak;
  const events = runs.flatMap((run) => run.events);
  return {
    lost: checkNotLost([{ keyId: key.id, secrets: [await world.storedSecret(key)] }], (keyId, secret) =>
      world.emulator.state.isLiveSecret(keyId, secret),
    ),
    leaks: findSecrets(
      [...world.haystacks(), ...github.requests.map((request) => request.body)],
      [...world.emulator.state.mintedSecrets(), OWNER_TOKEN, github.token],
    ),
    rolls: checkNoDoubleRoll([
      {
        keyId: key.id,
        emulatorRolls: world.emulator.state.rollCount(key.id),
        reportedRolls: reportedRolls(events, key.id),
      },
    ]),
  };
}
