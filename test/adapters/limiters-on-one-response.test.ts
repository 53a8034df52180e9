// Two limiters on one response (Express): list fields gather both limiters' members, single-valued ones
// are the last limiter's.
import { expect } from 'chai';
import express from 'express';
import request from 'supertest';
import { rateLimit } from '../../adapters/express.js';

describe('two limiters on one response', () => {
  const app = (headers: 'standard' | 'draft-7') => {
    const server = express();
    server.use(
      rateLimit([{ name: 'burst', key: 'ip', limit: 5, window: { type: 'fixed', size: '1m' } }], { headers }),
    );
    server.use(
      rateLimit([{ name: 'hourly', key: 'ip', limit: 100, window: { type: 'fixed', size: '1h' } }], {
        headers,
      }),
    );
    server.get('/', (_req, res) => {
      res.send('ok');
    });
    return server;
  };

  it('the newest draft: both limiters add their members to RateLimit-Policy and RateLimit', async () => {
    const res = await request(app('standard')).get('/').expect(200);
    expect(res.headers['ratelimit-policy']).to.equal('"burst";q=5;w=60, "hourly";q=100;w=3600');
    expect(res.headers.ratelimit).to.equal('"burst";r=4;t=60, "hourly";r=99;t=3600');
  });

  it("draft-7: RateLimit is one dictionary (the last limiter's), RateLimit-Policy lists both", async () => {
    const res = await request(app('draft-7')).get('/').expect(200);
    expect(res.headers.ratelimit).to.equal('limit=100, remaining=99, reset=3600');
    expect(res.headers['ratelimit-policy']).to.equal('5;w=60, 100;w=3600');
  });
});
