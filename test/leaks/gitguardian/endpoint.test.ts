// POST /v1/leaks/gitguardian: GitGuardian's documented signature (HMAC-SHA256 of the raw body
// keyed with the Timestamp header text followed by the signature token), its timestamp window,
// replay refusal, and what is automated: the incident is audited and alerted critical with the
// command that finishes the job, since GitGuardian's event carries no secret value.
import { createHmac } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Secret } from '../../../src/audit/secret.ts';
import {
  checkGitguardianSignature,
  GITGUARDIAN_MAX_SKEW_SECONDS,
} from '../../../src/leaks/gitguardian/signature.ts';
import type { Daemon } from '../../../src/daemon/daemon.ts';
import { keyYaml, policyYaml, startDaemonBench, type DaemonBench } from '../../support/daemon-bench.ts';
import { expectNoSecrets } from '../../support/secret-scan.ts';

const TOKEN = 'gitguardian-signature-token-for-the-tests-42';
const BILLING = 'key_demo_billing';

/** An incident_triggered event in the shape of GitGuardian's custom webhook (API incident fields). */
function incidentEvent(action = 'incident_triggered', detector = 'keyroll_api_key'): Record<string, unknown> {
  return {
    source: 'GitGuardian',
    timestamp: '2026-01-01T00:00:00Z',
    action,
    message: 'A new incident has been detected',
    incident: {
      id: 3899,
      date: '2026-01-01T00:00:00Z',
      detector: { name: detector, display_name: 'keyroll API key', nature: 'specific', family: 'apikey' },
      secret_hash: 'Ri9FjVgdOlPnBmujoxP4XPJcbe82BhJXB/SAngijw/juCISuOMgPzYhV28m6OG24',
      hmsl_hash: '05975add34ddc9a38a0fb57c7d3e676ffed57080516fc16bf8d8f14308fedb86',
      gitguardian_url: 'https://dashboard.gitguardian.com/workspace/1/incidents/3899',
      regression: false,
      status: 'TRIGGERED',
      occurrences_count: 1,
      severity: 'critical',
      validity: 'valid',
    },
  };
}

/** Signed as GitGuardian documents it, computed here independently of keyroll's code. */
function gitguardianHeaders(body: string, timestamp: string, token = TOKEN): Record<string, string> {
  return {
    timestamp,
    'gitguardian-signature': `sha256=${createHmac('sha256', timestamp + token)
      .update(body)
      .digest('hex')}`,
  };
}

