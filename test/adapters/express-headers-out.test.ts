// Express: the rate-limit header fields set without asking whether the headers are out (the answer comes from
// setHeader itself), and the spoofable-IP check that reads the proxy settings on a middleware's first request
// and every SPOOF_CHECK_EVERY-th after.
import { expect } from 'chai';
import express from 'express';
import request from 'supertest';
import { SPOOF_CHECK_EVERY } from '../../adapters/exchange.js';
import { rateLimit, SPOOFABLE_IP_WARNING } from '../../adapters/express.js';
import { createLimiter, type Rule } from '../../src/index.js';

const perIp = (limit: number): Rule[] => [
  { name: 'api', key: 'ip', limit, window: { type: 'fixed', size: '1h' } },
];

/** An app whose earlier middleware sends the status line and headers before the limiter runs. */
function headersOutFirst(limit: number) {
  const limiter = createLimiter({ rules: perIp(limit) });
  const app = express();
  app.use((_req, res, next) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.flushHeaders();
    next();
  });
  app.use(rateLimit(limiter));
  app.use((req, res) => void res.end(`handled ${req.rateLimit?.allowed} ${req.rateLimit?.rules[0]?.key}`));
  return { app, limiter };
}

describe('Express: header fields when the headers are out already', () => {
  it('admits and runs the handler, adding no field to the headers already sent', async () => {
    const { app, limiter } = headersOutFirst(5);
    try {
      const res = await request(app).get('/').expect(200);
      const [handled, allowed, key] = res.text.split(' ');
      expect([handled, allowed]).to.deep.equal(['handled', 'true']);
      expect(res.headers).to.not.have.property('ratelimit');
      expect(res.headers).to.not.have.property('ratelimit-policy');
      expect((await limiter.status('api', key as string)).count).to.equal(1);
    } finally {
      await limiter.close();
    }
  });

  it('ends a denied response with the status already sent, never running the handler', async () => {
    const { app, limiter } = headersOutFirst(1);
    try {
      await request(app).get('/').expect(200);
      const denied = await request(app).get('/').expect(200);
      expect(denied.text).to.equal('');
      expect(denied.headers).to.not.have.property('retry-after');
    } finally {
      await limiter.close();
    }
  });

  it('still hands a header the framework refuses to the error handler, not to the client as a crash', async () => {
    const limiter = createLimiter({ rules: perIp(5) });
    const app = express();
    // A response whose setHeader throws for another reason than headers out: the error is not swallowed.
    app.use((_req, res, next) => {
      res.setHeader = () => {
        throw new TypeError('refused by the app');
      };
      next();
    });
    app.use(rateLimit(limiter));
    app.use((_req, res) => void res.end('handled'));
    app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.statusCode = 500;
      res.end(error.message);
    });
    try {
      const res = await request(app).get('/').expect(500);
      expect(res.text).to.equal('refused by the app');
    } finally {
      await limiter.close();
    }
  });
});

describe('Express: the spoofable-IP check', () => {
  it(`finds 'trust proxy' set to true after the first request within ${SPOOF_CHECK_EVERY} requests, and warns once`, async () => {
    const limiter = createLimiter({ rules: perIp(1e6) });
    const app = express();
    app.use(rateLimit(limiter));
    app.get('/', (_req, res) => void res.send('ok'));
    const warned: string[] = [];
    const onWarning = (warning: Error & { code?: string }) => {
      if (warning.code === SPOOFABLE_IP_WARNING) warned.push(warning.message);
    };
    process.on('warning', onWarning);
    try {
      await request(app).get('/').expect(200);
      app.set('trust proxy', true);
      const agent = request.agent(app);
      for (let i = 0; i < SPOOF_CHECK_EVERY + 5; i++) await agent.get('/').expect(200);
      // process.emitWarning delivers on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
      expect(warned).to.have.length(1);
      expect(warned[0]).to.match(/trust proxy/);
    } finally {
      process.off('warning', onWarning);
      await limiter.close();
    }
  });
});
