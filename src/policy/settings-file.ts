// The daemon's policy file when its keys come from keyroll.io objects (`keyroll daemon
// --keys-from kubernetes`, issue 31): what the platform team sets for every key and the objects
// do not say (alerts, escrow, intake, consumers) and which ClusterKeyApi this keyroll rotates
// with. Keys, backends and the API are objects then; a file that still names them is refused
// with a pointer, so nobody believes a key of the file is rotated. Read and located as the policy
// file is (same YAML rules, same schemas of each section, errors with file:line).
import { readFile } from 'node:fs/promises';
import { LineCounter, parseDocument } from 'yaml';
import { z } from 'zod';
import { PolicyError, type PolicyIssue } from './errors.ts';
import { describeZodIssues, type PathIssue } from './issue-text.ts';
import { formatPath, positionOf } from './locate.ts';
import { MAX_POLICY_BYTES } from './load.ts';
import { PolicyDocument } from './schema.ts';
import { syntaxIssues } from './yaml-syntax.ts';

export const SharedSettingsFile = z
  .strictObject({
    $schema: PolicyDocument.shape.$schema,
    version: PolicyDocument.shape.version,
    keyApi: z
      .string()
      .min(1)
      .optional()
      .describe(
        'The ClusterKeyApi whose keys this daemon rotates; absent: the only ClusterKeyApi in the cluster.',
      ),
    alerts: PolicyDocument.shape.alerts,
    escrow: PolicyDocument.shape.escrow,
    intake: PolicyDocument.shape.intake,
    consumers: PolicyDocument.shape.consumers,
  })
  .meta({ title: 'keyroll daemon settings (keys from keyroll.io objects)' });
export type SharedSettingsFile = z.infer<typeof SharedSettingsFile>;

/** Sections of a policy file that are objects in this mode, and what each became. */
const NOW_OBJECTS: Record<string, string> = {
  api: 'the API is a ClusterKeyApi (name it with keyApi)',
  backends: 'backends are KeyStores and ClusterKeyStores',
  keys: 'keys are RotatedKey objects',
  defaults: 'each RotatedKey says its own settings',
};

/** Reads and checks the settings file at `file`. Throws PolicyError, as loadPolicy does. */
export async function loadSharedSettings(file: string): Promise<SharedSettingsFile> {
  let text: string;
  try {
    const bytes = await readFile(file);
    if (bytes.length > MAX_POLICY_BYTES)
      throw new PolicyError('KR_POLICY_UNREADABLE', file, [
        { file, path: '', message: 'is too large; a policy may be at most 1 MiB, so it was not parsed' },
      ]);
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch (error) {
    if (error instanceof PolicyError) throw error;
    const code = (error as NodeJS.ErrnoException).code ?? 'not UTF-8 text';
    throw new PolicyError(
      'KR_POLICY_UNREADABLE',
      file,
      [{ file, path: '', message: `cannot be read (${code})` }],
      error,
    );
  }
  return parseSharedSettings(text, file);
}

export function parseSharedSettings(text: string, file: string): SharedSettingsFile {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true, strict: true });
  const syntax = syntaxIssues(doc, file, lineCounter);
  if (syntax.length > 0) throw new PolicyError('KR_POLICY_SYNTAX', file, syntax);
  const located = (issues: readonly PathIssue[]): PolicyIssue[] =>
    issues.map((issue) => {
      const { line, column } = positionOf(doc, lineCounter, issue.path);
      return { file, line, column, path: formatPath(issue.path), message: issue.message };
    });
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 }) ?? {};
  } catch (error) {
    // Only an alias bomb gets here (unresolved aliases were reported above), as in load.ts.
    throw new PolicyError(
      'KR_POLICY_SYNTAX',
      file,
      [{ file, line: 1, column: 1, path: '', message: 'too many YAML aliases (more than 100 expansions)' }],
      error,
    );
  }
  if (typeof data === 'object' && data !== null) {
    const misplaced = Object.keys(NOW_OBJECTS).filter((section) => Object.hasOwn(data, section));
    if (misplaced.length > 0)
      throw new PolicyError(
        'KR_POLICY_INVALID',
        file,
        located(
          misplaced.map((section) => ({
            path: [section],
            message: `is not read when keys come from keyroll.io objects: ${NOW_OBJECTS[section] ?? ''} (docs/crds.md)`,
          })),
        ),
      );
  }
  const parsed = SharedSettingsFile.safeParse(data);
  if (!parsed.success)
    throw new PolicyError(
      'KR_POLICY_INVALID',
      file,
      located(describeZodIssues(parsed.error.issues, data, SharedSettingsFile)),
    );
  return parsed.data;
}
