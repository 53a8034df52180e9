// The turn queues under acquire and wrap with maxWait, on a clock and timers of the test's own: a wait
// longer than a Node timer holds is reached in steps, and an aborted waiter leaves its queue at once.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect } from 'chai';
import { MAX_TIMER_MS, type Timers, type Turn, TurnQueues } from '../../../src/calls/turn-queues.js';
import { createLimiter, type Decision } from '../../../src/index.js';

const DAY = 86_400_000;

/** Timers that fire only when the test says so; `armed` lists the delays asked for. */
function manualTimers() {
  let now = 0;
  let next: { fn: () => void; at: number } | undefined;
  const armed: number[] = [];
  const timers: Timers = {
    now: () => now,
    setTimeout(fn, ms) {
      armed.push(ms);
      next = { fn, at: now + ms };
      return next;
    },
    clearTimeout(timer) {
      if (timer === next) next = undefined;
    },
  };
  return {
    timers,
    armed,
    /** Moves the clock to the armed timer and runs it. */
    fire() {
      const timer = next;
      if (timer === undefined) throw new Error('no timer armed');
      next = undefined;
      now = timer.at;
      timer.fn();
    },
  };
}

/** A real denial of a 30-day window and a real admission, from the memory store. */
async function monthDecisions(): Promise<{ denied: Decision; allowed: Decision }> {
  const l = createLimiter({
    rules: [{ name: 'month', key: 'ip', limit: 1, window: { type: 'fixed', size: '30d' } }],
  });
  const allowed = await l.consume('month', 'k');
  const denied = await l.consume('month', 'k');
  await l.close();
  return { denied, allowed };
}

function turn(attempt: Turn['attempt'], fields: Partial<Turn> = {}): Turn {
  return {
    id: 'month\0k',
    label: 'acquire on rule "month"',
    cost: 1,
    maxWaitMs: Number.POSITIVE_INFINITY,
    signal: undefined,
    maxQueue: 10_000,
    attempt,
    neverFits: () => undefined,
    key: 'k',
    slotRules: [],
    ...fields,
  };
}

