// Consumers in the policy (src/policy/consumers.ts): what a key may list, the settings of the
// `consumers` section, and the exact `file:line path: sentence` of each mistake (exit 2 in the CLI).
import { describe, expect, it } from 'vitest';
import { parsePolicy } from '../../src/policy/load.ts';
import { policyRejection } from '../support/policy-rejection.ts';

// Lines 1-15 are valid; a key's `consumers:` appended is line 16, its items start on line 17.
const HEAD = `version: 1
api:
  baseUrl: http://127.0.0.1:8787
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
backends:
  files: { kind: file, directory: ./secrets }
alerts:
  sinks:
    hook: { kind: webhook, url: "https://hooks.example.com/keyroll" }
    chat: { kind: slack, webhookUrl: env:SLACK_WEBHOOK_URL }
keys:
  - id: key_a
    organization: org_a
    maxAge: 30d
    destinations: [{ backend: files, path: a.json }]
`;

const messageOf = (text: string): string => policyRejection(text).message;

describe('consumers in the policy', () => {
  it('resolves every kind in the order written, with the defaults of the consumers section', () => {
    const policy = parsePolicy(
      `${HEAD}    consumers:
      - { kind: externalSecret, namespace: shop, name: checkout-api-key }
      - { kind: vaultStaticSecret, namespace: shop, name: checkout-vso }
      - { kind: deployment, namespace: shop, name: checkout }
      - { kind: statefulSet, namespace: shop, name: ledger }
      - { kind: daemonSet, namespace: edge, name: proxy }
      - { kind: webhook, sink: hook }
`,
      'policy.yaml',
    );
    expect(policy.keys[0]?.consumers).toEqual([
      { kind: 'externalSecret', namespace: 'shop', name: 'checkout-api-key' },
      { kind: 'vaultStaticSecret', namespace: 'shop', name: 'checkout-vso' },
      { kind: 'deployment', namespace: 'shop', name: 'checkout' },
      { kind: 'statefulSet', namespace: 'shop', name: 'ledger' },
      { kind: 'daemonSet', namespace: 'edge', name: 'proxy' },
      { kind: 'webhook', sink: 'hook' },
    ]);
    expect(policy.keys[0]?.refreshConsumers).toBe('needed');
    expect(policy.consumers).toEqual({
      kubernetes: {},
      syncTimeoutMs: 120_000,
      rolloutTimeoutMs: 600_000,
      reloaderTimeoutMs: 30_000,
      maxConcurrentRestarts: 2,
    });
  });

  it('reads the consumers section: kubeconfig, timeouts, the cap and the restart window', () => {
    const policy = parsePolicy(
      `${HEAD}consumers:
  kubernetes: { kubeconfig: /etc/keyroll/kubeconfig, context: prod }
  syncTimeout: 30s
  rolloutTimeout: 5m
  reloaderTimeout: 10s
  maxConcurrentRestarts: 4
  restartWindow: { days: [mon, tue, wed, thu, fri], hours: "09:00-17:30", timezone: Europe/Berlin }
defaults:
  refreshConsumers: always
`,
      'policy.yaml',
    );
    expect(policy.consumers).toEqual({
      kubernetes: { kubeconfig: '/etc/keyroll/kubeconfig', context: 'prod' },
      syncTimeoutMs: 30_000,
      rolloutTimeoutMs: 300_000,
      reloaderTimeoutMs: 10_000,
      maxConcurrentRestarts: 4,
      restartWindow: { days: [1, 2, 3, 4, 5], fromMinute: 540, toMinute: 1050, timezone: 'Europe/Berlin' },
    });
    expect(policy.keys[0]?.refreshConsumers).toBe('always');
  });

  it('an unknown kind lists the kinds', () => {
    expect(
      messageOf(`${HEAD}    consumers:\n      - { kind: cronJob, namespace: shop, name: nightly }\n`),
    ).toBe(
      'policy.yaml:17 keys[0].consumers[0].kind: must be one of externalSecret, vaultStaticSecret, deployment, statefulSet, daemonSet, webhook',
    );
  });

  it('a namespace or name Kubernetes would refuse', () => {
    expect(
      messageOf(`${HEAD}    consumers:\n      - { kind: deployment, namespace: Shop, name: checkout }\n`),
    ).toBe(
      'policy.yaml:17 keys[0].consumers[0].namespace: must be a Kubernetes namespace name: lowercase letters, digits and "-", starting and ending with a letter or digit',
    );
    expect(
      messageOf(
        `${HEAD}    consumers:\n      - { kind: externalSecret, namespace: shop, name: "api_key" }\n`,
      ),
    ).toBe(
      'policy.yaml:17 keys[0].consumers[0].name: must be a Kubernetes object name: lowercase letters, digits, "-" and ".", starting and ending with a letter or digit',
    );
  });

  it('a webhook consumer naming a missing sink, or a sink that is not a webhook', () => {
    expect(messageOf(`${HEAD}    consumers:\n      - { kind: webhook, sink: cache }\n`)).toBe(
      'policy.yaml:17 keys[0].consumers[0].sink: sink "cache" is not defined in alerts.sinks (defined: hook, chat)',
    );
    expect(messageOf(`${HEAD}    consumers:\n      - { kind: webhook, sink: chat }\n`)).toBe(
      'policy.yaml:17 keys[0].consumers[0].sink: sink "chat" is a slack sink; a webhook consumer needs a sink of kind webhook',
    );
  });

  it('a consumer listed twice by one key', () => {
    expect(
      messageOf(
        `${HEAD}    consumers:\n      - { kind: deployment, namespace: shop, name: checkout }\n      - { kind: deployment, namespace: shop, name: checkout }\n`,
      ),
    ).toBe(
      'policy.yaml:18 keys[0].consumers[1]: lists deployment shop/checkout again (already consumers[0]); a consumer is refreshed once per rotation',
    );
  });

  it('a restart window that is not a time range, or ends before it starts', () => {
    expect(messageOf(`${HEAD}consumers:\n  restartWindow: { hours: "9-17" }\n`)).toBe(
      'policy.yaml:17 consumers.restartWindow.hours: must be a time range such as "09:00-17:00" (24-hour clock, start before end)',
    );
    expect(messageOf(`${HEAD}consumers:\n  restartWindow: { hours: "17:00-09:00" }\n`)).toBe(
      'policy.yaml:17 consumers.restartWindow.hours: starts at or after it ends (17:00-09:00); a window runs from its start to its end on the same day',
    );
  });

  it('refreshConsumers takes needed or always', () => {
    expect(messageOf(`${HEAD}    refreshConsumers: sometimes\n`)).toBe(
      'policy.yaml:16 keys[0].refreshConsumers: must be one of needed, always',
    );
  });
});
