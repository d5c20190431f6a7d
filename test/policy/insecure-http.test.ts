// Plain http:// to another machine is refused for every endpoint the policy names (issue 12 §6),
// with the usual `file:line path: sentence`; loopback hosts stay valid (the emulator, the test
// servers), and `allowInsecureHttp: true` on the endpoint's object accepts it with a warning.
import { describe, expect, it } from 'vitest';
import { AlertSinkConfig, type SlackSinkConfig, type WebhookSinkConfig } from '../../src/alerts/config.ts';
import { slackAlertRequest } from '../../src/alerts/slack.ts';
import type { Alert } from '../../src/alerts/types.ts';
import { webhookAlertRequest } from '../../src/alerts/webhook.ts';
import { parsePolicy } from '../../src/policy/load.ts';
import { insecureHttpHost, isLoopbackHost } from '../../src/http/transport.ts';
import { policyRejection } from '../support/policy-rejection.ts';

const KEYS = `keys:
  - id: key_a
    organization: org_a
    destinations: [{ backend: files, path: a.json }]
    maxAge: 30d
`;

/** A policy with `api`, `backends` and `alerts` blocks as given (each ends with a newline). */
function policy(parts: { api?: string; backends?: string; alerts?: string }): string {
  const api =
    parts.api ??
    'api:\n  baseUrl: https://keys.example.com\n  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }\n';
  const backends = `backends:\n  files: { kind: file, directory: ./secrets }\n${parts.backends ?? ''}`;
  return `version: 1\n${api}${backends}${parts.alerts ?? ''}${KEYS}`;
}

const sentence = (host: string): string =>
  `uses plain http:// to "${host}", which is not this machine, so credentials and secrets would cross the network in clear; use https://, or set allowInsecureHttp: true beside it to accept that`;

describe('loopback hosts', () => {
  it('are localhost, 127.0.0.0/8 and ::1, in any spelling the URL parser normalises', () => {
    for (const url of [
      'http://localhost:8787',
      'http://LOCALHOST.',
      'http://127.0.0.1',
      'http://127.255.3.4:1',
      'http://127.1',
      'http://0x7f.0.0.1',
      'http://[::1]:8200',
      'http://[0:0:0:0:0:0:0:1]',
    ]) {
      expect(insecureHttpHost(url), url).toBeUndefined();
    }
    for (const url of [
      'http://keys.example.com',
      'http://10.0.0.5',
      'http://128.0.0.1',
      'http://[::2]',
      'http://localhost.example.com',
      'http://127.0.0.1.nip.io',
    ]) {
      expect(insecureHttpHost(url), url).toBeDefined();
    }
    expect(insecureHttpHost('https://keys.example.com')).toBeUndefined();
    expect(isLoopbackHost('[::ffff:7f00:1]')).toBe(false);
  });
});

describe('plain http:// to another machine', () => {
  it('is refused for api.baseUrl, at its line', () => {
    const error = policyRejection(
      policy({
        api: 'api:\n  baseUrl: http://keys.example.com\n  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }\n',
      }),
    );
    expect(error.code).toBe('KR_POLICY_INVALID');
    expect(error.message).toBe(`policy.yaml:3 api.baseUrl: ${sentence('keys.example.com')}`);
  });

  it('is refused for the OAuth tokenUrl', () => {
    const api = `api:
  baseUrl: https://keys.example.com
  credential:
    type: oauth2
    tokenUrl: http://auth.example.com/oauth/token
    clientId: keyroll
    clientSecret: env:CLIENT_SECRET
`;
    expect(policyRejection(policy({ api })).message).toBe(
      `policy.yaml:6 api.credential.tokenUrl: ${sentence('auth.example.com')}`,
    );
  });

  it('is refused for a Vault address and an AWS endpoint', () => {
    const backends = `  vault: { kind: vault, address: "http://vault.internal:8200", auth: { method: token, token: env:VAULT_TOKEN } }
  aws: { kind: aws, region: eu-west-1, endpoint: "http://10.1.2.3:4566" }
`;
    expect(policyRejection(policy({ backends })).message).toBe(
      [
        `policy.yaml:7 backends.vault.address: ${sentence('vault.internal')}`,
        `policy.yaml:8 backends.aws.endpoint: ${sentence('10.1.2.3')}`,
      ].join('\n'),
    );
  });

  it('is refused for webhook and PagerDuty URLs', () => {
    const alerts = `alerts:
  sinks:
    siem: { kind: webhook, url: "http://siem.example.com/hook" }
    pager: { kind: pagerduty, routingKey: env:PD_KEY, url: "http://events.example.com/v2/enqueue" }
`;
    expect(policyRejection(policy({ alerts })).message).toBe(
      [
        `policy.yaml:9 alerts.sinks.siem.url: ${sentence('siem.example.com')}`,
        `policy.yaml:10 alerts.sinks.pager.url: ${sentence('events.example.com')}`,
      ].join('\n'),
    );
  });

  it('refuses a Vault address or an AWS endpoint that is not http(s) at all', () => {
    const backends =
      '  vault: { kind: vault, address: "ftp://vault:21", auth: { method: token, token: env:VAULT_TOKEN } }\n';
    expect(policyRejection(policy({ backends })).message).toBe(
      'policy.yaml:7 backends.vault.address: must be an http:// or https:// URL',
    );
  });
});

