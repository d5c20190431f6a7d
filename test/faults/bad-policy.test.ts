// Generated bad input, the policy side: fast-check builds malformed policies (wrong types,
// unknown fields, bad cron, missing destinations, duplicate key ids, broken YAML, files past
// the 1 MiB cap, …), each from a valid policy broken in one way. Every one must be refused
// with a PolicyError whose issues name the file and a line (the line of the break), in a plain
// sentence that never echoes a literal secret. A sample also goes through the real CLI: exit 2,
// `file:line` on stderr, and nothing touched (no API call, no roll, no file, no alert).
//
// The cases repeat from run to run (a fixed seed); KEYROLL_FAULTS_SEED explores others, and a
// failing case's name carries its index and kind.
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EMULATOR_OPERATIONS } from '../../src/emulator/faults.ts';
import { loadPolicy, parsePolicy } from '../../src/policy/load.ts';
import { PolicyError, formatIssue, type PolicyIssue } from '../../src/policy/errors.ts';
import { findSecrets } from '../support/secret-scan.ts';
import { useTempDir } from '../support/temp-dir.ts';
import { recordCase } from './record.ts';
import {
  ALERT_URL_PLACEHOLDER,
  BASE_URL_PLACEHOLDER,
  badPolicy,
  hugePolicies,
  type BadPolicy,
} from './b-bad-policies.ts';
import { OWNER_TOKEN } from './b-child.ts';
import { faultSeed } from './b-budget.ts';
import { openWorld } from './b-world.ts';

const SEED = faultSeed();
const GENERATED = 220;
const CASES: BadPolicy[] = fc.sample(badPolicy, { seed: SEED, numRuns: GENERATED });
const HUGE = hugePolicies();
/** Every 22nd generated case and the first huge file also run through the CLI. */
const CLI_CASES: { index: number; bad: BadPolicy }[] = [
  ...CASES.map((bad, index) => ({ index, bad })).filter(({ index }) => index % 22 === 0),
  { index: GENERATED, bad: HUGE[0] as BadPolicy },
];

