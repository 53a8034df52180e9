// Property tests: each algorithm against a small, obviously correct model, over random hits and clock steps.
import { expect } from 'chai';
import fc from 'fast-check';
import { createLimiter, type Decision, MemoryStore, type Rule } from '../../../src/index.js';

interface Hit {
  /** Ms since the previous hit. */
  gap: number;
  cost: number;
}

const hits = (maxCost: number) =>
  fc.array(
    fc.record({
      gap: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 4000 })),
      cost: fc.integer({ min: 1, max: maxCost }),
    }),
    {
      minLength: 1,
      maxLength: 60,
    },
  );

/** Runs hits through a fresh limiter with one rule; returns [time, cost, allowed] per hit. */
async function run(
  window: Rule['window'],
  limit: number,
  sequence: Hit[],
): Promise<Array<[number, number, boolean]>> {
  let now = 1_767_225_600_000;
  const limiter = createLimiter({
    store: new MemoryStore({ clock: () => now }),
    rules: [{ name: 'r', key: 'ip', limit, window }],
  });
  const out: Array<[number, number, boolean]> = [];
  for (const hit of sequence) {
    now += hit.gap;
    out.push([now, hit.cost, (await limiter.consume('r', 'k', hit.cost)).allowed]);
  }
  await limiter.close();
  return out;
}

const params = fc.record({
  limit: fc.integer({ min: 1, max: 12 }),
  sizeMs: fc.integer({ min: 1, max: 20 }).map((s) => s * 500),
});
/** GCRA rounds its stored time to whole µs; with these, size/limit is a whole number of µs and GCRA is exact. */
const exactParams = fc.record({
  limit: fc.constantFrom(1, 2, 4, 5, 8, 10),
  sizeMs: fc.integer({ min: 1, max: 20 }).map((s) => s * 500),
});