describe('loopback and https endpoints', () => {
  it('stay valid without allowInsecureHttp, and give no warning', () => {
    const backends = `  vault: { kind: vault, address: "http://127.0.0.1:8200", auth: { method: token, token: env:VAULT_TOKEN } }
  aws: { kind: aws, region: eu-west-1, endpoint: "http://localhost:4566" }
`;
    const alerts = 'alerts:\n  sinks:\n    hook: { kind: webhook, url: "http://[::1]:9000/hook" }\n';
    const api =
      'api:\n  baseUrl: http://127.0.0.1:8787\n  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }\n';
    const parsed = parsePolicy(policy({ api, backends, alerts }), 'policy.yaml');
    expect(parsed.warnings).toEqual([]);
  });
});

describe('allowInsecureHttp: true', () => {
  it('accepts the endpoint it sits beside, and leaves a warning at its line for validate', () => {
    const api =
      'api:\n  baseUrl: http://keys.example.com\n  allowInsecureHttp: true\n  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }\n';
    const backends = `  vault:
    kind: vault
    address: http://vault.internal:8200
    allowInsecureHttp: true
    auth: { method: token, token: env:VAULT_TOKEN }
`;
    const alerts =
      'alerts:\n  sinks:\n    chat: { kind: slack, webhookUrl: env:SLACK_URL, allowInsecureHttp: true }\n';
    const parsed = parsePolicy(policy({ api, backends, alerts }), 'policy.yaml');
    expect(parsed.warnings?.map((w) => `${w.line} ${w.path}: ${w.message}`)).toEqual([
      '4 api.allowInsecureHttp: is true: baseUrl uses plain http:// to "keys.example.com", so credentials and secrets sent there cross the network in clear',
      '11 backends.vault.allowInsecureHttp: is true: address uses plain http:// to "vault.internal", so credentials and secrets sent there cross the network in clear',
      '15 alerts.sinks.chat.allowInsecureHttp: is true: the webhookUrl read from env:SLACK_URL may use plain http:// to another machine, and what is sent there crosses the network in clear',
    ]);
  });

  it('covers only its own object: the OAuth token URL needs its own', () => {
    const api = `api:
  baseUrl: http://keys.example.com
  allowInsecureHttp: true
  credential: { type: oauth2, tokenUrl: "http://auth.example.com/token", clientId: k, clientSecret: env:S }
`;
    expect(policyRejection(policy({ api })).message).toBe(
      `policy.yaml:5 api.credential.tokenUrl: ${sentence('auth.example.com')}`,
    );
  });
});

describe('alert URLs read from a reference', () => {
  const alert: Alert = {
    severity: 'critical',
    summary: 's',
    step: 'store',
    errorCode: 'KR_UNEXPECTED',
    nextAction: 'n',
  };
  const context = {
    env: { HOOK_URL: 'http://hooks.example.com/T0/B0/tok3n', LOCAL_URL: 'http://127.0.0.1:9/x' },
    now: () => new Date(0),
  };

  it('are refused over plain http:// to another machine when the request is built, naming the host only', async () => {
    const slack = AlertSinkConfig.parse({ kind: 'slack', webhookUrl: 'env:HOOK_URL' }) as SlackSinkConfig;
    const slackError = await slackAlertRequest('chat', slack, alert, context).catch(
      (e: unknown) => e as Error,
    );
    expect(slackError).toBeInstanceOf(Error);
    expect((slackError as Error).message).toContain('plain http:// to hooks.example.com');
    expect((slackError as Error).message).not.toContain('tok3n');
    const hook = AlertSinkConfig.parse({ kind: 'webhook', urlRef: 'env:HOOK_URL' }) as WebhookSinkConfig;
    await expect(webhookAlertRequest('siem', hook, alert, context)).rejects.toMatchObject({
      code: 'KR_ALERT_SINK_INVALID',
    });
  });

  it('are sent to loopback, or anywhere when the sink says allowInsecureHttp: true', async () => {
    const local = AlertSinkConfig.parse({ kind: 'webhook', urlRef: 'env:LOCAL_URL' }) as WebhookSinkConfig;
    expect((await webhookAlertRequest('siem', local, alert, context)).url).toBe('http://127.0.0.1:9/x');
    const allowed = AlertSinkConfig.parse({
      kind: 'slack',
      webhookUrl: 'env:HOOK_URL',
      allowInsecureHttp: true,
    }) as SlackSinkConfig;
    expect((await slackAlertRequest('chat', allowed, alert, context)).url).toBe(
      'http://hooks.example.com/T0/B0/tok3n',
    );
  });
});
