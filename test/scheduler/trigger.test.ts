// POST /v1/rotations over real loopback HTTP: a correctly signed request is answered 202 with
// rotation ids that the rotations then carry in the audit trail, and the caller whose key signed
// as the actor; every refusal (signature, staleness, replay, also after a restart, body, actor,
// unknown keys, disabled endpoint) is answered with its status, audited within a budget, and
// rolls nothing.
import { request } from 'node:http';
import { beforeEach, describe, expect, it } from 'vitest';
import { Secret } from '../../src/audit/secret.ts';
import type { Daemon } from '../../src/daemon/daemon.ts';
import { MAX_TRIGGER_BODY_BYTES } from '../../src/scheduler/trigger.ts';
import { signTriggerRequest } from '../../src/scheduler/trigger-auth.ts';
import { join } from 'node:path';
import {
  keyYaml,
  postTrigger,
  signedHeaders,
  TRIGGER_KEYS,
  TRIGGER_SECRET,
  useDaemonBench,
} from '../support/daemon-bench.ts';

const BILLING = 'key_demo_billing';
const SEARCH = 'key_demo_search';
const bench = useDaemonBench();
let daemon: Daemon;

beforeEach(async () => {
  await bench.writePolicy(
    keyYaml(BILLING, 'schedule: "0 3 * * 1"') + keyYaml(SEARCH, 'schedule: "0 3 * * 1"'),
  );
  daemon = await bench.start({ triggerKeys: TRIGGER_KEYS });
  // The first sweep rotates both keys (never rotated by keyroll); the triggers come after it.
  await daemon.idle();
  bench.audit.clear();
});

const leakOf = (keys: string[], extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ keys, reason: 'leak', actor: 'alice', ticket: 'INC-7', ...extra });

describe('trigger: accepted', () => {
  it('answers 202 with a rotation id per key, and those rotations run and are audited with the actor', async () => {
    const before = bench.emulator.state.rollCount(BILLING);
    const answer = await postTrigger(daemon, { body: leakOf([BILLING]) });
    expect(answer.status).toBe(202);
    const rotations = answer.json.rotations as { keyId: string; rotationId: string }[];
    expect(rotations).toEqual([
      { keyId: BILLING, rotationId: expect.stringMatching(/^[0-9a-f-]{36}$/) as unknown },
    ]);
    expect(answer.json).toMatchObject({ reason: 'leak', force: true });
    await daemon.idle();

    expect(bench.emulator.state.rollCount(BILLING)).toBe(before + 1);
    expect(bench.emulator.state.isLiveSecret(BILLING, await bench.storedSecret(BILLING))).toBe(true);
    expect(bench.events('trigger.accepted')).toEqual([
      expect.objectContaining({
        actor: 'alice',
        reason: 'leak',
        ticket: 'INC-7',
        keys: [BILLING],
        remoteAddress: expect.stringContaining('127.0.0.1') as unknown,
      }),
    ]);
    const succeeded = bench.events('key.succeeded');
    expect(succeeded).toEqual([
      expect.objectContaining({
        keyId: BILLING,
        rotationId: rotations[0]?.rotationId,
        actor: 'alice',
        reason: 'leak',
        ticket: 'INC-7',
      }),
    ]);
  });

  it('a manual rotation respects the minimum interval (like keyroll rotate without --force)', async () => {
    const answer = await postTrigger(daemon, {
      caller: 'bob',
      body: JSON.stringify({ keys: [BILLING], reason: 'manual', actor: 'bob' }),
    });
    expect(answer.status).toBe(202);
    await daemon.idle();
    expect(bench.emulator.state.rollCount(BILLING)).toBe(1);
    expect(bench.events('key.skipped')).toEqual([
      expect.objectContaining({ keyId: BILLING, why: 'min-interval', actor: 'bob' }),
    ]);
  });

  it('selects every key of an organization', async () => {
    const answer = await postTrigger(daemon, {
      body: JSON.stringify({ org: 'org_demo_acme', reason: 'compromise' }),
    });
    expect(answer.status).toBe(202);
    expect((answer.json.rotations as { keyId: string }[]).map((r) => r.keyId)).toEqual([BILLING, SEARCH]);
    await daemon.idle();
    expect(bench.emulator.state.rollCount(BILLING)).toBe(2);
    expect(bench.emulator.state.rollCount(SEARCH)).toBe(2);
  });
});

