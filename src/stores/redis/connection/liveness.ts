// Whether a Redis client is slow or gone: its first connection still being made, and how long its calls have waited unanswered.
import { performance } from 'node:perf_hooks';
import type { ConnectionLiveness } from '../../store.js';
import type { ClientEvents } from './faults.js';

/** How one client library shows its connection: the events it emits and whether the first one is underway. */
export interface ConnectionSignals {
  /** Events that carry a connection error (the first connection failed when one comes before ready). */
  readonly errors: readonly string[];
  /** Events that mean the client can send now. */
  readonly ready: readonly string[];
  /** True while the client is making a connection and could not send yet (read when asked, not cached). */
  connecting(): boolean;
  /** True when the client can send now. */
  isReady(): boolean;
}

const watched = new WeakMap<object, ClientLiveness>();

/** Calls outstanding on one node, and since when none of them was answered. */
interface NodeCalls {
  outstanding: number;
  silentSinceMs: number;
}

/**
 * A client's liveness, shared by every store on that client. Two things tell a slow Redis from a
 * failed one without a timer of their own:
 * - the first connection: until it is ready, or has failed, decisions wait for it rather than being
 *   sent into a client that would refuse them (a fail-fast client) or hold them in its own queue;
 * - answers: while calls are outstanding on a node, the time since that node last answered any of
 *   them (or since the first of them was sent, when none was outstanding before). Replies arriving for
 *   calls sent earlier mean Redis is working through this process's pipeline: a call behind them is
 *   waiting its turn, not lost. An error reply (`NOSCRIPT`, `OOM`) is an answer too; a refusal of the
 *   client is not. On a Cluster each master is watched on its own, so that one lost master is not
 *   hidden by the others' answers; the store is as silent as its most silent node.
 */
export class ClientLiveness implements ConnectionLiveness {
  readonly #signals: ConnectionSignals;
  readonly #explain: (error: unknown) => unknown;
  /** Once ready, or once a connection attempt failed, this client is never waited for again. */
  #settled: boolean;
  #waiters: Array<{ resolve(): void; reject(error: unknown): void }> = [];
  #firstConnection: Promise<void> | undefined;
  /** By node ('' off a Cluster, or where the node is not known). */
  readonly #nodes = new Map<string, NodeCalls>();

  private constructor(
    client: ClientEvents,
    signals: ConnectionSignals,
    explain: (error: unknown) => unknown,
  ) {
    this.#signals = signals;
    this.#explain = explain;
    this.#settled = signals.isReady();
    const on = typeof client.on === 'function' ? client.on.bind(client) : () => {};
    for (const name of signals.ready) on(name, () => this.#settle(undefined));
    for (const name of signals.errors)
      on(name, (error: never) => this.#settle(error ?? new Error('the connection ended')));
  }

  /**
   * The liveness of `client`, listened to once however many stores share it. `explain` names a
   * connection fault as the store reports it (see `ConnectionFaults.explain`).
   */
  static of(
    client: ClientEvents,
    signals: ConnectionSignals,
    explain: (error: unknown) => unknown,
  ): ClientLiveness {
    let liveness = watched.get(client);
    if (liveness === undefined) {
      liveness = new ClientLiveness(client, signals, explain);
      watched.set(client, liveness);
    }
    return liveness;
  }

  connecting(): Promise<void> | undefined {
    if (this.#settled) return undefined;
    if (this.#signals.isReady()) {
      this.#settle(undefined);
      return undefined;
    }
    // Not connecting (never asked to, or between attempts): the call is sent, and the client decides.
    if (!this.#signals.connecting()) return undefined;
    this.#firstConnection ??= new Promise<void>((resolve, reject) => this.#waiters.push({ resolve, reject }));
    return this.#firstConnection;
  }

  silentSinceMs(): number | undefined {
    let since: number | undefined;
    for (const calls of this.#nodes.values())
      if (calls.outstanding > 0 && (since === undefined || calls.silentSinceMs < since))
        since = calls.silentSinceMs;
    return since;
  }

  /**
   * `call`, just sent to `node`, counted as outstanding until it settles; its answer, if Redis gave
   * one (`isAnswer` says which errors are), as a sign of that node's life.
   */
  track<T>(call: Promise<T>, isAnswer: (error: unknown) => boolean, node = ''): Promise<T> {
    let calls = this.#nodes.get(node);
    if (calls === undefined) {
      calls = { outstanding: 0, silentSinceMs: 0 };
      this.#nodes.set(node, calls);
    }
    const counted = calls;
    if (counted.outstanding++ === 0) counted.silentSinceMs = performance.now();
    return call.then(
      (value) => {
        answered(counted);
        return value;
      },
      (error: unknown) => {
        if (isAnswer(error)) answered(counted);
        else counted.outstanding--;
        throw error;
      },
    );
  }

  /** The first connection is ready (`error` undefined) or has failed: waiters go on, and it is never waited for again. */
  #settle(error: unknown): void {
    if (this.#settled) return;
    this.#settled = true;
    const waiters = this.#waiters;
    this.#waiters = [];
    this.#firstConnection = undefined;
    const explained = error === undefined ? undefined : this.#explain(error);
    for (const waiter of waiters) {
      if (explained === undefined) waiter.resolve();
      else waiter.reject(explained);
    }
  }
}

function answered(calls: NodeCalls): void {
  calls.outstanding--;
  calls.silentSinceMs = performance.now();
}
