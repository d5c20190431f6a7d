// The fault suite's reporter (issue 6): after the run, one table row per recorded fault case
// (test/faults/record.ts puts the figures in the test's meta) and, last, the summary line
// `N cases, L lost, K leaked, A alerted of F failures`. Used beside the default reporter:
//   vitest run --project faults --reporter=default --reporter=./test/faults/reporter.ts
// KEYROLL_FAULTS_JSON=<file> also writes the rows as JSON (for CI artifacts and reports).
import { writeFileSync } from 'node:fs';
import type { Reporter, TestCase, TestModule, Vitest } from 'vitest/node';
import type { FaultCase } from './record.ts';

export interface FaultRow extends FaultCase {
  /** The vitest verdict of the case's test: a case whose assertions failed is flagged. */
  test: 'passed' | 'failed' | 'skipped' | 'pending';
  module: string;
}

export interface FaultTotals {
  cases: number;
  lost: number;
  leaked: number;
  alerted: number;
  failures: number;
  /** Recorded cases whose test failed (an invariant assertion or the case itself). */
  testFailures: number;
}

export function faultRowsOf(modules: readonly TestModule[]): FaultRow[] {
  const rows: FaultRow[] = [];
  for (const module of modules) {
    for (const test of module.children.allTests()) {
      const row = rowOf(test, module);
      if (row) rows.push(row);
    }
  }
  return rows;
}

function rowOf(test: TestCase, module: TestModule): FaultRow | undefined {
  const recorded = test.meta().faultCase;
  if (!recorded) return undefined;
  return { ...recorded, test: test.result().state, module: module.relativeModuleId };
}

export function faultTotals(rows: readonly FaultRow[]): FaultTotals {
  const sum = (pick: (row: FaultRow) => number): number => rows.reduce((total, row) => total + pick(row), 0);
  return {
    cases: rows.length,
    lost: sum((row) => row.lost),
    leaked: sum((row) => row.leaked),
    alerted: sum((row) => row.alerted),
    failures: sum((row) => row.failures),
    testFailures: rows.filter((row) => row.test === 'failed').length,
  };
}

/** The line the issue asks the suite to end with. */
export function summaryLine(totals: FaultTotals): string {
  return `${totals.cases} cases, ${totals.lost} lost, ${totals.leaked} leaked, ${totals.alerted} alerted of ${totals.failures} failures`;
}

export function faultTable(rows: readonly FaultRow[]): string {
  const header = ['case', 'fault', 'result', 'lost', 'leaked', 'alerted'];
  const body = rows.map((row) => [
    row.test === 'failed' ? `${row.case} [TEST FAILED]` : row.case,
    row.fault,
    row.result,
    String(row.lost),
    String(row.leaked),
    `${row.alerted}/${row.failures}`,
  ]);
  const widths = header.map((title, column) =>
    Math.max(title.length, ...body.map((cells) => (cells[column] ?? '').length)),
  );
  const numeric = new Set([3, 4, 5]);
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, column) =>
        numeric.has(column) ? cell.padStart(widths[column] ?? 0) : cell.padEnd(widths[column] ?? 0),
      )
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((width) => '-'.repeat(width))), ...body.map(line)].join('\n');
}

export class FaultReporter implements Reporter {
  #vitest: Vitest | undefined;

  onInit(vitest: Vitest): void {
    this.#vitest = vitest;
  }

  onTestRunEnd(modules: readonly TestModule[]): void {
    const rows = faultRowsOf(modules);
    const totals = faultTotals(rows);
    const out = (text: string): void => {
      if (this.#vitest) this.#vitest.logger.log(text);
      else process.stdout.write(`${text}\n`);
    };
    out('');
    out('Fault matrix');
    if (rows.length > 0) out(faultTable(rows));
    if (totals.testFailures > 0)
      out(`${totals.testFailures} recorded case(s) failed their assertions (marked [TEST FAILED])`);
    out(summaryLine(totals));
    const jsonPath = process.env.KEYROLL_FAULTS_JSON;
    if (jsonPath) writeFileSync(jsonPath, `${JSON.stringify({ totals, rows }, null, 2)}\n`);
  }
}

// Vitest loads a custom reporter from its module's default export; the one default export here.
export default FaultReporter;
