// Every network endpoint a policy names, with the object its `allowInsecureHttp` sits on: the
// plain-HTTP rule (http/transport.ts) is checked here as an error, and its exceptions as warnings.
import type { DocPath, PathIssue } from './issue-text.ts';
import type { PolicyDocument } from './schema.ts';
import { insecureHttpHost, insecureHttpMessage } from '../http/public/transport.ts';

interface Endpoint {
  /** The object that holds the URL field and may hold allowInsecureHttp. */
  object: DocPath;
  /** The URL field, e.g. `baseUrl`. */
  field: string;
  /** The URL as written; undefined when it comes from a reference (read at run time). */
  url: string | undefined;
  /** The reference the URL is read from, when it is one. */
  ref?: string;
  allowInsecureHttp: boolean;
}

function endpointsOf(doc: PolicyDocument): Endpoint[] {
  const out: Endpoint[] = [
    {
      object: ['api'],
      field: 'baseUrl',
      url: doc.api.baseUrl,
      allowInsecureHttp: doc.api.allowInsecureHttp === true,
    },
  ];
  const credential = doc.api.credential;
  if (credential.type === 'oauth2') {
    out.push({
      object: ['api', 'credential'],
      field: 'tokenUrl',
      url: credential.tokenUrl,
      allowInsecureHttp: credential.allowInsecureHttp === true,
    });
  }
  for (const [name, backend] of Object.entries(doc.backends)) {
    const allow = backend.kind !== 'file' && backend.allowInsecureHttp === true;
    if (backend.kind === 'vault')
      out.push({
        object: ['backends', name],
        field: 'address',
        url: backend.address,
        allowInsecureHttp: allow,
      });
    if (backend.kind === 'aws' && backend.endpoint !== undefined)
      out.push({
        object: ['backends', name],
        field: 'endpoint',
        url: backend.endpoint,
        allowInsecureHttp: allow,
      });
  }
  for (const [name, sink] of Object.entries(doc.alerts?.sinks ?? {})) {
    const object: DocPath = ['alerts', 'sinks', name];
    const allowInsecureHttp = sink.allowInsecureHttp === true;
    if (sink.kind === 'slack')
      out.push({ object, field: 'webhookUrl', url: undefined, ref: sink.webhookUrl, allowInsecureHttp });
    else if (sink.kind === 'pagerduty') out.push({ object, field: 'url', url: sink.url, allowInsecureHttp });
    else if (sink.url !== undefined) out.push({ object, field: 'url', url: sink.url, allowInsecureHttp });
    else if (sink.urlRef !== undefined)
      out.push({ object, field: 'urlRef', url: undefined, ref: sink.urlRef, allowInsecureHttp });
  }
  const github = doc.intake?.github;
  if (github !== undefined)
    out.push({
      object: ['intake', 'github'],
      field: 'apiUrl',
      url: github.apiUrl,
      allowInsecureHttp: github.allowInsecureHttp === true,
    });
  return out;
}

/** Errors: each endpoint written as http:// to another machine without allowInsecureHttp: true. */
export function insecureEndpointIssues(doc: PolicyDocument): PathIssue[] {
  const issues: PathIssue[] = [];
  for (const endpoint of endpointsOf(doc)) {
    if (endpoint.allowInsecureHttp || endpoint.url === undefined) continue;
    const host = insecureHttpHost(endpoint.url);
    if (host !== undefined)
      issues.push({ path: [...endpoint.object, endpoint.field], message: insecureHttpMessage(host) });
  }
  return issues;
}

/**
 * An endpoint opted into plain http:// to another machine: the policy path of its URL field (or
 * a flag), and the host it reaches in clear, or, for a URL read from a reference, the reference's
 * name. Never the URL itself: a webhook URL may carry a token in its path or query.
 */
export interface PlainHttpEndpoint {
  /** e.g. `backends.vault.address`, `alerts.sinks.slack.webhookUrl`, `--pushgateway`. */
  endpoint: string;
  host?: string;
  ref?: string;
}

/** The endpoints whose `allowInsecureHttp: true` lets them use plain http:// to another machine (run and daemon warn at start). */
export function plainHttpEndpoints(doc: PolicyDocument): PlainHttpEndpoint[] {
  const out: PlainHttpEndpoint[] = [];
  for (const endpoint of endpointsOf(doc)) {
    if (!endpoint.allowInsecureHttp) continue;
    const path = [...endpoint.object, endpoint.field].join('.');
    if (endpoint.url === undefined) {
      out.push({ endpoint: path, ...(endpoint.ref === undefined ? {} : { ref: endpoint.ref }) });
      continue;
    }
    const host = insecureHttpHost(endpoint.url);
    if (host !== undefined) out.push({ endpoint: path, host });
  }
  return out;
}

/** Warnings `validate` prints: one per endpoint whose object sets allowInsecureHttp: true. */
export function insecureEndpointWarnings(doc: PolicyDocument): PathIssue[] {
  const warnings: PathIssue[] = [];
  for (const endpoint of endpointsOf(doc)) {
    if (!endpoint.allowInsecureHttp) continue;
    const path: DocPath = [...endpoint.object, 'allowInsecureHttp'];
    if (endpoint.url === undefined) {
      // The reference's value is a credential: only its name is printed.
      warnings.push({
        path,
        message: `is true: the ${endpoint.field} read from ${endpoint.ref ?? 'its reference'} may use plain http:// to another machine, and what is sent there crosses the network in clear`,
      });
      continue;
    }
    const host = insecureHttpHost(endpoint.url);
    warnings.push({
      path,
      message:
        host === undefined
          ? `is true but ${endpoint.field} is https:// or this machine, so it changes nothing; remove it`
          : `is true: ${endpoint.field} uses plain http:// to ${JSON.stringify(host)}, so credentials and secrets sent there cross the network in clear`,
    });
  }
  return warnings;
}
