// Waiting for events instead of for a time: a store's calls still in flight (an outcome a response reports as
// it goes out), a server's responses still open, a condition that a timer or a subscription will make true.
import type { Server } from 'node:http';
import type { LimiterOptions, Store } from '../../src/index.js';

/**
 * For limiters whose test asserts what the store answered: a storeTimeout that no busy machine reaches by
 * accident, so that no decision is handed to the failure policy (a Redis that really hangs fails the test
 * at mocha's own timeout instead).
 */
export const PATIENT: Pick<LimiterOptions, 'storeTimeout'> & { storeTimeout: number } = {
  storeTimeout: 120_000,
};

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A store that knows its calls in flight, and `idle()`, resolving once none is left. */
export interface TrackedStore {
  store: Store;
  idle(): Promise<void>;
}

/**
 * Wraps `store`: every method is called on the store itself, and the promises it returns are kept until
 * they settle. `idle()` first lets the current turn's work start its calls (a report runs a few
 * continuations after the response ended), then waits until every call has settled, again and again
 * while settling them started more.
 */
export function trackStore(store: Store): TrackedStore {
  const inFlight = new Set<Promise<unknown>>();
  const wrapped = new Map<PropertyKey, unknown>();
  const proxy = new Proxy(store, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function' || prop === 'constructor') return value;
      let method = wrapped.get(prop);
      if (method === undefined) {
        method = (...args: unknown[]) => {
          const result: unknown = value.apply(target, args);
          if (result instanceof Promise) {
            inFlight.add(result);
            const forget = () => void inFlight.delete(result);
            result.then(forget, forget);
          }
          return result;
        };
        wrapped.set(prop, method);
      }
      return method;
    },
  });
  return {
    store: proxy,
    async idle() {
      for (;;) {
        await nextTurn();
        if (inFlight.size === 0) return;
        await Promise.allSettled([...inFlight]);
      }
    },
  };
}

/**
 * Follows `server`'s responses; the function returned resolves once every response it has seen is closed
 * (sent whole, or its connection gone): the adapters report outcomes from their response's end.
 */
export function trackResponses(server: Server): () => Promise<void> {
  const open = new Set<Promise<void>>();
  server.on('request', (_req, res) => {
    const closed = new Promise<void>((resolve) => res.once('close', () => resolve()));
    open.add(closed);
    void closed.then(() => open.delete(closed));
  });
  return async () => {
    while (open.size > 0) await Promise.all([...open]);
  };
}

/**
 * Polls `check` at short intervals until it holds: for a state that an event outside this process's view
 * brings about (a timer of the library, a subscription made on another connection). Throws naming `what`
 * after `timeoutMs`, a bound no busy machine reaches unless the event never comes.
 */
export async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`never happened within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
