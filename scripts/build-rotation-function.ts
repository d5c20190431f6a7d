// The AWS-native rotation function's artifact (docs/aws-native.md): src/lambda/handler.ts bundled
// with every dependency into one ES module, `index.mjs` (the Lambda handler `index.handler`, Node 24
// runtime), zipped as dist/keyroll-aws-rotation.zip. One file and no splitting: Lambda loads the
// whole function at each cold start anyway, and the zip needs no node_modules. The policy is not in
// the zip: the platform team adds their policy.yaml beside index.mjs (or points KEYROLL_POLICY at
// another path), so one build serves every deployment.
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import { isBuiltin } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { zipSync } from 'fflate';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

export const ROTATION_ZIP = 'keyroll-aws-rotation.zip';

/** Builds `<distDir>/lambda/index.mjs` and `<distDir>/keyroll-aws-rotation.zip`; returns the zip's path. */
export async function buildRotationFunction(distDir: string): Promise<string> {
  const outfile = join(distDir, 'lambda', 'index.mjs');
  await mkdir(join(distDir, 'lambda'), { recursive: true });
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: ['src/lambda/handler.ts'],
    outfile,
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node24',
    metafile: true,
    logLevel: 'warning',
    legalComments: 'eof',
    // CommonJS dependencies call require() for Node's built-ins; an ES module has none of its own.
    banner: {
      js: "import { createRequire as __keyrollCreateRequire } from 'node:module'; const require = __keyrollCreateRequire(import.meta.url);",
    },
  });
  const stray = Object.values(result.metafile.outputs).flatMap((output) =>
    output.imports
      .filter((imported) => imported.external && !isBuiltin(imported.path))
      .map((imported) => imported.path),
  );
  if (stray.length > 0)
    throw new Error(
      `the rotation function would load ${[...new Set(stray)].join(', ')} at run time; Lambda has no node_modules for it`,
    );
  const zipPath = join(distDir, ROTATION_ZIP);
  // A fixed time: the same sources give the same zip, whenever it is built.
  const mtime = new Date('2026-01-01T00:00:00Z');
  await writeFile(
    zipPath,
    zipSync({ 'index.mjs': [new Uint8Array(await readFile(outfile)), { mtime }] }, { level: 9 }),
  );
  return zipPath;
}
