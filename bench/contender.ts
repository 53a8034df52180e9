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
  /** Key prefix of this instance: unique per instance, shared by the processes of one exactness race. */
  prefix: string;
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
export function openRedis(ctx: ContenderContext, options: { enableAutoPipelining?: boolean } = {}): Redis {
  const client = new Redis({
    host: '127.0.0.1',
    port: ctx.redisPort,
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

/** Message of anything thrown, for reports. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message.split('\n')[0] ?? error.name;
  return String(error);
}
