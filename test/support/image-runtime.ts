// What the Docker image's runtime stage runs keyroll with, read from the repository's Dockerfile:
// the Node flags of its exec-form ENTRYPOINT and the environment of its ENV. Shared by the
// benchmarks (bench/lib/cli.ts runs dist/ as the image does, so the figures are of what the image
// runs) and the packaging tests (test/packaging/), which check the same reading.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { envAssignments, execForm, parseDockerfile, type Stage } from '../../scripts/lib/dockerfile.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

let dockerfileText: string | undefined;
/** The repository's Dockerfile, read once per process (every run of dist/ needs its flags and ENV). */
function ourDockerfile(): string {
  dockerfileText ??= readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  return dockerfileText;
}

function runtimeStage(dockerfile: string): Stage {
  const stage = parseDockerfile(dockerfile).stages.at(-1);
  if (stage === undefined) throw new Error('the Dockerfile has no FROM');
  return stage;
}

/** The node options between `node` and the entry in the Dockerfile's exec-form ENTRYPOINT. */
export function imageNodeFlags(dockerfile = ourDockerfile()): string[] {
  const entrypoint = runtimeStage(dockerfile).instructions.findLast((i) => i.keyword === 'ENTRYPOINT');
  const words = entrypoint === undefined ? undefined : execForm(entrypoint);
  const entry = words?.findIndex((word) => word.endsWith('/dist/cli/entry.js')) ?? -1;
  if (words?.[0] !== 'node' || entry < 1)
    throw new Error(`unexpected ENTRYPOINT: ${entrypoint?.args ?? '(none)'}`);
  return words.slice(1, entry);
}

/**
 * The environment the image's runtime stage sets (ENV), except HOME and TMPDIR, which name
 * places in the image's file system: MALLOC_ARENA_MAX, NODE_ENV and NODE_COMPILE_CACHE change how
 * keyroll runs (bench/lib/cli.ts's runCli points the last at this machine's cache).
 */
export function imageEnv(dockerfile = ourDockerfile()): Record<string, string> {
  const assignments = runtimeStage(dockerfile)
    .instructions.filter((i) => i.keyword === 'ENV')
    .flatMap((i) => Object.entries(envAssignments(i)));
  return Object.fromEntries(assignments.filter(([name]) => name !== 'HOME' && name !== 'TMPDIR'));
}
