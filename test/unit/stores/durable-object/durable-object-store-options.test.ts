// DurableObjectStore's construction: a namespace binding and known options, else a clear refusal.
import { expect } from 'chai';
import { RateLimitConfigError } from '../../../../src/index.js';
import { DurableObjectStore } from '../../../../src/stores/durable-object/index.js';

const namespace = {
  idFromName: (name: string) => name,
  get: () => ({ fetch: async () => new Response('{}') }),
};

function refusal(make: () => unknown): RateLimitConfigError {
  try {
    make();
  } catch (error) {
    expect(error).to.be.instanceOf(RateLimitConfigError);
    return error as RateLimitConfigError;
  }
  throw new Error('not refused');
}

describe('DurableObjectStore options', () => {
  it('refuses what is not a namespace binding, naming what it needs', () => {
    for (const bad of [undefined, null, {}, 'RATE_LIMITER', { idFromName: () => 'x' }]) {
      const error = refusal(() => new DurableObjectStore(bad as never));
      expect(error.code).to.equal('ERR_OPTION');
      expect(error.message).to.match(
        /DurableObjectStore: its first argument must be a Durable Object namespace binding/,
      );
    }
  });

  it('refuses an unknown field with the one meant, a bad prefix and a clock that is no function', () => {
    expect(refusal(() => new DurableObjectStore(namespace, { prefx: 'a' } as never)).message).to.match(
      /unknown field 'prefx'.*did you mean 'prefix'/,
    );
    for (const prefix of ['', 5, 'x'.repeat(201)])
      expect(refusal(() => new DurableObjectStore(namespace, { prefix: prefix as never })).message).to.match(
        /prefix must be a string of 1 to 200 characters/,
      );
    expect(refusal(() => new DurableObjectStore(namespace, { clock: 5 as never })).message).to.match(
      /clock must be a function/,
    );
  });

  it('refuses bad ruleLimits and leasing, naming the field; without ruleLimits the store has no limits', () => {
    for (const [ruleLimits, message] of [
      ['yes', /ruleLimits must be a boolean or \{ leaseMs \}/],
      [{ leaseMs: 5 }, /ruleLimits.leaseMs must be an integer from 10 to 600000/],
      [{ leaseMs: 1.5 }, /ruleLimits.leaseMs must be an integer/],
      [{ lease: 100 }, /unknown field 'lease'/],
    ] as const)
      expect(
        refusal(() => new DurableObjectStore(namespace, { ruleLimits: ruleLimits as never })).message,
      ).to.match(message);
    expect(refusal(() => new DurableObjectStore(namespace, { leasing: { maxBlock: 1 } })).message).to.match(
      /leasing.maxBlock must be an integer from 2/,
    );
    const plain = new DurableObjectStore(namespace);
    expect([plain.limits, plain.onChange, plain.evaluateSync]).to.deep.equal([
      undefined,
      undefined,
      undefined,
    ]);
    const full = new DurableObjectStore(namespace, { ruleLimits: true, leasing: true });
    expect([typeof full.limits, typeof full.onChange, typeof full.evaluateSync]).to.deep.equal([
      'function',
      'function',
      'function',
    ]);
  });

  it('is a shared store on the Worker clock, or the injected one, never running backwards', () => {
    let now = 1000;
    const store = new DurableObjectStore(namespace, { clock: () => now });
    expect(store.local).to.equal(false);
    expect(store.now()).to.equal(1000);
    now = 900;
    expect(store.now()).to.equal(1000);
  });

  it('a reply that is not the protocol fails the call naming the object', async () => {
    const broken = {
      idFromName: (n: string) => n,
      get: () => ({ fetch: async () => new Response('<html>') }),
    };
    const store = new DurableObjectStore(broken, { prefix: 'p' });
    const rule = {
      name: 'r',
      type: 'fixed',
      sizeMs: 1000,
      buckets: 0,
      burst: 0,
      lockout: undefined,
      dryRun: false,
    } as const;
    let error: unknown;
    try {
      await store.evaluate([{ rule, key: 'k', cost: 1, limit: 1 }], 'check');
    } catch (e) {
      error = e;
    }
    expect(String(error)).to.match(/DurableObjectStore: the call to object 'p:k' failed/);
    const other = {
      idFromName: (n: string) => n,
      get: () => ({ fetch: async () => Response.json({ ok: 1 }) }),
    };
    let wrong: unknown;
    try {
      await new DurableObjectStore(other).reset(rule, 'k');
    } catch (e) {
      wrong = e;
    }
    expect(String(wrong)).to.match(/object 'rk:k' answered no decision \(is it a RateLimitObject\?\)/);
  });
});
