import { printable } from '../audit/public/printable.ts';

/**
 * Renders rows as an aligned plain-text table (for terminals; `-o json` gives the data). Every cell
 * goes through `printable`: cells hold text read from backends and the cluster, and a control
 * character there must show as an escape, not move the cursor (audit/printable.ts).
 */
export function renderTable(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const shown = [headers, ...rows].map((row) => row.map(printable));
  const widths = headers.map((_, i) => Math.max(...shown.map((row) => (row[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => cell.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return shown.map(line).join('\n') + '\n';
}
