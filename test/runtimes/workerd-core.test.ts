// The core on Cloudflare's runtime for real: workerd (miniflare 4.20260426.0, the binary from npm) runs a
// Worker bundled from src as wrangler bundles it, WITHOUT nodejs_compat, so any `node:` import, any timer or
// random value drawn at import or construction, and any file read fails the start. A fetch handler behind
// withRateLimit and a Hono app behind rateLimit, each on the memory store made at import: exact under
// parallel requests (one isolate), the rate-limit fields and the 429, the client's address from
// CF-Connecting-IP on a request Cloudflare's edge delivered (and only there), and a cron calendar rule.
import { join } from 'node:path';
import { expect } from 'chai';
import { type RunningWorker, startWorker } from '../support/workerd.js';

const root = new URL('../..', import.meta.url).pathname;
const APPS = {
  fetch: join(root, 'test/runtimes/apps/workerd-fetch.ts'),
  hono: join(root, 'test/runtimes/apps/workerd-hono.ts'),
} as const;

const from = (address: string) => ({ headers: { 'cf-connecting-ip': address } });

/** `count` requests for `path` from `address` at once: their responses, bodies read. */
async function burst(
  worker: RunningWorker,
  path: string,
  address: string,
  count: number,
): Promise<Response[]> {
  const responses = await Promise.all(Array.from({ length: count }, () => worker.fetch(path, from(address))));
  await Promise.all(responses.map((r) => r.clone().arrayBuffer()));
  return responses;
}

const statusCount = (responses: Response[], status: number) =>
  responses.filter((r) => r.status === status).length;

/** The next midnight UTC after `atMs`, in epoch seconds. */
const nextUtcMidnight = (atMs: number) => Math.floor(atMs / 86_400_000 + 1) * 86_400;

for (const kind of Object.keys(APPS) as (keyof typeof APPS)[]) {
  describe(`workerd without nodejs_compat: ${kind === 'fetch' ? 'withRateLimit (ratekeeper/fetch)' : 'Hono rateLimit'} on the memory store`, function () {
    this.timeout(120_000);
    let worker: RunningWorker;
    before(async () => {
      // The limiter is made at the Worker's import: a timer, a random value or a node: module there fails this.
      worker = await startWorker({ entry: APPS[kind], nodejsCompat: false });
    });
    after(() => worker?.close());

    it("keys on CF-Connecting-IP, which Cloudflare's edge sets, with no option", async () => {
      expect(await (await worker.fetch('/whoami', from('203.0.113.5'))).text()).to.equal('203.0.113.5');
      expect(await (await worker.fetch('/whoami', from('2001:db8::7'))).text()).to.equal('2001:db8::/56');
    });

    it('admits exactly 20 of 50 parallel requests of one client, with the rate-limit fields, and denies the rest 429', async () => {
      const responses = await burst(worker, '/count', '198.51.100.20', 50);
      expect(statusCount(responses, 200)).to.equal(20);
      expect(statusCount(responses, 429)).to.equal(30);
      const remaining = responses
        .filter((r) => r.status === 200)
        .map((r) => Number(r.headers.get('x-ratelimit-remaining')))
        .sort((a, b) => a - b);
      expect(remaining).to.deep.equal(Array.from({ length: 20 }, (_, i) => i));
      const denied = responses.find((r) => r.status === 429) as Response;
      expect(denied.headers.get('x-ratelimit-limit')).to.equal('20');
      expect(denied.headers.get('x-ratelimit-remaining')).to.equal('0');
      const retryAfter = Number(denied.headers.get('retry-after'));
      expect(retryAfter).to.be.within(1, 60);
      const body = (await denied.json()) as { error: string; retryAfter: number };
      expect(body.error).to.equal('Too Many Requests');
      expect(body.retryAfter).to.equal(retryAfter);
      // Another client has its own budget.
      expect(statusCount(await burst(worker, '/count', '198.51.100.21', 25), 200)).to.equal(20);
    });

    it('runs a calendar rule with a cron expression: 3 a UTC day, reset at the next midnight', async () => {
      const before = Date.now();
      const responses = await burst(worker, '/daily', '192.0.2.30', 5);
      expect(statusCount(responses, 200)).to.equal(3);
      expect(statusCount(responses, 429)).to.equal(2);
      const reset = Number(responses[0]?.headers.get('x-ratelimit-reset'));
      // Epoch seconds, rounded up: the midnight after the request (the test may straddle one).
      expect(reset - nextUtcMidnight(before)).to.be.oneOf([0, 1, 86_400, 86_401]);
    });
  });
}

describe('workerd without nodejs_compat: whose CF-Connecting-IP withRateLimit believes', function () {
  this.timeout(120_000);
  let worker: RunningWorker;
  before(async () => {
    worker = await startWorker({ entry: APPS.fetch, nodejsCompat: false });
  });
  after(() => worker?.close());

  it('never with cloudflare: false (workerd behind another proxy): the request has no address', async () => {
    expect(await (await worker.fetch('/whoami?cf=false', from('203.0.113.9'))).text()).to.equal(
      '#unresolved-ip',
    );
  });

  it("not by default on a request without the edge's cf properties (a self-hosted workerd, a caller's own Request)", async () => {
    expect(await (await worker.fetch('/whoami?cf=stripped', from('203.0.113.9'))).text()).to.equal(
      '#unresolved-ip',
    );
  });

  it('always with cloudflare: true', async () => {
    expect(await (await worker.fetch('/whoami?cf=true', from('203.0.113.9'))).text()).to.equal('203.0.113.9');
  });

  it('over real HTTP to the Worker, too', async () => {
    const response = await fetch(`${worker.url}/whoami`, from('198.51.100.1'));
    expect(await response.text()).to.equal('198.51.100.1');
  });
});
