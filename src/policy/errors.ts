// Errors of the policy: a file that cannot be read, YAML that does not parse, or a policy that
// breaks the schema or a semantic rule. Each lists every issue with file:line so the operator
// fixes the file in one pass; the CLI maps all of them to exit code 2 (nothing touched).
// Messages never echo a value from a reference field: a literal secret pasted by mistake
// must not reach the terminal or a log (invariant 3).
import { KeyrollError } from '../errors.ts';

export type PolicyErrorCode = 'KR_POLICY_UNREADABLE' | 'KR_POLICY_SYNTAX' | 'KR_POLICY_INVALID';

export interface PolicyIssue {
  /** The policy file as the user named it. */
  file: string;
  /** 1-based line; absent only when the issue concerns the whole file (unreadable, too large). */
  line?: number;
  /** 1-based column. */
  column?: number;
  /** Where in the document, e.g. `keys[2].schedule`; empty for the document itself. */
  path: string;
  /** A plain sentence that reads after the path, e.g. `"not a cron" is not a cron expression`. */
  message: string;
}

/** `policy.yaml:14 keys[2].schedule: "not a cron" is not a cron expression` */
export function formatIssue(issue: PolicyIssue): string {
  const where = issue.line === undefined ? issue.file : `${issue.file}:${issue.line}`;
  return issue.path === '' ? `${where}: ${issue.message}` : `${where} ${issue.path}: ${issue.message}`;
}

export class PolicyError extends KeyrollError {
  override name = 'PolicyError';
  declare readonly code: PolicyErrorCode;
  readonly file: string;
  readonly issues: readonly PolicyIssue[];

  constructor(code: PolicyErrorCode, file: string, issues: readonly PolicyIssue[], cause?: unknown) {
    super(code, issues.map(formatIssue).join('\n'), { cause });
    this.file = file;
    this.issues = issues;
  }

  override toFields(): Record<string, unknown> {
    return { ...super.toFields(), file: this.file, issueCount: this.issues.length };
  }
}