describe('trigger: refused', () => {
  async function expectRefused(
    status: number,
    code: string,
    response: Promise<{ status: number; json: Record<string, unknown> }>,
  ): Promise<void> {
    const answer = await response;
    expect(answer.status).toBe(status);
    expect(answer.json).toMatchObject({ error: { code } });
    await daemon.idle();
    expect(bench.emulator.state.rollCount(BILLING)).toBe(1);
    expect(bench.events('trigger.rejected')).toEqual([
      expect.objectContaining({
        why: code,
        status,
        remoteAddress: expect.stringContaining('127.0.0.1') as unknown,
      }),
    ]);
    expect(bench.events('trigger.accepted')).toEqual([]);
  }

  it('401 for a signature made with another secret', async () => {
    await expectRefused(
      401,
      'bad-signature',
      postTrigger(daemon, { body: leakOf([BILLING]), secret: 'not-the-secret' }),
    );
  });

  it('401 for a body changed after signing', async () => {
    const timestamp = Math.floor(Date.now() / 1000);
    const nonce = 'nonce-of-the-changed-body-0001';
    const signature = signTriggerRequest(new Secret(TRIGGER_SECRET), timestamp, nonce, leakOf([SEARCH]));
    await expectRefused(
      401,
      'bad-signature',
      postTrigger(daemon, { body: leakOf([BILLING]), timestamp, nonce, signature }),
    );
  });

  it('401 for a caller the daemon has no key for', async () => {
    await expectRefused(
      401,
      'bad-signature',
      postTrigger(daemon, { body: leakOf([BILLING]), caller: 'mallory', secret: TRIGGER_SECRET }),
    );
  });

  it('401 for a timestamp more than five minutes old', async () => {
    await expectRefused(
      401,
      'stale-timestamp',
      postTrigger(daemon, { body: leakOf([BILLING]), timestamp: Math.floor(Date.now() / 1000) - 301 }),
    );
  });

  it('401 without the signature headers', async () => {
    const response = fetch(`${daemon.url}/v1/rotations`, { method: 'POST', body: leakOf([BILLING]) }).then(
      async (r) => ({ status: r.status, json: (await r.json()) as Record<string, unknown> }),
    );
    await expectRefused(401, 'missing-signature', response);
  });

  it('409 for the same signed request sent twice', async () => {
    const timestamp = Math.floor(Date.now() / 1000);
    const body = leakOf([BILLING]);
    const nonce = 'nonce-sent-twice-000000000001';
    expect((await postTrigger(daemon, { body, timestamp, nonce })).status).toBe(202);
    const replay = await postTrigger(daemon, { body, timestamp, nonce });
    expect(replay).toMatchObject({ status: 409, json: { error: { code: 'replay' } } });
    await daemon.idle();
    expect(bench.emulator.state.rollCount(BILLING)).toBe(2);
    expect(bench.events('trigger.accepted')).toHaveLength(1);
    expect(bench.events('trigger.rejected')).toEqual([
      expect.objectContaining({ why: 'replay', status: 409 }),
    ]);
  });

  it('400 for keys that are not in the policy, naming them', async () => {
    const answer = await postTrigger(daemon, { body: leakOf([BILLING, 'key_nope']) });
    expect(answer).toMatchObject({
      status: 400,
      json: { error: { code: 'unknown-keys', details: { unknown: ['key_nope'] } } },
    });
    expect(bench.emulator.state.rollCount(BILLING)).toBe(1);
  });

  it('400 for a body with an unknown field', async () => {
    const typo = await postTrigger(daemon, {
      body: JSON.stringify({ key: [BILLING], reason: 'leak', actor: 'alice' }),
    });
    expect(typo).toMatchObject({ status: 400, json: { error: { code: 'invalid-body' } } });
    expect(bench.emulator.state.rollCount(BILLING)).toBe(1);
  });

  it('413 for a body over 64 KiB', async () => {
    const huge = leakOf([BILLING], { ticket: 'x'.repeat(MAX_TRIGGER_BODY_BYTES) });
    await expectRefused(413, 'body-too-large', postTrigger(daemon, { body: huge }));
  });

  it('413 for a chunked body that grows past 64 KiB without a Content-Length', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const post = request(
        `${daemon.url}/v1/rotations`,
        { method: 'POST', headers: { 'transfer-encoding': 'chunked' } },
        (response) => {
          response.resume();
          resolve(response.statusCode ?? 0);
        },
      );
      post.on('error', reject);
      for (let i = 0; i < 5; i++) post.write(Buffer.alloc(16 * 1024, 0x20));
      post.end();
    });
    expect(status).toBe(413);
    expect(bench.events('trigger.rejected')).toEqual([
      expect.objectContaining({ why: 'body-too-large', status: 413 }),
    ]);
  });

  it('404 when the daemon runs without a trigger key', async () => {
    const plain = await bench.start();
    await plain.idle();
    bench.audit.clear();
    const answer = await postTrigger(plain, { body: leakOf([BILLING]) });
    expect(answer).toMatchObject({ status: 404, json: { error: { code: 'disabled' } } });
    expect(bench.emulator.state.rollCount(BILLING)).toBe(1);
  });
});

