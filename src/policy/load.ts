// Reading the policy: bytes → YAML document (JSON is YAML) → strict schema → semantic checks →
// resolved Policy. Every failure is a PolicyError listing each issue as
// `policy.yaml:14 keys[2].schedule: "not a cron" is not a cron expression`, and nothing is
// touched: the CLI exits 2 before any backend or API call.
import { open } from 'node:fs/promises';
import { LineCounter, parseDocument, type Document } from 'yaml';
import { checkedPolicy } from './from-document.ts';
import { PolicyError, type PolicyIssue } from './errors.ts';
import type { PathIssue } from './issue-text.ts';
import { formatPath, positionOf } from './locate.ts';
import { syntaxIssues } from './yaml-syntax.ts';
import type { Policy } from './schema.ts';

/** A policy is a few kilobytes; a file beyond this is a mistake (or an attack on the parser) and is not parsed. */
export const MAX_POLICY_BYTES = 1024 * 1024;

/** Reads, validates and resolves the policy at `file`. Throws PolicyError. */
export async function loadPolicy(file: string): Promise<Policy> {
  return parsePolicy(await readPolicyText(file), file);
}

/**
 * The text of a policy-like file (the policy, the daemon's settings file): at most
 * MAX_POLICY_BYTES of UTF-8. Throws PolicyError (KR_POLICY_UNREADABLE).
 */
export async function readPolicyText(file: string): Promise<string> {
  const bytes = await readCapped(file);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch (error) {
    throw new PolicyError(
      'KR_POLICY_UNREADABLE',
      file,
      [{ file, path: '', message: 'is not UTF-8 text' }],
      error,
    );
  }
}

/** Validates and resolves policy `text`; `file` names it in every issue. Throws PolicyError. */
export function parsePolicy(text: string, file: string): Policy {
  const size = Buffer.byteLength(text, 'utf8');
  if (size > MAX_POLICY_BYTES) throw tooLarge(file, size);

  const { doc, lineCounter, data } = parsePolicyYaml(text, file);
  const locate = (issues: readonly PathIssue[]): PolicyIssue[] =>
    issues.map((issue) => toPolicyIssue(issue, doc, lineCounter, file)).sort(byLine);
  if (data === null || data === undefined) {
    throw new PolicyError('KR_POLICY_INVALID', file, [
      {
        file,
        line: 1,
        column: 1,
        path: '',
        message: 'the policy is empty; it needs version, api, backends and keys',
      },
    ]);
  }
  return checkedPolicy(data, file, locate);
}

/**
 * The YAML stage of a policy-like file: its document (to locate issues by line) and its data.
 * Throws PolicyError (KR_POLICY_SYNTAX) on a syntax error or an alias bomb.
 */
export function parsePolicyYaml(
  text: string,
  file: string,
): { doc: Document; lineCounter: LineCounter; data: unknown } {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true, strict: true });
  const syntax = syntaxIssues(doc, file, lineCounter).sort(byLine);
  if (syntax.length > 0) throw new PolicyError('KR_POLICY_SYNTAX', file, syntax);
  try {
    return { doc, lineCounter, data: doc.toJS({ maxAliasCount: 100 }) };
  } catch (error) {
    // Only an alias bomb gets here (unresolved aliases were reported above).
    throw new PolicyError(
      'KR_POLICY_SYNTAX',
      file,
      [{ file, line: 1, column: 1, path: '', message: 'too many YAML aliases (more than 100 expansions)' }],
      error,
    );
  }
}

async function readCapped(file: string): Promise<Buffer> {
  // Read at most one byte past the cap instead of trusting stat: pipes and process
  // substitution (`--policy <(…)`) have no size, and the file may change between stat and read.
  let handle;
  try {
    handle = await open(file, 'r');
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const chunk = Buffer.alloc(64 * 1024);
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, null);
      if (bytesRead === 0) break;
      total += bytesRead;
      if (total > MAX_POLICY_BYTES) throw tooLarge(file);
      chunks.push(chunk.subarray(0, bytesRead));
    }
    return Buffer.concat(chunks, total);
  } catch (error) {
    if (error instanceof PolicyError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    throw new PolicyError(
      'KR_POLICY_UNREADABLE',
      file,
      [{ file, path: '', message: unreadableSentence(code) }],
      error,
    );
  } finally {
    await handle?.close();
  }
}

function unreadableSentence(code: string | undefined): string {
  switch (code) {
    case 'ENOENT':
      return 'cannot be read: no such file';
    case 'EACCES':
    case 'EPERM':
      return 'cannot be read: permission denied';
    case 'EISDIR':
      return 'cannot be read: it is a directory, not a policy file';
    default:
      return `cannot be read (${code ?? 'unknown error'})`;
  }
}

function tooLarge(file: string, size?: number): PolicyError {
  const actual = size === undefined ? 'more than 1 MiB' : `${size} bytes`;
  return new PolicyError('KR_POLICY_UNREADABLE', file, [
    {
      file,
      path: '',
      message: `is too large (${actual}); a policy may be at most 1 MiB, so it was not parsed`,
    },
  ]);
}

function toPolicyIssue(issue: PathIssue, doc: Document, lineCounter: LineCounter, file: string): PolicyIssue {
  const { line, column } = positionOf(doc, lineCounter, issue.path);
  // Sentences start with "must"/"is" because they follow a field path; the document itself has none.
  const message = issue.path.length === 0 ? `the policy ${issue.message}` : issue.message;
  return { file, line, column, path: formatPath(issue.path), message };
}

function byLine(a: PolicyIssue, b: PolicyIssue): number {
  return (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0);
}
