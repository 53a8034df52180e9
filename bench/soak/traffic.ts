// The soak's traffic: each loop sends one request at a time, of a random kind, over the keys of its
// process (and a few every process shares), reporting outcomes for the recipes.
import type { SoakApp } from './app.js';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)] as T;

/**
 * Keys: a few hot ones every process shares (contention across processes) and many of the process's
 * own. Keys of rules that count outcomes (the recipes) belong to one process each, so their refunds
 * and clears are ordered with their admissions; the code recipe's global key is shared by design.
 */
export class KeySpace {
  constructor(readonly worker: number) {}

  client(): string {
    return Math.random() < 0.4
      ? pick(['hot-a', 'hot-b', 'hot-c'])
      : `w${this.worker}-c${Math.floor(Math.random() * 40)}`;
  }

  ip(): string {
    return Math.random() < 0.4
      ? pick(['10.0.0.1', '10.0.0.2'])
      : `10.${this.worker + 1}.0.${Math.floor(Math.random() * 30)}`;
  }

  /** The process's own address space for the recipes. */
  ownIp(): string {
    return `10.${this.worker + 101}.1.${Math.floor(Math.random() * 12)}`;
  }

  user(): string {
    return `w${this.worker}-u${Math.floor(Math.random() * 30)}`;
  }

  phone(): string {
    return `+1555${this.worker}${String(Math.floor(Math.random() * 200)).padStart(4, '0')}`;
  }

  serviceUser(): string {
    return Math.random() < 0.3
      ? pick(['svc-hot-a', 'svc-hot-b'])
      : `w${this.worker}-s${Math.floor(Math.random() * 40)}`;
  }
}

/** One request of a random kind (and its outcome, for the recipes). */
async function step(app: SoakApp, k: KeySpace): Promise<void> {
  const roll = Math.random();
  const api = (path: string) => ({ method: 'GET', path, ip: k.ip(), headers: { 'x-client': k.client() } });
  if (roll < 0.28) {
    await app.check(api('/api/items'));
  } else if (roll < 0.4) {
    await app.check(api('/api/search'));
  } else if (roll < 0.52) {
    await app.check(api('/api/feed'));
  } else if (roll < 0.62) {
    const body = { username: k.user() };
    const d = await app.check({ method: 'POST', path: '/login', ip: k.ownIp(), headers: {}, body });
    if (d.allowed) await app.report(d, Math.random() < 0.75 ? 'failure' : 'success');
  } else if (roll < 0.72) {
    const body = { phone: k.phone() };
    const d = await app.check({ method: 'POST', path: '/sms/code', ip: k.ownIp(), headers: {}, body });
    if (d.allowed) await app.report(d, Math.random() < 0.7 ? 'success' : 'failure');
  } else if (roll < 0.74) {
    await app.api.peek(api('/api/items'));
  } else {
    const rule = pick(['points-token', 'points-gcra', 'guard']);
    await app.consume(rule, k.serviceUser(), rule === 'points-token' ? 1 + Math.floor(Math.random() * 3) : 1);
  }
}

/** `sessions` loops of requests on `app`, each pausing 0 to 2 × thinkMs between two, until `stop()`. */
export class Traffic {
  #running = true;
  readonly done: Promise<void>;

  constructor(app: SoakApp, worker: number, sessions: number, thinkMs: number) {
    const keys = new KeySpace(worker);
    const loop = async () => {
      while (this.#running) {
        await step(app, keys);
        await sleep(Math.random() * 2 * thinkMs);
      }
    };
    this.done = Promise.all(Array.from({ length: sessions }, loop)).then(() => undefined);
  }

  /** Stops the loops; resolves once the requests in flight have ended. */
  stop(): Promise<void> {
    this.#running = false;
    return this.done;
  }
}
