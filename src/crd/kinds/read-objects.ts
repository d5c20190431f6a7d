// Reads a directory of keyroll.io objects (the YAML a team keeps in Git for Argo CD or Flux) and
// checks each with the kinds' zod schemas: what `keyroll validate <dir>` prints, each problem with
// its file, line and field, as validate does for the policy file. Documents of other groups (a
// Namespace, a Deployment beside the keys) are skipped: a GitOps directory holds them too.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { LineCounter, parseAllDocuments } from 'yaml';
import { formatPath, positionOf } from '../../policy/public/locate.ts';
import { GROUP } from './common.ts';
import { KeyrollObject } from './kinds.ts';

export interface ObjectIssue {
  /** The file, as joined from the directory given. */
  file: string;
  line: number;
  /** `RotatedKey billing/billing-api`, or the document's index when it names no kind or name. */
  object: string;
  /** `spec.destinations.0.path`; empty for the object as a whole. */
  field: string;
  message: string;
}

export interface ObjectDirectory {
  objects: KeyrollObject[];
  issues: ObjectIssue[];
}

const YAML_FILE = /\.ya?ml$/;

/** Every keyroll.io object in the YAML files of `dir` (not its subdirectories), checked. */
export async function readObjectDirectory(dir: string): Promise<ObjectDirectory> {
  const names = (await readdir(dir)).filter((name) => YAML_FILE.test(name)).sort();
  const result: ObjectDirectory = { objects: [], issues: [] };
  for (const name of names) {
    const file = join(dir, name);
    const lineCounter = new LineCounter();
    const documents = parseAllDocuments(await readFile(file, 'utf8'), { lineCounter });
    for (const [index, doc] of (Array.isArray(documents) ? documents : [documents]).entries()) {
      const at = (path: readonly (string | number)[]): number => positionOf(doc, lineCounter, [...path]).line;
      if (doc.errors.length > 0) {
        const [error] = doc.errors;
        result.issues.push({
          file,
          line: error?.linePos?.[0].line ?? 1,
          object: `document ${String(index + 1)}`,
          field: '',
          message: `is not valid YAML: ${error?.code ?? 'syntax error'}`,
        });
        continue;
      }
      const value: unknown = doc.toJS();
      if (!isKeyrollDocument(value)) continue;
      const parsed = KeyrollObject.safeParse(value);
      if (parsed.success) {
        result.objects.push(parsed.data);
        continue;
      }
      const object = describeObject(value, index);
      for (const issue of parsed.error.issues) {
        const path = issue.path.filter((segment) => typeof segment !== 'symbol');
        result.issues.push({ file, line: at(path), object, field: formatPath(path), message: issue.message });
      }
    }
  }
  return result;
}

function isKeyrollDocument(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const apiVersion = (value as Record<string, unknown>)['apiVersion'];
  return typeof apiVersion === 'string' && apiVersion.startsWith(`${GROUP}/`);
}

function describeObject(value: Record<string, unknown>, index: number): string {
  const metadata = value['metadata'] as { name?: unknown; namespace?: unknown } | undefined;
  const kind = typeof value['kind'] === 'string' ? value['kind'] : `document ${String(index + 1)}`;
  const name = typeof metadata?.name === 'string' ? metadata.name : '(no name)';
  return `${kind} ${typeof metadata?.namespace === 'string' ? `${metadata.namespace}/` : ''}${name}`;
}