describe('properties: algorithms against reference models', () => {
  it('fixed window = the model "count from the first hit for size ms"', async () => {
    await fc.assert(
      fc.asyncProperty(params, hits(4), async ({ limit, sizeMs }, sequence) => {
        const got = await run({ type: 'fixed', size: `${sizeMs}ms` }, limit, sequence);
        let start = Number.NEGATIVE_INFINITY;
        let count = 0;
        for (const [t, cost, allowed] of got) {
          if (t >= start + sizeMs) {
            count = 0;
            start = Number.NEGATIVE_INFINITY;
          }
          const expected = count + cost <= limit;
          expect(allowed).to.equal(expected);
          if (expected) {
            if (count === 0) start = t;
            count += cost;
          }
        }
      }),
      { numRuns: 200 },
    );
  });

  it('sliding log = the model "sum of admitted costs in (t - size, t]"', async () => {
    await fc.assert(
      fc.asyncProperty(params, hits(4), async ({ limit, sizeMs }, sequence) => {
        const got = await run({ type: 'sliding-log', size: `${sizeMs}ms` }, limit, sequence);
        const admitted: Array<[number, number]> = [];
        for (const [t, cost, allowed] of got) {
          const used = admitted.filter(([at]) => at > t - sizeMs).reduce((sum, [, c]) => sum + c, 0);
          expect(allowed).to.equal(used + cost <= limit);
          if (allowed) admitted.push([t, cost]);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('sliding counter never admits more than limit in any window of size, and denies only what a window one bucket longer would', async () => {
    await fc.assert(
      fc.asyncProperty(
        params,
        fc.integer({ min: 1, max: 10 }),
        hits(4),
        async ({ limit, sizeMs }, buckets, sequence) => {
          const got = await run({ type: 'sliding', size: `${sizeMs}ms`, buckets }, limit, sequence);
          const width = sizeMs / buckets;
          const admitted: Array<[number, number]> = [];
          for (const [t, cost, allowed] of got) {
            const sum = (span: number) =>
              admitted.filter(([at]) => at > t - span).reduce((s, [, c]) => s + c, 0);
            if (allowed) {
              expect(sum(sizeMs) + cost, 'exact window').to.be.at.most(limit);
              admitted.push([t, cost]);
            } else {
              expect(sum(sizeMs + width) + cost, 'one bucket longer').to.be.greaterThan(limit);
            }
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('token bucket = the model "tokens refill at limit/size up to burst"', async () => {
    await fc.assert(
      fc.asyncProperty(
        params,
        fc.integer({ min: 1, max: 12 }),
        hits(4),
        async ({ limit, sizeMs }, burst, sequence) => {
          const got = await run({ type: 'token-bucket', size: `${sizeMs}ms`, burst }, limit, sequence);
          // Exact arithmetic in units of 1/limit tokens: refill is `elapsed` units per ms... scaled by sizeMs.
          let scaled = burst * sizeMs; // tokens × sizeMs
          let last = got[0]?.[0] ?? 0;
          for (const [t, cost, allowed] of got) {
            scaled = Math.min(burst * sizeMs, scaled + (t - last) * limit);
            last = t;
            expect(allowed).to.equal(scaled >= cost * sizeMs);
            if (allowed) scaled -= cost * sizeMs;
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('gcra admits exactly what the token bucket with the same limit, size and burst admits', async () => {
    await fc.assert(
      fc.asyncProperty(
        exactParams,
        fc.integer({ min: 1, max: 12 }),
        hits(4),
        async ({ limit, sizeMs }, burst, sequence) => {
          const a = await run({ type: 'gcra', size: `${sizeMs}ms`, burst }, limit, sequence);
          const b = await run({ type: 'token-bucket', size: `${sizeMs}ms`, burst }, limit, sequence);
          expect(a.map((x) => x[2])).to.deep.equal(b.map((x) => x[2]));
        },
      ),
      { numRuns: 200 },
    );
  });

  for (const type of ['fixed', 'sliding-log', 'sliding', 'token-bucket', 'gcra'] as const) {
    it(`${type}: remaining is exact and retryAfterMs is the exact wait`, async () => {
      await fc.assert(
        fc.asyncProperty(
          type === 'gcra' ? exactParams : params,
          hits(3),
          async ({ limit, sizeMs }, sequence) => {
            let now = 1_767_225_600_000;
            const limiter = createLimiter({
              store: new MemoryStore({ clock: () => now }),
              rules: [{ name: 'r', key: 'ip', limit, window: { type, size: `${sizeMs}ms` } }],
            });
            for (const hit of sequence) {
              now += hit.gap;
              const d = await limiter.consume('r', 'k', hit.cost);
              if (d.allowed) continue;
              const wait = d.retryAfterMs as number;
              if (hit.cost <= limit) {
                now += wait - 1;
                expect((await limiter.status('r', 'k')).remaining, 'one ms early').to.be.below(hit.cost);
                now += 1;
                expect((await limiter.status('r', 'k')).remaining, 'on time').to.be.at.least(hit.cost);
              }
            }
            // remaining R: exactly R unit hits at this instant pass, the next does not.
            const { remaining } = await limiter.status('r', 'k');
            for (let i = 0; i < remaining; i++)
              expect((await limiter.consume('r', 'k')).allowed).to.equal(true);
            expect((await limiter.consume('r', 'k')).allowed).to.equal(false);
            await limiter.close();
          },
        ),
        { numRuns: 150 },
      );
    });
  }

  it('concurrency = the model "held slots, each until released or its lease ends"', async () => {
    const steps = fc.array(
      fc.oneof(
        fc.record({ take: fc.integer({ min: 1, max: 3 }), gap: fc.integer({ min: 0, max: 4000 }) }),
        fc.record({ release: fc.nat(), gap: fc.integer({ min: 0, max: 4000 }) }),
      ),
      { minLength: 1, maxLength: 60 },
    );
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 6 }), steps, async (limit, sequence) => {
        let now = 1_767_225_600_000;
        const leaseMs = 10_000;
        const limiter = createLimiter({
          store: new MemoryStore({ clock: () => now }),
          rules: [{ name: 'r', key: 'ip', limit, window: { type: 'concurrency', lease: leaseMs } }],
        });
        const held: Array<{ decision: Decision; cost: number; untilMs: number; released: boolean }> = [];
        const live = () =>
          held.filter((h) => !h.released && h.untilMs > now).reduce((sum, h) => sum + h.cost, 0);
        for (const step of sequence) {
          now += step.gap;
          if ('take' in step && step.take > limit) {
            // More slots than the limit in one request can never be held: refused, nothing consumed.
            const refused = await limiter.consume('r', 'k', step.take).then(
              () => undefined,
              (error: unknown) => error,
            );
            expect(refused).to.have.property('code', 'ERR_COST');
          } else if ('take' in step) {
            const expected = live() + step.take <= limit;
            const decision = await limiter.consume('r', 'k', step.take);
            expect(decision.allowed).to.equal(expected);
            if (decision.allowed)
              held.push({ decision, cost: step.take, untilMs: now + leaseMs, released: false });
          } else if (held.length > 0) {
            const h = held[step.release % held.length] as (typeof held)[number];
            await limiter.release(h.decision);
            h.released = true;
          }
          expect((await limiter.status('r', 'k')).count).to.equal(live());
        }
        await limiter.close();
      }),
    );
  });
});
