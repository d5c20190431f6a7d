// A policy document built by code rather than read from a file (the daemon's keyroll.io objects,
// issue 31, docs/crds.md "From objects to a policy"), checked and resolved exactly as a file's is:
// the same schema, the same semantic checks, the same resolution. Its issues have no line (there
// is no text); `file` names where the document came from.
import { checkPolicy } from './check.ts';
import { insecureEndpointWarnings, plainHttpEndpoints } from './endpoints.ts';
import { PolicyError, type PolicyIssue } from './errors.ts';
import { describeZodIssues, type PathIssue } from './issue-text.ts';
import { formatPath } from './locate.ts';
import { resolvePolicy } from './resolve.ts';
import { ApiSettings, PolicyDocument, type Policy } from './schema.ts';

/** Validates and resolves `document`; throws PolicyError (KR_POLICY_INVALID) listing every issue. */
export function policyFromDocument(document: unknown, file: string): Policy {
  return checkedPolicy(document, file, (issues) =>
    issues.map((issue) => ({ file, path: formatPath(issue.path), message: issue.message })),
  );
}

/**
 * Schema, semantic checks and resolution of policy `data`, whether read from a file (load.ts: its
 * issues located by line) or built by code (above); `locate` turns each issue into a PolicyIssue.
 */
export function checkedPolicy(
  data: unknown,
  file: string,
  locate: (issues: readonly PathIssue[]) => PolicyIssue[],
): Policy {
  const parsed = PolicyDocument.safeParse(data);
  if (!parsed.success)
    throw new PolicyError(
      'KR_POLICY_INVALID',
      file,
      locate(describeZodIssues(parsed.error.issues, data, PolicyDocument)),
    );
  const semantic = checkPolicy(parsed.data);
  if (semantic.length > 0) throw new PolicyError('KR_POLICY_INVALID', file, locate(semantic));
  return {
    ...resolvePolicy(parsed.data, file),
    warnings: locate(insecureEndpointWarnings(parsed.data)),
    plainHttp: plainHttpEndpoints(parsed.data),
  };
}

/**
 * The policy of a daemon whose objects hold no key yet (or no ClusterKeyApi to rotate with): the
 * shared settings and nothing to rotate. Its `api` points at a `.invalid` host (RFC 2606: never
 * resolves) with a credential nobody reads: with no key, nothing calls the API.
 */
export function policyWithoutKeys(
  shared: Pick<PolicyDocument, 'alerts' | 'escrow' | 'intake' | 'consumers'>,
  file: string,
): Policy {
  const api = ApiSettings.parse({
    baseUrl: 'https://no-cluster-key-api.invalid',
    credential: { type: 'bearer', token: 'env:KEYROLL_NO_CLUSTER_KEY_API' },
  });
  return resolvePolicy({ version: 1, api, backends: {}, ...shared, keys: [] }, file);
}
