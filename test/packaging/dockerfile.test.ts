// Static checks of the container image recipe. CI has no Docker engine, so these read the
// Dockerfile and .dockerignore and assert the properties the issue asks for: multi-stage, a
// pinned Node 24 base, no dependencies beside the bundle, a numeric non-root user, node (not npm)
// as the entry point, a read-only-root-friendly environment, and a build context that keeps
// tests, caches and secrets out.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { imageEnv, imageNodeFlags } from '../support/image-runtime.ts';
import { bundleOptions } from '../../scripts/build.ts';
import {
  copySources,
  envAssignments,
  execForm,
  parseDockerfile,
  type Instruction,
  type Stage,
} from '../../scripts/lib/dockerfile.ts';
import { isIgnored, parseDockerignore } from './dockerignore.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const dockerfile = parseDockerfile(readFileSync(`${root}Dockerfile`, 'utf8'));
const ignoreRules = parseDockerignore(readFileSync(`${root}.dockerignore`, 'utf8'));
const runtime = dockerfile.stages.at(-1)!;

const NODE_SLIM = /^node:24(?:\.\d+){0,2}-(?:bookworm|trixie)-slim(?:@sha256:[0-9a-f]{64})?$/;
const DISTROLESS = /^gcr\.io\/distroless\/nodejs24-debian1[23]:nonroot(?:@sha256:[0-9a-f]{64})?$/;

function only(stage: Stage, keyword: string): Instruction[] {
  return stage.instructions.filter((instruction) => instruction.keyword === keyword);
}

function lastOf(stage: Stage, keyword: string): Instruction {
  const found = only(stage, keyword).at(-1);
  if (found === undefined) throw new Error(`the ${stage.name ?? 'final'} stage has no ${keyword}`);
  return found;
}

/** The runtime stage and every stage it copies node_modules from: all the dependencies it ships. */
function stagesShippingDependencies(): Stage[] {
  const sources = only(runtime, 'COPY')
    .filter(
      (copy) =>
        copy.flags.from !== undefined && copySources(copy).some((source) => source.includes('node_modules')),
    )
    .map((copy) => copy.flags.from);
  return [
    runtime,
    ...dockerfile.stages.filter((stage) => stage.name !== undefined && sources.includes(stage.name)),
  ];
}

describe('Dockerfile parser', () => {
  it('joins continued lines and drops comment lines inside them', () => {
    const parsed = parseDockerfile('FROM a:1 AS one\nRUN echo 1 \\\n# inside\n  && echo 2\n');
    expect(parsed.stages[0]!.instructions).toEqual([
      { keyword: 'RUN', flags: {}, args: 'echo 1 && echo 2', line: 2 },
    ]);
  });

  it('expands a FROM image from the default of an ARG before the first FROM, as BuildKit does', () => {
    const parsed = parseDockerfile(
      'ARG BASE=node:24-bookworm-slim@sha256:abc\nFROM ${BASE} AS one\nFROM $BASE\n',
    );
    expect(parsed.stages.map((stage) => stage.image)).toEqual([
      'node:24-bookworm-slim@sha256:abc',
      'node:24-bookworm-slim@sha256:abc',
    ]);
    expect(() => parseDockerfile('FROM ${NOPE}\n')).toThrow(/no ARG default/);
  });

  it('separates --flags from arguments and reads the exec form as JSON', () => {
    const parsed = parseDockerfile(
      'FROM a:1\nCOPY --from=build /app/dist ./dist\nENTRYPOINT ["node", "x.js"]\n',
    );
    const [copy, entry] = parsed.stages[0]!.instructions;
    expect(copy!.flags).toEqual({ from: 'build' });
    expect(copySources(copy!)).toEqual(['/app/dist']);
    expect(execForm(entry!)).toEqual(['node', 'x.js']);
  });
});

describe('.dockerignore reader', () => {
  it('lets the last matching pattern win, negations included', () => {
    const rules = parseDockerignore('*\n!src\n**/*.test.ts\n');
    expect(isIgnored(rules, 'test/a.ts')).toBe(true);
    expect(isIgnored(rules, 'src/a.ts')).toBe(false);
    expect(isIgnored(rules, 'src/deep/a.test.ts')).toBe(true);
  });
});

