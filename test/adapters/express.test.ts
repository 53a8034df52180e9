// The HTTP suite and the example app on Express.
import express, { type NextFunction, type Request, type Response } from 'express';
import { type ExpressRateLimitOptions, rateLimit } from '../../adapters/express.js';
import { createExpressApp } from '../../examples/express-app.js';
import { nodeRedisClusterStores, nodeRedisStores } from '../support/clients.js';
import { memoryStores, redisStores } from '../support/stores.js';
import { exampleSuite, type Harness, httpSuite, type SuiteOptions } from './suites/http-suite.js';
import { planSuite } from './suites/plans-suite.js';

function expressOptions(o: SuiteOptions = {}): ExpressRateLimitOptions {
  const { onLimited, skip, customHandler, ...rest } = o;
  const out: ExpressRateLimitOptions = { ...rest };
  if (onLimited) out.onLimited = (decision) => onLimited(decision);
  if (skip) out.skip = (req) => skip(req.headers);
  if (customHandler)
    out.handler = (_req, res, _next, decision) =>
      void res.status(418).json({ custom: true, rule: decision.rule });
  return out;
}

export const expressHarness: Harness = {
  name: 'Express',
  build(spec) {
    let hits = 0;
    const app = express();
    app.set('trust proxy', spec.trust === 'one-hop' ? 1 : spec.trust === 'all');
    app.use(express.json());
    // Authentication ahead of the limiter: `x-user: <id>` becomes req.user (the 'user' key form).
    app.use((req, _res, next) => {
      const id = req.get('x-user');
      if (id !== undefined) (req as Request & { user?: unknown }).user = { id };
      next();
    });
    const limit = rateLimit(spec.limiter, expressOptions(spec.options));
    if (spec.mount !== 'route') app.use(limit);
    app.use((_req, _res, next) => {
      hits++;
      next();
    });
    app.post('/login', (req, res) => void res.status(req.body?.password === 'right' ? 200 : 401).json({}));
    app.post(
      '/users/:id/like',
      ...(spec.mount === 'route' ? [limit] : []),
      (_req, res) => void res.json({ liked: true }),
    );
    app.get('/echo', (req, res) => void res.json({ rateLimit: req.rateLimit }));
    app.get('/status/:code', (req, res) => void res.status(Number(req.params.code)).json({}));
    app.get('/throw/:code', (req) => {
      throw Object.assign(new Error('thrown'), { status: Number(req.params.code) });
    });
    app.use(
      (
        err: Error & { status?: number; code?: string },
        _req: Request,
        res: Response,
        _next: NextFunction,
      ) => {
        res.status(err.status ?? 500).json({ error: err.message, code: err.code });
      },
    );
    return { listener: app, hits: () => hits };
  },
  example(options) {
    const { app, limiter } = createExpressApp(options);
    return { listener: app, limiter };
  },
};

for (const stores of [memoryStores, redisStores, nodeRedisStores, nodeRedisClusterStores]) {
  httpSuite(expressHarness, stores);
  exampleSuite(expressHarness, stores);
  planSuite(expressHarness, stores);
}