/** A sentence fit for an operator: one line, no serialized objects, no stack, no internals. */
function plainProblems(issue: PolicyIssue): string[] {
  const problems: string[] = [];
  const { message } = issue;
  if (message.trim() === '') problems.push('empty message');
  if (message.length > 400) problems.push(`message of ${message.length} characters`);
  if (/[\r\n]/.test(message)) problems.push('message spans lines');
  if (/\[object |ZodError|\bundefined\b|\bat .+:\d+:\d+|^\s*[[{]/.test(message))
    problems.push(`not a plain sentence: ${message}`);
  return problems;
}

async function refusal(file: string): Promise<PolicyError> {
  try {
    await loadPolicy(file);
  } catch (error) {
    if (error instanceof PolicyError) return error;
    throw error;
  }
  throw new Error(`the loader accepted ${file}`);
}

function withinAny(line: number | undefined, ranges: readonly [number, number][]): boolean {
  return line !== undefined && ranges.some(([from, to]) => line >= from && line <= to);
}

describe(`malformed policies, generated (seed ${SEED}): the loader refuses each with file:line`, () => {
  const dir = useTempDir('keyroll-bad-policy-', 'file');

  it(`generates at least 200 malformed policies of many kinds`, () => {
    expect(CASES.length + HUGE.length).toBeGreaterThanOrEqual(200);
    const kinds = new Set(CASES.map((bad) => bad.kind.split(' at ')[0]?.split(':')[0]));
    expect(kinds.size).toBeGreaterThanOrEqual(15);
  });

  for (const [index, bad] of [...CASES, ...HUGE].entries()) {
    it(`#${index} ${bad.kind}`, async (ctx) => {
      const file = join(dir.path(), `case-${index}.yaml`);
      await writeFile(file, bad.text);
      const error = await refusal(file);
      const texts = [error.message, ...error.issues.map(formatIssue)];
      const echoed = bad.mustNotEcho === undefined ? 0 : findSecrets(texts, [bad.mustNotEcho]).leaked;
      recordCase(ctx, {
        case: `policy #${index}: ${bad.kind}`,
        fault: `malformed policy: ${bad.kind}`,
        backend: 'policy',
        step: 'run',
        result: 'skipped',
        lost: 0,
        leaked: echoed,
        alerted: 0,
        failures: 0,
      });

      // The break, not the rest of the file, is what the loader refuses.
      expect(() => parsePolicy(bad.validText, 'valid.yaml')).not.toThrow();
      expect(error.code).toBe(bad.code);
      expect(error.issues.length).toBeGreaterThan(0);
      const lines = bad.text.split('\n').length;
      for (const issue of error.issues) {
        expect(issue.file).toBe(file);
        expect(plainProblems(issue)).toEqual([]);
        if (bad.lines === undefined) continue;
        expect(issue.line, formatIssue(issue)).toBeGreaterThanOrEqual(1);
        expect(issue.line, formatIssue(issue)).toBeLessThanOrEqual(lines + 1);
        expect(formatIssue(issue).startsWith(`${file}:${String(issue.line)}`)).toBe(true);
      }
      if (bad.lines === undefined) {
        // Past the cap the file is not parsed at all: one issue for the whole file.
        expect(error.issues).toEqual([
          expect.objectContaining({ file, message: expect.stringContaining('too large') as unknown }),
        ]);
      } else {
        expect(
          error.issues.some((issue) => withinAny(issue.line, bad.lines ?? [])),
          `an issue on lines ${JSON.stringify(bad.lines)}; got ${error.issues.map(formatIssue).join(' | ')}`,
        ).toBe(true);
      }
      expect(echoed, 'a literal secret echoed in a message').toBe(0);
    });
  }
});

describe('malformed policies through the CLI: exit 2, file:line on stderr, nothing touched', () => {
  for (const { index, bad } of CLI_CASES) {
    it(`#${index} ${bad.kind}`, async (ctx) => {
      const world = await openWorld();
      try {
        // Same line count: the placeholders are single-line values.
        const text = bad.text
          .replaceAll(BASE_URL_PLACEHOLDER, world.emulator.url)
          .replaceAll(ALERT_URL_PLACEHOLDER, `${world.receiver.url}/alerts`);
        await world.writeFile('policy.yaml', text);
        const result = await world.run(['run', '--policy', 'policy.yaml'], { killAfterMs: 60_000 });
        const calls = EMULATOR_OPERATIONS.reduce(
          (total, operation) => total + world.emulator.state.callCount(operation),
          0,
        );
        const leaks = findSecrets(world.haystacks(), [
          ...world.emulator.state.mintedSecrets(),
          OWNER_TOKEN,
          ...(bad.mustNotEcho ? [bad.mustNotEcho] : []),
        ]);
        recordCase(ctx, {
          case: `policy via CLI #${index}: ${bad.kind}`,
          fault: `malformed policy: ${bad.kind}`,
          backend: 'cli',
          step: 'run',
          result: 'skipped',
          lost: 0,
          leaked: leaks.leaked,
          alerted: 0,
          failures: 0,
        });

        expect(result.code, result.stderr).toBe(2);
        expect(result.stderr).toMatch(
          bad.lines === undefined ? /^keyroll: policy\.yaml: / : /^keyroll: policy\.yaml:\d+[ :]/,
        );
        expect(result.stdout).toBe('');
        expect(world.emulator.state.totalRolls()).toBe(0);
        expect(calls, 'API calls').toBe(0);
        expect(world.receiver.requests).toEqual([]);
        expect(await readdir(world.dir)).toEqual(['policy.yaml']);
        expect(leaks.hits).toEqual([]);
      } finally {
        await world.close();
      }
    });
  }
});
