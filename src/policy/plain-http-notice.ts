// `run`, `rotate` and the daemon say at start which endpoints may use plain http:// to another
// machine (allowInsecureHttp: true, --pushgateway-allow-insecure-http): `validate` warns about them,
// but a CronJob or a daemon nobody validated by hand would otherwise send credentials and secrets in
// clear without a word (invariant 3). One stderr line and one audit event per endpoint, once: the
// endpoint's place and its host, or the reference its URL is read from, never the URL itself.
import type { AuditLog } from '../audit/public/events.ts';
import type { PlainHttpEndpoint } from './endpoints.ts';

/** Warns about each endpoint not in `announced` yet (the daemon keeps one set across reloads), and adds it. */
export function announcePlainHttp(
  endpoints: readonly PlainHttpEndpoint[],
  audit: AuditLog,
  announced: Set<string> = new Set(),
  write: (line: string) => void = (line) => process.stderr.write(line),
): void {
  for (const endpoint of endpoints) {
    const id = `${endpoint.endpoint} ${endpoint.host ?? ''} ${endpoint.ref ?? ''}`;
    if (announced.has(id)) continue;
    announced.add(id);
    audit.emit('policy.plain_http', {
      endpoint: endpoint.endpoint,
      ...(endpoint.host === undefined ? {} : { host: endpoint.host }),
      ...(endpoint.ref === undefined ? {} : { ref: endpoint.ref }),
    });
    write(`${plainHttpWarning(endpoint)}\n`);
  }
}

export function plainHttpWarning(endpoint: PlainHttpEndpoint): string {
  const optIn = endpoint.endpoint.startsWith('--')
    ? `${endpoint.endpoint}-allow-insecure-http`
    : 'allowInsecureHttp: true';
  const where =
    endpoint.host !== undefined
      ? `uses plain http:// to ${JSON.stringify(endpoint.host)}`
      : `is read from ${endpoint.ref ?? 'a reference'} and may use plain http:// to another machine`;
  return `keyroll: warning: ${endpoint.endpoint} ${where} (${optIn}): credentials and secrets sent there cross the network in clear`;
}
