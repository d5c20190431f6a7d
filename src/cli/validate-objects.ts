// `keyroll validate <dir>`: a directory of keyroll.io objects (RotatedKey, KeyStore,
// ClusterKeyStore, ClusterKeyApi) checked with the same zod schemas the CRDs are generated from,
// offline: each problem with its file:line, object and field, exit 2, as for the policy file.
// A team runs it in CI before Argo CD applies the directory; the API server refuses the same
// objects (docs/crds.md), but only at apply time.
import { printableJson, terminalLine } from '../audit/public/printable.ts';
import { UsageError } from '../errors.ts';
import { readObjectDirectory, type ObjectDirectory } from '../crd/public/kinds/read-objects.ts';
import { exitForError } from './common.ts';
import { ExitCode } from './exit-codes.ts';

export async function validateObjectsCommand(dir: string, output: 'text' | 'json'): Promise<number> {
  let read: ObjectDirectory;
  try {
    read = await readObjectDirectory(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error';
    return exitForError(new UsageError(`cannot read the directory ${dir} (${code})`, { cause: error }));
  }
  const counts = new Map<string, number>();
  for (const object of read.objects) counts.set(object.kind, (counts.get(object.kind) ?? 0) + 1);
  const summary = [...counts].map(([kind, count]) => `${String(count)} ${kind}`).join(', ') || 'no objects';
  if (output === 'json') {
    process.stdout.write(
      `${printableJson({ directory: dir, objects: read.objects.length, issues: read.issues }, 2)}\n`,
    );
  } else {
    for (const issue of read.issues)
      process.stderr.write(
        terminalLine`${issue.file}:${String(issue.line)} ${issue.object}${issue.field === '' ? '' : ` ${issue.field}`}: ${issue.message}\n`,
      );
    if (read.issues.length === 0) process.stdout.write(terminalLine`ok    objects ${dir} — ${summary}\n`);
  }
  return read.issues.length === 0 ? ExitCode.ok : ExitCode.config;
}
