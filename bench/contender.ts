// The uniform shape every benchmarked limiter takes: create it for a limit, then ask decide(key).

import { Redis } from 'ioredis';

export type StoreKind = 'redis' | 'memory';
/** `floor` contenders are the ratio denominators; `ratekeeper` ones are ours. */
export type ContenderGroup = 'floor' | 'peer' | 'ratekeeper';
/** Core scenarios: 10k distinct keys all admitted, or one hot key far over its limit. */
export type CoreScenario = 'distinct' | 'hot';

/** The one rule every contender is configured with. */
export interface LimitSpec {
  /** Admissions per window per key. */
  limit: number;
  windowMs: number;
}

export interface ContenderContext {
  /** Port of the benchmark's Redis on 127.0.0.1 (redis contenders only). */
  redisPort: number;
  /**
   * Key prefix of this instance, ending in ':': unique per instance, shared by the processes of one
   * exactness race. Libraries that add their own separator get it without the ':' (see namespace()).
   * Absent: the library's default prefix, where one instance at a time uses the server (so that
   * bytes per key are those of the keys the library writes by default).
   */
  prefix?: string;
}

/** One configured limiter. `decide` resolves true when admitted; it rejects only on a real fault. */
export interface ContenderInstance {
  decide(key: string): Promise<boolean>;
  close(): Promise<void>;
}

export interface Contender {
  /** Unique, shown in tables; also how exactness workers find the contender again. */
  name: string;
  store: StoreKind;
  group: ContenderGroup;
  /** Short remark shown next to the figures (what is called, which window). */
  note?: string;
  /** Core scenarios this contender takes part in. @default both */
  scenarios?: readonly CoreScenario[];
  create(spec: LimitSpec, ctx: ContenderContext): Promise<ContenderInstance>;
}

/** Opens an ioredis client for a contender; errors surface through the commands, not as 'error' events. */
export function openRedis(redisPort: number, options: { enableAutoPipelining?: boolean } = {}): Redis {
  const client = new Redis({
    host: '127.0.0.1',
    port: redisPort,
    enableAutoPipelining: options.enableAutoPipelining ?? false,
    maxRetriesPerRequest: 1,
  });
  client.on('error', () => {});
  return client;
}

/** Quits a client, falling back to a hard disconnect when it does not answer. */
export async function closeRedis(client: Redis): Promise<void> {
  try {
    await Promise.race([client.quit(), new Promise((resolve) => setTimeout(resolve, 1000))]);
  } catch {
    // already closed
  }
  client.disconnect();
}

/** CPU seconds redis-server has used so far (user + system), from INFO cpu. */
export async function redisCpuSeconds(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return field('used_cpu_user') + field('used_cpu_sys');
}

/** The prefix without its trailing ':' for libraries that add their own separator. */
export function namespace(prefix: string): string {
  return prefix.endsWith(':') ? prefix.slice(0, -1) : prefix;
}

/** Rejects when `promise` has not settled after `ms`: a contender that hangs must not hang the run. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Message of anything thrown, for reports. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message.split('\n')[0] ?? error.name;
  return String(error);
}
