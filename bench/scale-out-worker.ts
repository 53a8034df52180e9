// One app process of the scale-out scenario (bench/scale-out.ts): a contender on the shared Redis or Cluster,
// a closed loop of decisions on distinct keys, its count reported to the coordinator.
import { Cluster } from 'ioredis';
import { type ContenderInstance, errorMessage } from './contender.js';
import { findContender } from './contenders.js';
import { loadRatekeeper } from './ratekeeper.js';

/** What the coordinator asks of this process. */
export interface WorkerTask {
  contender: string;
  /** The standalone server's port, or the Cluster's master addresses. */
  target: { kind: 'redis'; port: number } | { kind: 'cluster'; nodes: Array<{ host: string; port: number }> };
  prefix: string;
  limit: number;
  windowMs: number;
  concurrency: number;
  warmupMs: number;
  durationMs: number;
}

/** The raw floor's script (bench/raw-floor.ts), for the Cluster: EVALSHA, EVAL on NOSCRIPT. */
const RAW_FIXED = `
if redis.call('SET', KEYS[1], 1, 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('INCR', KEYS[1]) <= tonumber(ARGV[1]) then return 1 end
return 0
`;

/** Contenders on the Cluster: the raw floor and ours (the peers have no Cluster mode to compare). */
async function onCluster(
  task: WorkerTask,
  nodes: Array<{ host: string; port: number }>,
): Promise<ContenderInstance> {
  const client = new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: 1 } });
  client.on('error', () => {});
  const limit = String(task.limit);
  const windowMs = String(task.windowMs);
  const close = async () => {
    client.disconnect();
  };
  if (task.contender === 'raw floor (EVALSHA)') {
    const sha = (await client.script('LOAD', RAW_FIXED)) as string;
    return {
      async decide(key) {
        const redisKey = `${task.prefix}{${key}}`;
        try {
          return (await client.evalsha(sha, 1, redisKey, limit, windowMs)) === 1;
        } catch (error) {
          if (!errorMessage(error).startsWith('NOSCRIPT')) throw error;
          return (await client.eval(RAW_FIXED, 1, redisKey, limit, windowMs)) === 1;
        }
      },
      close,
    };
  }
  const rk = await loadRatekeeper();
  const store = new rk.RedisStore({ client: client as never, prefix: task.prefix.slice(0, -1) });
  const limiter = rk.createLimiter({
    store,
    rules: [{ name: 'r1', key: 'user', limit: task.limit, window: { type: 'fixed', size: task.windowMs } }],
  });
  return {
    decide: async (key) => (await limiter.consume('r1', key)).allowed,
    close: async () => {
      await limiter.close();
      await close();
    },
  };
}

async function create(task: WorkerTask): Promise<ContenderInstance> {
  if (task.target.kind === 'cluster') return onCluster(task, task.target.nodes);
  const contender = await findContender(task.contender);
  return contender.create(
    { limit: task.limit, windowMs: task.windowMs },
    { redisPort: task.target.port, prefix: task.prefix },
  );
}

/** `concurrency` lanes deciding fresh keys until `ms` have passed; the decisions made and the errors. */
async function loop(instance: ContenderInstance, label: string, concurrency: number, ms: number) {
  const deadline = performance.now() + ms;
  let ops = 0;
  let errors = 0;
  let firstError: string | undefined;
  const lane = async (lane: number) => {
    for (let i = 0; performance.now() < deadline; i++) {
      try {
        await instance.decide(`${label}-${lane}-${i}`);
        ops++;
      } catch (error) {
        errors++;
        firstError ??= errorMessage(error);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, i) => lane(i)));
  return { ops, errors, firstError };
}

function send(message: Record<string, unknown>): void {
  process.send?.(message);
}

process.on('message', async (message: { type: string; task?: WorkerTask }) => {
  try {
    if (message.type !== 'start' || message.task === undefined) return;
    const task = message.task;
    const instance = await create(task);
    await loop(instance, `w${process.pid}`, task.concurrency, task.warmupMs);
    send({ type: 'ready' });
    await new Promise<void>((resolve) => process.once('message', () => resolve()));
    const result = await loop(instance, `m${process.pid}`, task.concurrency, task.durationMs);
    send({ type: 'done', ...result });
    await instance.close();
    process.exit(0);
  } catch (error) {
    send({ type: 'failed', error: errorMessage(error) });
    process.exit(1);
  }
});
send({ type: 'up' });
