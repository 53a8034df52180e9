// Tests found by the module's name: a module of src/ or adapters/ has its tests at test/unit/<folder>/<module>.test.ts
// (no server) or test/<folder>/<module>.test.ts (real servers), <folder> being its folder under src/ (adapters/ for
// the adapters), or under test/concurrency/ (concurrency's one home); "<module>-<aspect>.test.ts" is one aspect of
// it, and a folder's index.ts is also named by its folder. A module without such a test is listed below, with where
// its tests are; a module that gains one leaves the list. ARCHITECTURE.md, "Tests", says the same.
import { existsSync, readdirSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { expect } from 'chai';

const ROOT = resolve(import.meta.dirname, '../..');

/**
 * Modules tested through other files, each with where. Every path in backquotes must exist. Most of these are
 * exercised through the public API by tests named after what they do rather than after one file.
 */
const TESTED_ELSEWHERE: Readonly<Record<string, string>> = {
  // The shared files at the top of src/.
  'src/index.ts':
    'the public exports: `test/package/package.test.ts` (ESM and CommonJS), `test/package/readme-samples.test.ts` (every export named in the manual)',
  'src/types.ts': 'types only: the type check (`npm run typecheck`)',
  'src/defaults.ts':
    'the defaults of options left out, in nearly every file: `test/unit/headers.test.ts` (the header fields), `test/unit/keys/ip.test.ts` (the IPv6 prefix)',
  'src/errors.ts':
    'error classes and codes, asserted by the refusals of `test/unit/rules/compile.test.ts`, `test/unit/config/known-fields.test.ts` and most other files',
  'src/warnings.ts':
    'one-time warnings: `test/adapters/wiring-untrusted-forwarded.test.ts`, `test/unit/keys/material-safety.test.ts`, `test/unit/keys/missing-key.test.ts`',
  // The window algorithms: every type against a model, and against its Lua and PL/pgSQL twins.
  'src/algorithms/algorithm.ts':
    'every type through it: `test/unit/algorithms/properties.test.ts`, `test/unit/rules/facts.test.ts` (the kinds)',
  'src/algorithms/index.ts': 'the registry: `test/unit/algorithms/registry-lists.test.ts`',
  'src/algorithms/int-math.ts':
    'gcra and token-bucket arithmetic: `test/unit/algorithms/properties.test.ts`, `test/unit/rules/rule-index-limits.test.ts`',
  'src/algorithms/calendar.ts':
    '`test/unit/algorithms/properties.test.ts`, `test/stores/algorithm-parity.test.ts`, `test/stores/postgres/sql-parity.test.ts`',
  'src/algorithms/concurrency.ts':
    '`test/stores/algorithm-parity.test.ts`, `test/stores/postgres/sql-parity.test.ts`, `test/stores/conformance/concurrency.ts` (every store), `test/concurrency/`',
  'src/algorithms/fixed.ts':
    '`test/unit/algorithms/properties.test.ts`, `test/stores/algorithm-parity.test.ts`, `test/stores/postgres/sql-parity.test.ts`',
  'src/algorithms/gcra.ts':
    '`test/unit/algorithms/properties.test.ts`, `test/stores/algorithm-parity.test.ts`, `test/stores/postgres/sql-parity.test.ts`',
  'src/algorithms/sliding-log.ts':
    '`test/unit/algorithms/properties.test.ts`, `test/stores/algorithm-parity.test.ts`, `test/stores/postgres/sql-parity.test.ts`',
  'src/algorithms/sliding.ts':
    '`test/unit/algorithms/properties.test.ts`, `test/stores/algorithm-parity.test.ts`, `test/stores/postgres/sql-parity.test.ts`',
  'src/algorithms/token-bucket.ts':
    '`test/unit/algorithms/properties.test.ts`, `test/stores/algorithm-parity.test.ts`, `test/stores/postgres/sql-parity.test.ts`',
  // Calls: acquire and wrap are paced-calls.ts (test/calls/paced-calls-*.test.ts).
  'src/calls/call-key.ts': "a wrapped call's key: `test/calls/paced-calls-wrap.test.ts`",
  'src/calls/options.ts':
    "the calls' options refused: `test/calls/paced-calls-wrap.test.ts`, `test/calls/paced-calls-acquire.test.ts`, `test/unit/config/known-fields.test.ts`",
  'src/config/refuse.ts':
    'the shape of every configuration error: `test/unit/rules/compile.test.ts`, `test/unit/config/known-fields.test.ts`, `test/unit/config/hints.test.ts`',
  'src/keys/direct-key.ts':
    'keys given directly (consume, acquire): `test/adapters/hostile-input.test.ts` (bad keys refused), `test/calls/paced-calls-acquire.test.ts`',
  'src/keys/key-reads.ts':
    'what a key form reads: `test/unit/rules/facts.test.ts`, `test/unit/keys/material-safety.test.ts`',
  // The limiter's parts below its façade, exercised through it.
  'src/limiter/limiter.ts':
    'the façade: nearly every file; its request checks in `test/unit/limiter/op-builder-request-info.test.ts`',
  'src/limiter/options.ts':
    "the limiter's options refused: `test/unit/config/known-fields.test.ts`, `test/unit/rules/compile.test.ts`",
  'src/limiter/deadlines.ts':
    'store-call deadlines: `test/unit/limiter/failure-policy.test.ts`, `test/limiter/failure-policy.test.ts`',
  'src/limiter/events.ts':
    'events and the debug log: `test/limiter/observers.test.ts`, `test/limiter/failure-policy.test.ts`',
  'src/limiter/reservations.ts':
    'report and reservations: `test/unit/limiter/decision-copies.test.ts`, `test/adapters/work-in-flight-recipes.test.ts`',
  'src/limiter/settlements.ts':
    'settle: `test/unit/limiter/decision-copies.test.ts`, `test/adapters/work-in-flight-recipes.test.ts`, `test/concurrency/processes.test.ts` (a settled budget)',
  // Operators: the command line and the console, each tested as the program users run.
  'src/operators/rule-summary.ts':
    'rules in plain words: `test/unit/rules/facts.test.ts`, `test/operators/cli/main.test.ts`',
  'src/operators/cli/bin.ts': 'the executable: `test/operators/cli/main.test.ts` spawns it',
  'src/operators/cli/commands.ts':
    '`test/operators/cli/main.test.ts`, `test/operators/cli/connect-postgres.test.ts`',
  'src/operators/cli/output.ts': '`test/operators/cli/main.test.ts` (text and --json)',
  'src/operators/cli/rules-module.ts': '`test/operators/cli/main.test.ts` (--rules, ESM and CommonJS)',
  'src/operators/cli/targets.ts':
    '`test/operators/cli/main.test.ts`, `test/operators/cli/args-prefix.test.ts`',
  'src/operators/cli/watch.ts':
    '`test/operators/cli/main.test.ts` (watch), `test/operators/decision-feed.test.ts`',
  'src/operators/console/change.ts': '`test/operators/console.test.ts`',
  'src/operators/console/csrf.ts':
    '`test/operators/console.test.ts` (CSRF), `test/operators/console-browser.test.ts`',
  'src/operators/console/html.ts': '`test/operators/console.test.ts` (escaping)',
  'src/operators/console/page.ts':
    '`test/operators/console.test.ts`, `test/operators/console-browser.test.ts`',
  'src/operators/console/respond.ts': '`test/operators/console.test.ts`',
  'src/recipes/index.ts':
    're-exports: `test/unit/recipes/login.test.ts`, `test/unit/recipes/verification-code.test.ts`',
  // Rules: validated by compile.ts, whose tests give every refusal.
  'src/rules/duration.ts': '`test/unit/rules/compile.test.ts`, `test/unit/config/hints.test.ts`',
  'src/rules/lockout.ts':
    '`test/unit/rules/compile.test.ts`, `test/stores/conformance/suite.ts` (lockouts on every store)',
  'src/rules/match.ts': 'against a scan of every matcher: `test/unit/rules/rule-index.test.ts`',
  // Stores: the contract's data, and the parts of each store under its own tests.
  'src/stores/store-ops.ts':
    'types and window-type names: `test/unit/algorithms/registry-lists.test.ts`, `test/stores/conformance/suite.ts`',
  'src/stores/memory/overrides.ts':
    '`test/stores/conformance/overrides.ts` (run by `test/stores/memory/memory-store.test.ts`), `test/unit/rules/rule-index-limits.test.ts`',
  'src/stores/postgres/clock.ts':
    "the database's clock: `test/stores/postgres/postgres-store.test.ts`, `test/concurrency/processes-postgres.test.ts`",
  'src/stores/postgres/notify.ts':
    'LISTEN/NOTIFY: `test/stores/postgres/postgres-store.test.ts`, `test/concurrency/processes-postgres.test.ts`',
  'src/stores/postgres/protocol.ts':
    '`test/stores/postgres/sql-parity.test.ts`, `test/stores/postgres/postgres-store-conformance.test.ts`',
  'src/stores/postgres/schema.ts': 'installation and upgrades: `test/stores/postgres/postgres-store.test.ts`',
  'src/stores/postgres/sweep.ts': '`test/stores/postgres/postgres-store.test.ts` (the sweep)',
  'src/stores/postgres/sql-texts.ts': 'generated: `test/unit/stores/embedded-texts.test.ts`',
  'src/stores/redis/lua-texts.ts': 'generated: `test/unit/stores/embedded-texts.test.ts`',
  'src/stores/redis/batches.ts':
    'one script call per batch: `test/stores/redis/redis-store.test.ts`, `test/stores/redis/cluster-groups.test.ts`',
  'src/stores/redis/channel.ts':
    'pub/sub: `test/limiter/decider-deny-cache.test.ts` (resets), `test/processes/acquire-processes.test.ts` (frees)',
  'src/stores/redis/frees.ts':
    'freed slots announced: `test/unit/stores/redis/calls.test.ts`, `test/processes/acquire-processes.test.ts`',
  'src/stores/redis/holders.ts': "a key's holders: `test/concurrency/key-admin-status.test.ts`",
  'src/stores/redis/keys.ts':
    'key layout and hash tags: `test/stores/redis/redis-store.test.ts`, `test/stores/redis/identity-record.test.ts`',
  'src/stores/redis/overrides.ts':
    '`test/processes/override-processes.test.ts`, `test/stores/redis/redis-store-conformance.test.ts`',
  'src/stores/redis/resets.ts':
    '`test/stores/redis/redis-store.test.ts` (a reset announced), `test/limiter/decider-deny-cache.test.ts`',
  'src/stores/redis/scripts.ts':
    'NOSCRIPT and the library: `test/stores/redis/redis-store.test.ts`, `test/stores/redis/function-library.test.ts`',
  'src/stores/redis/slot-map.ts': 'a stale slot map: `test/stores/redis/cluster-groups.test.ts`',
  'src/stores/redis/connection/connection.ts':
    '`test/stores/redis/connection/ioredis.test.ts`, `test/stores/redis/client.test.ts`',
  'src/stores/redis/connection/node-redis.ts':
    '`test/stores/redis/client.test.ts`, `test/stores/redis/redis-store-conformance.test.ts`',
  // What runs beyond Node: the Web platform's stand-ins for node: modules, and the Cloudflare and HTTP stores.
  'src/digest.ts': "digests equal to node:crypto's: `test/unit/web-platform.test.ts`",
  'src/timers.ts':
    'timers that keep no process open: `test/unit/web-platform.test.ts`, `test/runtimes/workerd-core.test.ts`',
  'src/limiter/event-emitter.ts': "Node's EventEmitter surface: `test/unit/web-platform.test.ts`",
  'src/stores/durable-object/index.ts':
    'the entry point `ratekeeper/cloudflare`: `test/runtimes/workerd-durable.test.ts`',
  'src/stores/durable-object/cloudflare-types.ts': 'types only: the type check (`npm run typecheck`)',
  'src/stores/durable-object/rate-limit-object.ts':
    'the object on workerd: `test/runtimes/workerd-durable.test.ts`, `test/stores/durable-object/durable-object-store-conformance.test.ts`',
  'src/stores/durable-object/identity-table.ts':
    "an object's rows: `test/runtimes/workerd-durable.test.ts` (restarts, alarms, cost)",
  'src/stores/durable-object/protocol.ts':
    'messages refused whole: `test/runtimes/workerd-durable.test.ts`, `test/unit/stores/durable-object/durable-object-store-options.test.ts`',
  'src/stores/leasing/leasing-options.ts': 'refused options: `test/stores/leasing/leases.test.ts`',
  // Adapters: the request sequence and each framework's mapping, through the real framework.
  'adapters/exchange.ts':
    "every framework's file (`test/adapters/suites/http-suite.ts`), `test/adapters/express-headers-out.test.ts`",
  'adapters/fastify-exchange.ts': '`test/adapters/fastify.test.ts`',
  'adapters/fetch-exchange.ts': '`test/adapters/fetch.test.ts`',
  'adapters/hono-exchange.ts': '`test/adapters/hono.test.ts`',
  'adapters/koa-exchange.ts': '`test/adapters/koa.test.ts`',
  'adapters/nest-exchange.ts': '`test/adapters/nest.test.ts`',
};

/** Every `.ts` file of src/ and adapters/, from the repository root. */
function modules(): string[] {
  return ['src', 'adapters'].flatMap((top) =>
    readdirSync(join(ROOT, top), { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.ts'))
      .map((name) => `${top}/${name}`),
  );
}

/** Every test file, from the repository root (test/nest11 holds NestJS 11's packages, no test of ours). */
function testFiles(): string[] {
  return readdirSync(join(ROOT, 'test'), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.test.ts') && !name.startsWith('nest11/'))
    .map((name) => `test/${name}`);
}

/** The tests named after `module`, by the convention above. */
function namedTests(module: string, tests: readonly string[]): string[] {
  const inSrc = module.startsWith('src/') ? module.slice('src/'.length) : module;
  const folder = dirname(inSrc) === '.' ? '' : `${dirname(inSrc)}/`;
  const name = basename(inSrc, '.ts');
  const homes = [`test/unit/${folder}`, `test/${folder}`, 'test/concurrency/'];
  const places: [string, string][] = homes.map((home) => [home, name]);
  // A folder's index.ts is the folder to its users (ratekeeper/console): tests named after the folder.
  if (name === 'index' && folder !== '') {
    const parent = dirname(folder) === '.' ? '' : `${dirname(folder)}/`;
    places.push([`test/unit/${parent}`, basename(folder)], [`test/${parent}`, basename(folder)]);
  }
  return tests.filter((test) =>
    places.some(([home, stem]) => {
      if (!test.startsWith(home)) return false;
      const file = test.slice(home.length);
      return !file.includes('/') && (file === `${stem}.test.ts` || file.startsWith(`${stem}-`));
    }),
  );
}

describe('tests found by the name of their module', () => {
  const all = modules();
  const tests = testFiles();
  const named = all.filter((module) => namedTests(module, tests).length > 0);

  it(`${named.length} of ${all.length} modules have a test named after them; every other one says where its tests are`, () => {
    const unlisted = all.filter((module) => !named.includes(module) && !(module in TESTED_ELSEWHERE));
    expect(
      unlisted,
      'modules with no test named after them: name one after the module, or list it here',
    ).to.deep.equal([]);
  });

  it('lists no module that is gone or has a test named after it now', () => {
    const stale = Object.keys(TESTED_ELSEWHERE).filter(
      (module) => !all.includes(module) || named.includes(module),
    );
    expect(stale).to.deep.equal([]);
  });

  it('names only test paths that exist in the list', () => {
    const paths = Object.values(TESTED_ELSEWHERE).flatMap((where) =>
      [...where.matchAll(/`(test\/[^`]+)`/g)].map((m) => m[1] as string),
    );
    expect(paths.length).to.be.greaterThan(50);
    expect(paths.filter((path) => !existsSync(join(ROOT, path)))).to.deep.equal([]);
  });

  it('keeps tests out of test/support and test/fixtures (helpers only)', () => {
    expect(tests.filter((test) => /^test\/(support|fixtures)\//.test(test))).to.deep.equal([]);
  });

  it("names concurrency's tests in its one home, test/concurrency/, whatever their tier", () => {
    const elsewhere = tests.filter(
      (test) => !test.startsWith('test/concurrency/') && /(^|[/-])concurrency[-.]/.test(basename(test)),
    );
    expect(elsewhere).to.deep.equal([]);
  });
});