async function post(
  daemon: Daemon,
  payload: unknown,
  options: { timestamp?: string; token?: string } = {},
): Promise<{ status: number; json: Record<string, unknown> }> {
  const body = JSON.stringify(payload);
  const timestamp = options.timestamp ?? String(Math.floor(Date.now() / 1000));
  const response = await fetch(`${daemon.url}/v1/leaks/gitguardian`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...gitguardianHeaders(body, timestamp, options.token) },
    body,
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

let bench: DaemonBench;

beforeEach(async () => {
  bench = await startDaemonBench();
});

afterEach(async () => {
  await bench.close();
});

async function startWith(extra = ''): Promise<Daemon> {
  await bench.writePolicyText(`${policyYaml(bench.emulator.url, bench.secretsDir, keyYaml(BILLING, 'schedule: "0 3 * * 1"'))}intake:
  gitguardian:
    webhookSecret: env:KR_GG_TOKEN
${extra}`);
  return bench.start({ env: { KR_GG_TOKEN: TOKEN } });
}

describe('GitGuardian signature', () => {
  it('accepts the documented scheme and refuses a timestamp outside the window', () => {
    const body = Buffer.from('{"action":"incident_triggered"}');
    const now = 1_767_225_600;
    const headers = gitguardianHeaders(body.toString(), String(now));
    expect(
      checkGitguardianSignature(
        new Secret(TOKEN),
        body,
        headers.timestamp,
        headers['gitguardian-signature'],
        now,
      ),
    ).toMatchObject({ ok: true });
    expect(
      checkGitguardianSignature(
        new Secret(TOKEN),
        body,
        headers.timestamp,
        headers['gitguardian-signature'],
        now + GITGUARDIAN_MAX_SKEW_SECONDS + 1,
      ),
    ).toEqual({ ok: false, why: 'stale-timestamp' });
    expect(
      checkGitguardianSignature(
        new Secret('another-token'),
        body,
        headers.timestamp,
        headers['gitguardian-signature'],
        now,
      ),
    ).toEqual({ ok: false, why: 'bad-signature' });
    // The timestamp is part of the key: the same body signed at another time does not verify.
    const other = gitguardianHeaders(body.toString(), String(now - 1));
    expect(
      checkGitguardianSignature(
        new Secret(TOKEN),
        body,
        headers.timestamp,
        other['gitguardian-signature'],
        now,
      ),
    ).toEqual({ ok: false, why: 'bad-signature' });
  });
});

describe('POST /v1/leaks/gitguardian', () => {
  it('audits an incident and alerts critical with its page and the command to finish; rotates nothing', async () => {
    const daemon = await startWith();
    const answer = await post(daemon, incidentEvent());
    expect(answer).toMatchObject({ status: 202, json: { accepted: true, automated: 'alert-only' } });
    await daemon.idle();
    expect(bench.events('leak.intake.unidentified')).toMatchObject([
      { source: 'gitguardian', alert: 'incident 3899', detector: 'keyroll_api_key', validity: 'valid' },
    ]);
    const alerts = bench.alerter.alerts.map((sent) => sent.alert);
    expect(alerts).toMatchObject([{ severity: 'critical', errorCode: 'KR_LEAK_VALUE_NEEDED' }]);
    expect(alerts[0]?.nextAction).toContain('https://dashboard.gitguardian.com/workspace/1/incidents/3899');
    expect(alerts[0]?.nextAction).toContain('--leaked-secret-stdin');
    // The startup sweep may rotate the never-stored key; nothing rotates for the leak.
    expect(bench.events('run.started').filter((event) => event.reason === 'leak')).toEqual([]);
    expectNoSecrets([...bench.audit.lines, ...alerts.map((alert) => JSON.stringify(alert))], [TOKEN]);
  });

  it('refuses a stale timestamp, a wrong token and a replay; accepts nothing twice', async () => {
    const daemon = await startWith();
    const stale = await post(daemon, incidentEvent(), {
      timestamp: String(Math.floor(Date.now() / 1000) - 120),
    });
    expect(stale).toMatchObject({ status: 401, json: { error: { code: 'stale-timestamp' } } });
    expect((await post(daemon, incidentEvent(), { token: 'not-the-token' })).status).toBe(401);
    const timestamp = String(Math.floor(Date.now() / 1000));
    expect((await post(daemon, incidentEvent(), { timestamp })).status).toBe(202);
    expect((await post(daemon, incidentEvent(), { timestamp })).status).toBe(409);
    await daemon.idle();
    expect(bench.events('leak.intake.accepted')).toHaveLength(1);
    expect(bench.events('trigger.rejected').map((event) => event.why)).toEqual([
      'stale-timestamp',
      'bad-signature',
      'replay',
    ]);
  });

  it('ignores incidents of detectors not listed and events that need no rotation', async () => {
    const daemon = await startWith('    detectors: [keyroll_api_key]\n');
    expect((await post(daemon, incidentEvent('incident_triggered', 'aws_iam'))).json).toMatchObject({
      ignored: true,
    });
    expect((await post(daemon, incidentEvent('incident_assigned'))).json).toMatchObject({ ignored: true });
    await daemon.idle();
    expect(bench.events('leak.intake.ignored').map((event) => event.why)).toEqual([
      'detector-not-listed',
      'action-not-handled',
    ]);
    expect(bench.alerter.alerts).toEqual([]);
  });

  it('records no ignored event: the same signed event again is answered alike and audited once (issue 18)', async () => {
    const daemon = await startWith();
    const timestamp = String(Math.floor(Date.now() / 1000));
    expect(await post(daemon, incidentEvent('incident_assigned'), { timestamp })).toMatchObject({
      status: 202,
      json: { ignored: true },
    });
    expect(await post(daemon, incidentEvent('incident_assigned'), { timestamp })).toMatchObject({
      status: 202,
      json: { ignored: true },
    });
    await daemon.idle();
    expect(bench.events('leak.intake.ignored')).toHaveLength(1);
    expect(bench.events('trigger.rejected')).toEqual([]);
  });

  it('alerts once per incident and action within the window: a second, differently signed event for it is audited as already handled (issue 18)', async () => {
    const daemon = await startWith();
    const now = Math.floor(Date.now() / 1000);
    expect((await post(daemon, incidentEvent(), { timestamp: String(now) })).status).toBe(202);
    expect(await post(daemon, incidentEvent(), { timestamp: String(now + 1) })).toMatchObject({
      status: 202,
      json: { ignored: true },
    });
    await daemon.idle();
    expect(bench.alerter.alerts).toHaveLength(1);
    expect(bench.events('leak.intake.ignored')).toEqual([
      expect.objectContaining({ alert: 'incident 3899', why: 'alert-already-handled' }),
    ]);
  });
});
