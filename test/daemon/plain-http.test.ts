// The daemon says at start which endpoints the policy lets use plain http:// to another machine
// (issue 18, left open from issue 12): one stderr line and one policy.plain_http audit event per
// endpoint, naming its place and host (or the reference its URL is read from), never the URL, and
// only once: a reload repeats none and names only an endpoint the new policy adds.
import { describe, expect, it } from 'vitest';
import { keyYaml, policyYaml, useDaemonBench } from '../support/daemon-bench.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';

const TOKEN_IN_URL = 'hook-token-in-the-query-0123';
const bench = useDaemonBench();

/** The bench's policy plus alert sinks opted into plain HTTP. */
function policyWithSinks(sinks: string): string {
  const base = policyYaml(bench.emulator.url, bench.secretsDir, keyYaml('key_demo_billing', 'maxAge: 30d'));
  return base.replace('defaults:\n', `alerts:\n  sinks:\n${sinks}defaults:\n`);
}

const hook = `    hook: { kind: webhook, url: "http://hooks.example.net/notify?token=${TOKEN_IN_URL}", allowInsecureHttp: true }\n`;
const slack = '    chat: { kind: slack, webhookUrl: env:KEYROLL_SLACK_URL, allowInsecureHttp: true }\n';
// An opt-in that changes nothing (https) is validate's business, not a run-time warning.
const https = '    safe: { kind: webhook, url: "https://hooks.example.net/ok", allowInsecureHttp: true }\n';

describe('daemon: endpoints opted into plain HTTP', () => {
  it('are named once at start, on stderr and in the audit trail, never with their URL', async () => {
    await bench.writePolicyText(policyWithSinks(hook + https));
    const lines: string[] = [];
    const daemon = await bench.start({ warn: (line) => lines.push(line) });
    await daemon.idle();
    expect(lines).toEqual([
      'keyroll: warning: alerts.sinks.hook.url uses plain http:// to "hooks.example.net" (allowInsecureHttp: true): credentials and secrets sent there cross the network in clear\n',
    ]);
    expect(bench.events('policy.plain_http')).toEqual([
      expect.objectContaining({
        endpoint: 'alerts.sinks.hook.url',
        host: 'hooks.example.net',
        level: 'warn',
      }),
    ]);
    expectNoSecrets([JSON.stringify(bench.audit.lines)], [TOKEN_IN_URL]);

    // A reload repeats nothing it said, and names what the new policy adds (a reference by its name).
    await bench.writePolicyText(policyWithSinks(hook + slack));
    expect(await daemon.reload()).toMatchObject({ ok: true });
    expect(lines).toHaveLength(2);
    expect(lines[1]).toBe(
      'keyroll: warning: alerts.sinks.chat.webhookUrl is read from env:KEYROLL_SLACK_URL and may use plain http:// to another machine (allowInsecureHttp: true): credentials and secrets sent there cross the network in clear\n',
    );
    expect(bench.events('policy.plain_http').map((e) => [e.endpoint, e.host, e.ref])).toEqual([
      ['alerts.sinks.hook.url', 'hooks.example.net', undefined],
      ['alerts.sinks.chat.webhookUrl', undefined, 'env:KEYROLL_SLACK_URL'],
    ]);
  });

  it('says nothing for a policy without such an endpoint', async () => {
    await bench.writePolicy(keyYaml('key_demo_billing', 'maxAge: 30d'));
    const lines: string[] = [];
    await (await bench.start({ warn: (line) => lines.push(line) })).idle();
    expect(lines).toEqual([]);
    expect(bench.events('policy.plain_http')).toEqual([]);
  });
});
