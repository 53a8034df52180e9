// The export endpoint recipe (docs/recipes.md): at most 2 exports per user running at once, and 10 an hour.
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { rateLimit } from '../adapters/express.js';
import { createLimiter, type Limiter, type Store } from '../src/index.js';

export interface ExportAppOptions {
  /** A RedisStore in production: the 2 at once hold across every process. */
  store: Store;
  /** Your authentication: the signed-in user, or undefined (answered 401). */
  authenticate(req: Request): { id: string } | undefined;
  /** Your export: it stops when `signal` aborts (the deadline). */
  runExport(user: string, signal: AbortSignal): Promise<{ url: string }>;
}

export function createExportApp(options: ExportAppOptions): { app: Express; limiter: Limiter } {
  const limiter = createLimiter({
    store: options.store,
    rules: [
      {
        name: 'exports',
        match: 'POST /exports',
        key: 'user',
        limit: 2,
        // A slot lapses 30 s after its process stopped renewing it (the process died).
        window: { type: 'concurrency', lease: '30s' },
      },
      {
        name: 'exports-hourly',
        match: 'POST /exports',
        key: 'user',
        limit: 10,
        window: { type: 'fixed', size: '1h' },
      },
    ],
  });

  const app = express();
  app.use((req, res, next) => {
    const user = options.authenticate(req);
    if (user === undefined) {
      res.status(401).json({ error: 'sign in first' });
      return;
    }
    Object.assign(req, { user }); // 'user' keys read req.user.id
    next();
  });

  // The slot is released when the response ends: answered, failed (500), or after the client went.
  app.post('/exports', rateLimit(limiter, { headers: 'standard' }), async (req, res) => {
    const { id } = (req as Request & { user: { id: string } }).user;
    // A deadline: a handler that never ends would hold its slot as long as the process lives.
    const file = await options.runExport(id, AbortSignal.timeout(10 * 60_000));
    res.status(201).json(file);
  });
  // An export that throws is answered 500, which ends the response and releases its slot.
  app.use((_error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    res.status(500).json({ error: 'the export failed' });
  });
  return { app, limiter };
}
