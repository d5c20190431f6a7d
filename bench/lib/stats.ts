// Order statistics for the figures: nearest-rank percentiles, so p99 of 200 samples is a sample
// that was actually measured (the 198th smallest), never an interpolation between two.

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) throw new RangeError('percentile of no values');
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] as number;
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/** Rounds for the table and the JSON: figures are quoted to a sensible precision, not to 15 digits. */
export function round(value: number, digits = 2): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}
