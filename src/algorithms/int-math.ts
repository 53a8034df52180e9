// Exact integer division for the bucket algorithms: all their state is whole numbers below 2^53.

/** floor(a / b) for integers, b > 0, exact (no floating-point rounding of the quotient). */
export function floorDiv(a: number, b: number): number {
  const r = a % b;
  return (a - (r < 0 ? r + b : r)) / b;
}

/** ceil(a / b) for integers, b > 0, exact. */
export function ceilDiv(a: number, b: number): number {
  return -floorDiv(-a, b);
}
