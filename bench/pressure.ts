// `npm run bench:pressure`: the limit under pressure. 4 app processes each send 1000 concurrent consumes of
// one hot key (limit 1000, default limiter options) through one Redis while CPU-bound processes
// oversubscribe the cores; prints how many were admitted and how many decisions met a store error.
import { parseArgs } from 'node:util';
import type { RaceClient, RaceStart } from '../test/fixtures/pressure-worker.js';
import { Burners, Racers } from '../test/support/pressure.js';
import { startRedis } from '../test/support/redis.js';

const { values } = parseArgs({
  options: {
    reps: { type: 'string', default: '3' },
    burners: { type: 'string', default: '8' },
    processes: { type: 'string', default: '4' },
    attempts: { type: 'string', default: '1000' },
    limit: { type: 'string', default: '1000' },
    client: { type: 'string', default: 'ioredis' },
    windows: { type: 'string', default: 'fixed,calendar,token-bucket' },
    starts: { type: 'string', default: 'at-start,cold,warm' },
  },
});

const WINDOWS = {
  fixed: { type: 'fixed', size: '1d' },
  calendar: { type: 'calendar', unit: 'month' },
  'sliding-log': { type: 'sliding-log', size: '1d' },
  sliding: { type: 'sliding', size: '1d' },
  'token-bucket': { type: 'token-bucket', size: '1d' },
  gcra: { type: 'gcra', size: '1d' },
} as const;

const reps = Number(values.reps);
const limit = Number(values.limit);
const attempts = Number(values.attempts);
const processes = Number(values.processes);
const server = await startRedis();
const control = server.client();
const racers = new Racers(processes);
await racers.up();
const burners = new Burners(Number(values.burners));
let prefixes = 0;
console.log(
  `${processes} processes x ${attempts} concurrent consumes of one key, limit ${limit}, ` +
    `${values.burners} CPU burners, client ${values.client}, default limiter options`,
);
console.log(
  'window        start     admitted per repetition     decided by the policy   slowest burst, ms (first decision asked to last answered)',
);
try {
  for (const type of values.windows.split(',') as Array<keyof typeof WINDOWS>) {
    for (const start of values.starts.split(',') as RaceStart[]) {
      const admitted: number[] = [];
      const errors: number[] = [];
      const burstMs: number[] = [];
      let firstError = '';
      for (let rep = 0; rep < reps; rep++) {
        const answers = await racers.race(
          {
            start,
            client: values.client as RaceClient,
            url: server.url,
            prefix: `pressure${prefixes++}`,
            window: WINDOWS[type],
            limit,
            attempts,
          },
          // A cold or at-start round meets an empty script cache: its first calls answer NOSCRIPT.
          async () => void (start !== 'warm' && (await control.script('FLUSH'))),
        );
        admitted.push(answers.reduce((sum, a) => sum + a.admitted, 0));
        errors.push(answers.reduce((sum, a) => sum + a.byPolicy, 0));
        burstMs.push(Math.max(...answers.map((a) => a.burstMs)));
        firstError ||= answers.find((a) => a.firstStoreError !== null)?.firstStoreError ?? '';
      }
      console.log(
        `${type.padEnd(13)} ${start.padEnd(9)} ${admitted.join(' ').padEnd(27)} ${errors.join(' ').padEnd(23)} ` +
          burstMs.map((ms) => ms.toFixed(0)).join(' ') +
          (firstError ? `  (${firstError})` : ''),
      );
    }
  }
} finally {
  await burners.stop();
  await racers.stop();
  await server.stop();
}
