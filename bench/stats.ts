// Small statistics over repetitions: medians, percentiles, ratios.

/** Median of the finite values; NaN when there are none. */
export function median(values: readonly number[]): number {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  const n = sorted.length;
  if (n === 0) return Number.NaN;
  const mid = n >> 1;
  return n % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** The p-th percentile (0..100, nearest rank) of the first `count` entries of `samples`; sorts them in place. */
export function percentile(samples: Float64Array, count: number, p: number): number {
  if (count === 0) return Number.NaN;
  const view = samples.subarray(0, count).sort();
  const rank = Math.min(count - 1, Math.max(0, Math.ceil((p / 100) * count) - 1));
  return view[rank] as number;
}

/** Median of the per-repetition ratios a[i] / b[i]: pairs measured side by side cancel slow drifts. */
export function pairedRatio(values: readonly number[], baselines: readonly number[]): number {
  const ratios: number[] = [];
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    const base = baselines[i];
    if (value !== undefined && base !== undefined && base > 0) ratios.push(value / base);
  }
  return median(ratios);
}

/** Half the range of the values relative to their median, e.g. 0.08 for "within +-8%". */
export function spread(values: readonly number[]): number {
  const finite = values.filter(Number.isFinite);
  if (finite.length < 2) return Number.NaN;
  return (Math.max(...finite) - Math.min(...finite)) / 2 / median(finite);
}