describe('trigger: the actor is the caller whose key signed', () => {
  it("a request signed with bob's key is bob's, on trigger.accepted and on every rotation event, without an actor in the body", async () => {
    const answer = await postTrigger(daemon, {
      caller: 'bob',
      body: JSON.stringify({ keys: [BILLING], reason: 'leak', ticket: 'INC-8' }),
    });
    expect(answer).toMatchObject({ status: 202, json: { actor: 'bob' } });
    await daemon.idle();
    expect(bench.events('trigger.accepted')).toEqual([
      expect.objectContaining({ actor: 'bob', keys: [BILLING] }),
    ]);
    expect(bench.events('key.succeeded')).toEqual([
      expect.objectContaining({ keyId: BILLING, actor: 'bob', ticket: 'INC-8' }),
    ]);
  });

  it('400 actor-mismatch when the body names someone else than the signing caller; nothing rolls', async () => {
    const answer = await postTrigger(daemon, { caller: 'bob', body: leakOf([BILLING]) });
    expect(answer).toMatchObject({ status: 400, json: { error: { code: 'actor-mismatch' } } });
    await daemon.idle();
    expect(bench.emulator.state.rollCount(BILLING)).toBe(1);
    expect(bench.events('trigger.accepted')).toEqual([]);
    expect(bench.events('trigger.rejected')).toEqual([
      expect.objectContaining({ why: 'actor-mismatch', caller: 'bob' }),
    ]);
  });
});

describe('trigger: replays across a restart', () => {
  it('a request accepted before a restart is refused (409) by the next daemon on the same state directory', async () => {
    const body = leakOf([BILLING]);
    const headers = signedHeaders({ body });
    const send = (target: Daemon): Promise<Response> =>
      fetch(`${target.url}/v1/rotations`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });
    expect((await send(daemon)).status).toBe(202);
    await daemon.idle();
    await daemon.shutdown();
    expect(bench.emulator.state.rollCount(BILLING)).toBe(2);

    const restarted = await bench.start({ triggerKeys: TRIGGER_KEYS });
    await restarted.idle();
    bench.audit.clear();
    const replay = await send(restarted);
    expect(replay.status).toBe(409);
    expect(await replay.json()).toMatchObject({ error: { code: 'replay' } });
    await restarted.idle();
    expect(bench.emulator.state.rollCount(BILLING)).toBe(2);
    expect(bench.events('trigger.accepted')).toEqual([]);
    expect(bench.events('trigger.rejected')).toEqual([
      expect.objectContaining({ why: 'replay', status: 409, caller: 'alice', details: { record: 'replay' } }),
    ]);
  });

  it('a daemon whose replay record is gone refuses requests signed before it started', async () => {
    const body = leakOf([BILLING]);
    const signedEarlier = signedHeaders({ body, timestamp: Math.floor(Date.now() / 1000) - 5 });
    const fresh = await bench.start({ triggerKeys: TRIGGER_KEYS, stateDir: join(bench.dir, 'lost-state') });
    await fresh.idle();
    bench.audit.clear();
    const answer = await fetch(`${fresh.url}/v1/rotations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...signedEarlier },
      body,
    });
    expect(answer.status).toBe(409);
    expect(bench.events('trigger.rejected')).toEqual([
      expect.objectContaining({ why: 'replay', details: { record: 'signed-before-start' } }),
    ]);
    expect(bench.emulator.state.rollCount(BILLING)).toBe(1);
  });
});

describe('trigger: a flood of refused requests', () => {
  it('audits at most the budget one by one, counts every refusal in the metric, and summarizes the rest', async () => {
    const flooded = await bench.start({ triggerKeys: TRIGGER_KEYS, rejectionsAuditedPerMinute: 3 });
    await flooded.idle();
    bench.audit.clear();
    for (let i = 0; i < 25; i++) {
      const response = await fetch(`${flooded.url}/v1/rotations`, {
        method: 'POST',
        body: leakOf([BILLING]),
      });
      expect(response.status).toBe(401);
    }
    expect(bench.events('trigger.rejected')).toHaveLength(3);
    const metrics = await (await fetch(`${flooded.url}/metrics`)).text();
    expect(metrics).toContain('keyroll_trigger_rejections_total{why="missing-signature"} 25');
    await flooded.shutdown();
    expect(bench.events('trigger.rejected')).toHaveLength(3);
    expect(bench.events('trigger.rejected_suppressed')).toEqual([
      expect.objectContaining({ suppressed: 22, byWhy: { 'missing-signature': 22 }, audited: 3 }),
    ]);
  });
});