/** Waiters that join the queue and are aborted; built here, so the test's own frame holds none of their signals. */
function abortedWaiters(queues: TurnQueues, count: number, denied: Decision) {
  const signals: WeakRef<AbortSignal>[] = [];
  const settled: Promise<unknown>[] = [];
  for (let i = 0; i < count; i++) {
    const controller = new AbortController();
    signals.push(new WeakRef(controller.signal));
    settled.push(queues.take(turn(async () => denied, { signal: controller.signal })).catch(() => 'aborted'));
    controller.abort();
  }
  return { signals, settled };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('turn queues', () => {
  it('sleeps past the longest Node timer in steps, trying the store again only at the retry time', async () => {
    const { denied, allowed } = await monthDecisions();
    const retryMs = denied.retryAfterMs as number;
    expect(retryMs).to.be.greaterThan(MAX_TIMER_MS);
    const clock = manualTimers();
    const queues = new TurnQueues(clock.timers);
    let tries = 0;
    const admitted = queues.take(turn(async () => (++tries === 1 ? denied : allowed)));
    await tick();
    expect(clock.armed).to.deep.equal([MAX_TIMER_MS]);
    clock.fire();
    await tick();
    expect(tries, 'a step of the sleep is no try').to.equal(1);
    expect(clock.armed).to.deep.equal([MAX_TIMER_MS, retryMs - MAX_TIMER_MS]);
    clock.fire();
    expect(await admitted).to.equal(allowed);
    expect(tries).to.equal(2);
  });

  it('refuses at once when the retry time is beyond maxWait, arming no timer', async () => {
    const { denied } = await monthDecisions();
    const clock = manualTimers();
    const queues = new TurnQueues(clock.timers);
    let tries = 0;
    const error = await queues
      .take(
        turn(
          async () => {
            tries++;
            return denied;
          },
          { maxWaitMs: 29 * DAY },
        ),
      )
      .then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    expect(error?.name).to.equal('RateLimitExceededError');
    expect(tries).to.equal(1);
    expect(clock.armed).to.deep.equal([]);
  });

  it('arms no timer for a try that comes back denied after the limiter closed', async () => {
    const { denied } = await monthDecisions();
    const clock = manualTimers();
    const queues = new TurnQueues(clock.timers);
    let answer: (decision: Decision) => void = () => undefined;
    const waiting = queues
      .take(turn(() => new Promise<Decision>((resolve) => (answer = resolve))))
      .catch((e: unknown) => e as Error);
    queues.close();
    expect(((await waiting) as Error).message).to.match(/limiter was closed/);
    answer(denied);
    await tick();
    expect(clock.armed).to.deep.equal([]);
  });

  it('lets go of 1,000 aborted waiters and their signals before the head gets its turn', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const { denied } = await monthDecisions();
    const clock = manualTimers();
    const queues = new TurnQueues(clock.timers);
    const head = queues.take(turn(async () => denied)).catch((e: unknown) => e);
    await tick();
    const { signals, settled } = abortedWaiters(queues, 1000, denied);
    expect(await Promise.all(settled)).to.deep.equal(Array(1000).fill('aborted'));
    // A WeakRef's target read in a job is kept until that job ends, and the last abort's reactions may still be
    // queued: three rounds of a turn and a full collection (a signal held for good stays held through all three).
    for (let round = 0; round < 3; round++) {
      await tick();
      gc();
    }
    expect(
      signals.filter((s) => s.deref() !== undefined),
      'signals still held',
    ).to.have.length(0);
    // The queue holds the head only: two more fit under maxQueue 3, a third does not.
    const more = [1, 2].map(() =>
      queues.take(turn(async () => denied, { maxQueue: 3 })).catch((e: unknown) => e),
    );
    const full = await queues
      .take(turn(async () => denied, { maxQueue: 3 }))
      .catch((e: unknown) => e as Error);
    expect((full as { code?: string }).code).to.equal('ERR_QUEUE_FULL');
    queues.close();
    for (const closed of await Promise.all([head, ...more]))
      expect((closed as Error).message).to.match(/closed/);
  });

  describe('waiting for a concurrency slot', () => {
    /** A real denial of a concurrency rule 'c' (one slot, leased a minute) and a real admission. */
    async function slotDecisions(): Promise<{ denied: Decision; allowed: Decision }> {
      const l = createLimiter({
        rules: [{ name: 'c', key: 'ip', limit: 1, window: { type: 'concurrency', lease: '1m' } }],
      });
      const allowed = await l.consume('c', 'k');
      const denied = await l.consume('c', 'k');
      await l.close();
      return { denied, allowed };
    }
    const slotTurn = (attempt: Turn['attempt'], fields: Partial<Turn> = {}) =>
      turn(attempt, { id: 'c\0k', slotRules: ['c'], ...fields });

    it('a free heard while the try is with the store: tried again at once when it comes back denied, no timer', async () => {
      const { denied, allowed } = await slotDecisions();
      const clock = manualTimers();
      const queues = new TurnQueues(clock.timers);
      let tries = 0;
      const admitted = queues.take(
        slotTurn(async () => {
          tries++;
          if (tries > 1) return allowed;
          // The slot frees (another process released it) after the store decided this try.
          queues.freed('c', 'k');
          return denied;
        }),
      );
      expect(await admitted).to.equal(allowed);
      expect(tries).to.equal(2);
      expect(clock.armed, 'it never slept').to.deep.equal([]);
    });

    it('sleeps until the soonest lease end, woken at once by a free of its rule and key, not of another', async () => {
      const { denied, allowed } = await slotDecisions();
      const clock = manualTimers();
      let slept = () => {};
      const queues = new TurnQueues(clock.timers, () => slept());
      let tries = 0;
      const asleep = new Promise<void>((resolve) => {
        slept = resolve;
      });
      const admitted = queues.take(slotTurn(async () => (++tries === 3 ? allowed : denied)));
      await asleep;
      await tick();
      // The lease end as the real denial saw it: 60,000 ms, or a millisecond or two less when the
      // clock moved between the admission and the denial on a busy machine.
      const leaseLeft = denied.retryAfterMs as number;
      expect(leaseLeft).to.be.within(59_000, 60_000);
      expect(clock.armed).to.deep.equal([leaseLeft]);
      queues.freed('c', 'other');
      queues.freed('other', 'k');
      await tick();
      expect(tries, 'another key or rule wakes nothing').to.equal(1);
      queues.freed('c', 'k');
      await tick();
      expect(tries).to.equal(2);
      // Denied again (another process took it): asleep again; '' (frees missed) wakes it too.
      queues.freed('', '');
      expect(await admitted).to.equal(allowed);
      expect(tries).to.equal(3);
    });

    it('does not refuse at once for the lease end past maxWait: waits up to maxWait, then one last try', async () => {
      const { denied } = await slotDecisions();
      const clock = manualTimers();
      const queues = new TurnQueues(clock.timers);
      let tries = 0;
      const refused = queues
        .take(
          slotTurn(
            async () => {
              tries++;
              return denied;
            },
            { maxWaitMs: 5_000 },
          ),
        )
        .then(
          () => undefined,
          (e: unknown) => e as Error,
        );
      await tick();
      expect(clock.armed).to.deep.equal([5_000]);
      clock.fire();
      const error = await refused;
      expect(error?.name).to.equal('RateLimitExceededError');
      expect(tries).to.equal(2);
    });
  });
});