describe('Dockerfile', () => {
  // Read here from the parsed file, not through test/support/image-runtime.ts: that is one of the things checked.
  const entrypointWords = execForm(lastOf(runtime, 'ENTRYPOINT')) ?? [];
  const entrypointFlags = entrypointWords.slice(1, entrypointWords.indexOf('/app/dist/cli/entry.js'));
  const runtimeEnv = Object.assign({}, ...only(runtime, 'ENV').map(envAssignments)) as Record<string, string>;
  it('builds in several stages, so the compiler and dev dependencies never reach the runtime image', () => {
    expect(dockerfile.stages.length).toBeGreaterThanOrEqual(2);
    const build = dockerfile.stages.find((stage) =>
      only(stage, 'RUN').some((run) => run.args.includes('npm run build')),
    );
    expect(build, 'a stage runs npm run build').toBeDefined();
    expect(build).not.toBe(runtime);
  });

  it('runs on a pinned Node 24 slim image (or distroless nodejs24 nonroot)', () => {
    expect(runtime.image).toSatisfy((image: string) => NODE_SLIM.test(image) || DISTROLESS.test(image));
    for (const stage of dockerfile.stages) {
      expect(stage.image, `stage ${stage.name ?? '?'} pins a Node 24 tag`).toMatch(
        /^(?:node:24[.-]|gcr\.io\/distroless\/nodejs24-)/,
      );
    }
  });

  it('takes every stage\'s base image from one NODE_IMAGE build arg, documented as "pin by digest" (issue 12 §7)', () => {
    const text = readFileSync(`${root}Dockerfile`, 'utf8');
    expect(dockerfile.preamble.filter((i) => i.keyword === 'ARG').map((i) => i.args.split('=')[0])).toEqual([
      'NODE_IMAGE',
    ]);
    expect(
      text
        .split('\n')
        .filter((line) => line.startsWith('FROM '))
        .map((line) => line.split(/\s+/)[1]),
    ).toEqual(['${NODE_IMAGE}', '${NODE_IMAGE}']);
    expect(text).toContain('Pin it by digest');
    expect(text).toContain('--build-arg NODE_IMAGE=node:24-bookworm-slim@sha256:<digest>');
    // No digest is written that was not read from the registry: the default is the bare tag.
    expect(dockerfile.preamble[0]?.args).toBe('NODE_IMAGE=node:24-bookworm-slim');
  });

  it('ships no node_modules and installs nothing in the runtime image: the bundle carries every dependency', () => {
    expect(stagesShippingDependencies(), 'no stage copies node_modules into the runtime image').toEqual([
      runtime,
    ]);
    const installs = only(runtime, 'RUN').filter((run) => /\bnpm (?:ci|install|i)\b/.test(run.args));
    expect(installs, 'the runtime stage runs no npm install').toEqual([]);
    const copied = only(runtime, 'COPY').flatMap(copySources);
    expect(copied.some((source) => source.includes('node_modules'))).toBe(false);
  });

  it('runs as a numeric non-root user', () => {
    const user = lastOf(runtime, 'USER').args;
    expect(user).toMatch(/^\d+(?::\d+)?$/);
    const [uid, gid] = user.split(':').map(Number);
    expect(uid).not.toBe(0);
    if (gid !== undefined) expect(gid).not.toBe(0);
  });

  it('starts the CLI with node directly (npm would swallow SIGTERM) and runs `run --policy` by default', () => {
    const entrypoint = execForm(lastOf(runtime, 'ENTRYPOINT'));
    expect(entrypoint, 'ENTRYPOINT uses the exec form').toBeDefined();
    expect(['node', '/nodejs/bin/node', '/usr/local/bin/node']).toContain(entrypoint![0]);
    expect(entrypoint).toContain('/app/dist/cli/entry.js');
    const cmd = execForm(lastOf(runtime, 'CMD'));
    expect(cmd).toEqual(['run', '--policy', '/etc/keyroll/policy.yaml']);
    expect([...entrypoint!, ...cmd!].some((word) => /\bnpm\b|\bnpx\b/.test(word))).toBe(false);
  });

  it('starts Node with the heap-size options only, each one Node documents for NODE_OPTIONS (no V8 tuning flags)', () => {
    expect(entrypointFlags).toEqual(['--max-semi-space-size=2', '--max-old-space-size=256']);
    for (const flag of entrypointFlags)
      expect(process.allowedNodeEnvironmentFlags.has(flag.split('=')[0]!), flag).toBe(true);
  });

  it('gives bin/keyroll the same Node options as the image, and the benchmarks measure with them', () => {
    const bin = readFileSync(`${root}bin/keyroll`, 'utf8');
    expect(bin).toContain(`node_flags="${entrypointFlags.join(' ')}"`);
    expect(imageNodeFlags(readFileSync(`${root}Dockerfile`, 'utf8'))).toEqual(entrypointFlags);
  });

  it('ships a compile cache made as the runtime runs: same node, ENTRYPOINT flags, user and paths', () => {
    const build = dockerfile.stages.find((stage) =>
      only(stage, 'RUN').some((run) => run.args.includes('warm-compile-cache.js')),
    );
    expect(build, 'a stage warms the compile cache').toBeDefined();
    expect(build!.image, 'the warming stage runs the runtime stage’s node').toBe(runtime.image);
    const warmIndex = build!.instructions.findIndex(
      (i) => i.keyword === 'RUN' && i.args.includes('warm-compile-cache.js'),
    );
    const warm = build!.instructions[warmIndex]!;
    const userThen = build!.instructions.slice(0, warmIndex).findLast((i) => i.keyword === 'USER')?.args;
    expect(userThen, 'warmed as the runtime user (Node keys the cache by user id)').toBe(
      lastOf(runtime, 'USER').args,
    );
    const command = /NODE_COMPILE_CACHE=(\S+) node (.*?) scripts\/warm-compile-cache\.js (\S+)/.exec(
      warm.args,
    );
    expect(command, warm.args).not.toBeNull();
    const [, cacheDir, warmFlags, distDir] = command!;
    expect(warmFlags?.split(' '), 'the ENTRYPOINT’s flags (Node keys the cache by V8 flags)').toEqual(
      entrypointFlags,
    );
    expect(distDir, 'the bundle at the path the runtime runs it from').toBe('/app/dist/cli');
    expect(warm.args, 'made readable by all: the runtime copy is root-owned').toMatch(
      /chmod -R a\+rX\S* \/compile-cache/,
    );
    expect(lastOf(build!, 'WORKDIR').args).toBe(lastOf(runtime, 'WORKDIR').args);
    const copy = only(runtime, 'COPY').find(
      (c) => c.flags.from === build!.name && copySources(c).includes(cacheDir!),
    );
    expect(copy, 'the runtime copies the cache').toBeDefined();
    const target = copy!.args.split(/\s+/).at(-1)!;
    expect(runtimeEnv.NODE_COMPILE_CACHE).toBe(
      target.startsWith('/') ? target : `${lastOf(runtime, 'WORKDIR').args}/${target.replace(/^\.\//, '')}`,
    );
  });

  it('limits glibc to two malloc arenas in the image and in bin/keyroll, and the benchmarks measure with that', () => {
    expect(runtimeEnv.MALLOC_ARENA_MAX).toBe('2');
    expect(readFileSync(`${root}bin/keyroll`, 'utf8')).toContain(
      'export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"',
    );
    expect(imageEnv(readFileSync(`${root}Dockerfile`, 'utf8'))).toMatchObject({
      NODE_ENV: 'production',
      MALLOC_ARENA_MAX: '2',
    });
  });

  it('points at the entry the bundler writes for src/cli/entry.ts, and copies that output from the build stage', () => {
    const options = bundleOptions(`${root}dist/cli`);
    expect(options.entryPoints).toEqual(['src/cli/entry.ts']);
    expect(existsSync(`${root}src/cli/entry.ts`)).toBe(true);
    expect(execForm(lastOf(runtime, 'ENTRYPOINT'))).toContain('/app/dist/cli/entry.js');
    const copiesDist = only(runtime, 'COPY').some(
      (copy) => copy.flags.from !== undefined && copySources(copy).includes('/app/dist'),
    );
    expect(copiesDist).toBe(true);
  });

  it('copies what the CLI reads at run time (package.json, config/) and no sources, tests or scripts', () => {
    const sources = only(runtime, 'COPY')
      .filter((copy) => copy.flags.from === undefined)
      .flatMap(copySources);
    expect(sources).toEqual(expect.arrayContaining(['package.json', 'config']));
    for (const unwanted of ['src', 'test', 'bin', 'scripts', '.', './'])
      expect(sources).not.toContain(unwanted);
  });

  it('sends HOME and TMPDIR to /tmp, the only writable place under a read-only root filesystem', () => {
    expect(runtimeEnv).toMatchObject({ HOME: '/tmp', TMPDIR: '/tmp', NODE_ENV: 'production' });
  });

  it('copies only files the build context holds, so .dockerignore and COPY agree', () => {
    for (const stage of dockerfile.stages) {
      for (const copy of only(stage, 'COPY').filter((instruction) => instruction.flags.from === undefined)) {
        for (const source of copySources(copy)) {
          expect(existsSync(`${root}${source}`), `${source} exists`).toBe(true);
          expect(
            isIgnored(ignoreRules, source.replace(/^\.\//, '')),
            `${source} (line ${copy.line}) is in the build context`,
          ).toBe(false);
        }
      }
    }
  });

  it('keeps tests, git metadata, dependencies, caches and secrets out of the build context', () => {
    const kept = ['package.json', 'package-lock.json', 'src/cli/entry.ts', 'config/emulator-seed.yaml'];
    const dropped = [
      'test/packaging/dockerfile.test.ts',
      '.git/config',
      'node_modules/zod/package.json',
      '.cache/vitest-report.json',
      '.env',
      'config/prod.env',
      'src/.env',
      'secrets/api-token',
      'config/secrets/token',
      'escrow/key_1.age',
      'tls/server.key',
      '.keyroll-demo/secrets/billing.json',
      'dist/cli/entry.js',
      'helm/keyroll/values.yaml',
    ];
    for (const path of kept) expect(isIgnored(ignoreRules, path), `${path} is kept`).toBe(false);
    for (const path of dropped) expect(isIgnored(ignoreRules, path), `${path} is left out`).toBe(true);
  });
});
