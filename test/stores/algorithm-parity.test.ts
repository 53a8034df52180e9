// Function-level parity of the TypeScript and Lua twins of every window algorithm: random (state, op, time)
// fed to both steps (the Lua one through test/fixtures/algorithm-step.lua on a real Redis), compared field by field.
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { WINDOW_TYPES, windowKind } from '../../src/algorithms/index.js';
import { assembleScript } from '../../src/stores/redis/function-library.js';
import { type RedisServer, startRedis } from '../support/redis.js';
import { type Case, cases, counting, type Step, type StepOutcome, stepTs } from './parity-cases.js';

/** Cases per window type and step: 7 types x (300 decide + 150 refund + 200 create) = 4,550 in all. */
const DECIDE_RUNS = 300;
const REFUND_RUNS = 150;
/** The Redis store's check of one op (lua/algorithms.lua readOrCreate): 200 cases per type. */
const CREATE_RUNS = 200;
/** The types a grouped rule keeps in its identity's record, and the cases per step of that form. */
const HASHED = WINDOW_TYPES.filter((type) => windowKind(type).groupable);
const HASHED_RUNS = 100;

/**
 * Put before the assembled script, so that the modules' `redis` is this one: every PEXPIRE the algorithms
 * ask for is sent with an hour added to its TTL. Redis 7.0's PEXPIRE deletes its key at once when the
 * server's millisecond turns between the command's start (its base time) and its check
 * (checkAlreadyExpired: start + TTL <= a fresh mstime()), so a log, buckets or holders written with the
 * least TTL, 1 ms (a state that has ended, or ends within the ms), were gone before the step read them:
 * about 1 PEXPIRE 1 in 10,000 in a script on this machine, some 1 run in 20 of this file. SET PX has no such check in
 * 7.0 (fixed, calendar, token bucket, GCRA and the records never failed). The cases' times are not the
 * server's, so their TTLs say nothing of real time, and nothing here reads one: what is compared is each
 * state and verdict, the state's end read from the state (expiresAt). A TTL that is not digits goes as it
 * is, for Redis to refuse as before.
 */
const HOLD_EXPIRY = `local redis = setmetatable({}, { __index = redis })
do
  local call, pcall = redis.call, redis.pcall
  local function held(f)
    return function(command, ...)
      local key, ttl = ...
      if command == 'PEXPIRE' and select('#', ...) == 2 and string.match(tostring(ttl), '^%d+$') then
        return f(command, key, tostring(tonumber(ttl) + 3600000))
      end
      return f(command, ...)
    end
  end
  redis.call, redis.pcall = held(call), held(pcall)
end`;

/** The Lua twin's step, through the driver script. */
async function stepLua(
  client: Redis,
  sha: string,
  c: Case,
  step: Step,
  hashed = false,
): Promise<StepOutcome> {
  const { rule, op } = c;
  const args = [
    hashed ? `${c.type}#hash` : c.type,
    op.limit,
    rule.sizeMs,
    rule.buckets,
    rule.burst || op.limit,
    op.cost,
    op.periodEndMs ?? 0,
  ];
  args.push(op.nextPeriodEndMs ?? 0, c.nowMs);
  const reply = (await client.evalsha(
    sha,
    1,
    'parity',
    ...args.map(String),
    step,
    c.add ? '1' : '0',
    String(c.receipt),
    String(c.state.length),
    ...c.state.map(String),
  )) as string[];
  const n = reply.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  return {
    expiresAt: reply[0] === '-' ? undefined : Number(reply[0]),
    verdict: {
      allowed: n[0] === 1,
      remaining: n[1],
      resetMs: n[2],
      retryAfterMs: n[3],
      count: n[4],
      receipt: n[5],
    },
    after: step === 'create' ? counting(c, reply.slice(8).map(Number)) : reply.slice(8).map(Number),
  };
}

/**
 * A concurrency state's end as the Lua reads it: exact once it has ended, else only "later than now"
 * (lua/concurrency.lua load reads the latest lease end only when the last id alone no longer keeps the
 * state: every decision asks whether it has ended, nothing more).
 */
function ended(c: Case, outcome: StepOutcome): StepOutcome {
  if (c.type !== 'concurrency' || outcome.expiresAt === undefined || outcome.expiresAt <= c.nowMs)
    return outcome;
  return { ...outcome, expiresAt: Number.POSITIVE_INFINITY };
}

describe('TypeScript and Lua algorithms step for step (function-level parity)', function () {
  this.timeout(120_000);
  let server: RedisServer;
  let client: Redis;
  let sha: string;
  let compared = 0;

  before(async () => {
    server = await startRedis();
    client = server.client();
    const driver = readFileSync(new URL('../fixtures/algorithm-step.lua', import.meta.url), 'utf8');
    sha = (await client.script('LOAD', `${HOLD_EXPIRY}\n${assembleScript(driver)}`)) as string;
  });
  after(async () => {
    console.log(`      ${compared} cases compared field by field`);
    client.disconnect();
    await server.stop();
  });

  for (const type of WINDOW_TYPES) {
    const steps: Array<[Step, number, string]> = [
      ['decide', DECIDE_RUNS, 'evaluate then apply'],
      ['refund', REFUND_RUNS, 'refund'],
    ];
    steps.push(['create', CREATE_RUNS, "a check through the store's path for empty keys"]);
    for (const [step, numRuns, what] of steps) {
      it(`${type}: ${what} gives the same verdict and the same state, ${numRuns} random cases`, async () => {
        await fc.assert(
          fc.asyncProperty(cases(type), async (drawn) => {
            // The store's check never adds past the limit.
            const c = step === 'create' ? { ...drawn, add: false } : drawn;
            compared++;
            expect(ended(c, await stepLua(client, sha, c, step))).to.deep.equal(ended(c, stepTs(c, step)));
          }),
          { numRuns },
        );
      });
      if (!HASHED.includes(type)) continue;
      // A grouped rule's state: one of its identity record (lua/identity-record.lua).
      it(`${type} in a record: ${what} gives the same verdict and the same state, ${HASHED_RUNS} random cases`, async () => {
        await fc.assert(
          fc.asyncProperty(cases(type), async (drawn) => {
            const c = step === 'create' ? { ...drawn, add: false } : drawn;
            compared++;
            expect(await stepLua(client, sha, c, step, true)).to.deep.equal(stepTs(c, step));
          }),
          { numRuns: HASHED_RUNS },
        );
      });
    }
  }
});
