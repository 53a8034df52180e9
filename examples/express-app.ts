// Example Express app: login lockout, SMS-code limits and a general API limit. Run: npx tsx examples/express-app.ts
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { rateLimit } from '../adapters/express.js';
import { createLimiter, type Limiter } from '../src/index.js';
import { checkPassword, type ExampleAppOptions, exampleRules, isPhone } from './rules.js';

export type { ExampleAppOptions } from './rules.js';

export function createExpressApp(options: ExampleAppOptions = {}): { app: Express; limiter: Limiter } {
  const limiter = createLimiter(
    options.store ? { store: options.store, rules: exampleRules(options) } : { rules: exampleRules(options) },
  );
  const app = express();
  app.set('trust proxy', options.trustProxy ?? 0);
  app.use(express.json({ limit: '10kb' }));
  // One middleware for every rule: each rule's `match` picks its routes.
  app.use(rateLimit(limiter, { headers: 'both', ...(options.clock ? { clock: options.clock } : {}) }));

  app.post('/login', (req, res) => {
    if (checkPassword(req.body?.username, req.body?.password)) res.json({ ok: true });
    else res.status(401).json({ error: 'invalid username or password' });
  });

  app.post('/sms/code', async (req, res, next) => {
    const phone: unknown = req.body?.phone;
    if (!isPhone(phone))
      return void res.status(400).json({ error: 'phone must be an E.164 number such as +8613800138000' });
    try {
      await (options.sendCode ?? (() => {}))(phone);
    } catch (error) {
      return next(Object.assign(new Error('could not send the code'), { status: 503, cause: error }));
    }
    res.json({ sent: true });
  });

  app.get('/api/items', (_req, res) => {
    res.json([{ id: 1, name: 'tea' }]);
  });

  app.use(
    (error: { status?: number; message?: string }, _req: Request, res: Response, _next: NextFunction) => {
      const status = error.status ?? 500;
      res.status(status).json({ error: status >= 500 ? 'internal error' : error.message });
    },
  );
  return { app, limiter };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const port = Number(process.env.PORT ?? 3000);
  const server = createExpressApp().app.listen(port, () => {
    console.log(`express example on http://localhost:${(server.address() as AddressInfo).port}`);
  });
}
