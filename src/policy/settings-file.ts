// The daemon's policy file when its keys come from keyroll.io objects (`keyroll daemon
// --keys-from kubernetes`, issue 31): what the platform team sets for every key and the objects
// do not say (alerts, escrow, intake, consumers) and which ClusterKeyApi this keyroll rotates
// with. Keys, backends and the API are objects then; a file that still names them is refused
// with a pointer, so nobody believes a key of the file is rotated. Read and located as the policy
// file is (same YAML rules, same schemas of each section, errors with file:line).
import { z } from 'zod';
import { PolicyError, type PolicyIssue } from './errors.ts';
import { describeZodIssues, type PathIssue } from './issue-text.ts';
import { formatPath, positionOf } from './locate.ts';
import { parsePolicyYaml, readPolicyText } from './load.ts';
import { PolicyDocument } from './schema.ts';

export const SharedSettingsFile = z
  .strictObject({
    $schema: PolicyDocument.shape.$schema,
    version: PolicyDocument.shape.version,
    keyApi: z
      .string()
      .min(1)
      .optional()
      .describe(
        "The ClusterKeyApi whose keys this daemon rotates; absent: the only ClusterKeyApi in the cluster. Also which RotatedKeys are this install's: those naming it (a missing one included); a RotatedKey naming another ClusterKeyApi is another keyroll install's, left alone (no status, no audit). Set it whenever two installs share a cluster.",
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
  return parseSharedSettings(await readPolicyText(file), file);
}

export function parseSharedSettings(text: string, file: string): SharedSettingsFile {
  const yaml = parsePolicyYaml(text, file);
  const { doc, lineCounter } = yaml;
  const data: unknown = yaml.data ?? {};
  const located = (issues: readonly PathIssue[]): PolicyIssue[] =>
    issues.map((issue) => {
      const { line, column } = positionOf(doc, lineCounter, issue.path);
      return { file, line, column, path: formatPath(issue.path), message: issue.message };
    });
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
