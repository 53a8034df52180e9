// ratekeeper/console: a small operator web page (no build step, no outside assets) as a Node request handler.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { KeyOverride } from '../../calls/options.js';
import { assertKnownFields, fieldsOf } from '../../config/known-fields.js';
import { mustBe, refuse } from '../../config/refuse.js';
import { OPERATOR_DEFAULTS } from '../../defaults.js';
import { describe } from '../../errors.js';
import type { Limiter } from '../../limiter/limiter.js';
import type { WindowSpec } from '../../types.js';
import { readVisibleKey } from '../visible-key.js';
import { type Change, RULE_ACTIONS, readChange } from './change.js';
import { refuseChange } from './csrf.js';
import { buildPage, type Limiters, send } from './respond.js';

export interface OperatorConsoleOptions<Req extends IncomingMessage = IncomingMessage> {
  /**
   * Decides whether this request may use the console (read the app's session, a header set by your
   * auth proxy...). Required: a console without it would let anyone unlock anyone. Refused: 403.
   */
  authorize: (req: Req) => boolean | Promise<boolean>;
  /** The page's heading, e.g. the app and environment. @default 'ratekeeper console' */
  title?: string;
  /** Locked keys listed per rule, soonest unlock first (1-1000). @default 50 */
  lockedLimit?: number;
}

/** A Node request handler; `next` (Express, Connect) receives errors thrown by `authorize`. */
export type ConsoleHandler<Req extends IncomingMessage = IncomingMessage> = (
  req: Req,
  res: ServerResponse,
  next?: (error?: unknown) => void,
) => Promise<void>;

/**
 * The operator console for one limiter (or several, whose rule names differ): rules with their
 * windows and limits, locked keys per rule, a key lookup, unlock. Changes are POST forms with a CSRF
 * token; the page runs no script and loads nothing from elsewhere (a strict Content-Security-Policy).
 * @example
 * app.use('/ops', operatorConsole(limiter, { authorize: (req) => req.user?.role === 'support' }));
 */
export function operatorConsole<Req extends IncomingMessage = IncomingMessage>(
  limiters: Limiter | readonly Limiter[],
  options: OperatorConsoleOptions<Req>,
): ConsoleHandler<Req> {
  const config = resolve(limiters, options);
  return async (req, res, next) => {
    try {
      if ((await options.authorize(req)) !== true) {
        return send(res, 403, 'text/plain; charset=utf-8', 'Forbidden: this console is for operators.\n');
      }
      if (req.method === 'GET' || req.method === 'HEAD') {
        const url = new URL(req.url ?? '/', 'http://console');
        const rule = url.searchParams.get('rule') ?? undefined;
        const shown = url.searchParams.get('key');
        const key = shown === null ? undefined : keyShown(shown);
        if (key instanceof Error)
          return await buildPage(req, res, config, { status: 400, error: key.message });
        const done = url.searchParams.get('done') ?? undefined;
        return await buildPage(req, res, config, { rule, key, done });
      }
      if (req.method !== 'POST') {
        res.setHeader('Allow', 'GET, HEAD, POST');
        return send(res, 405, 'text/plain; charset=utf-8', 'Method Not Allowed\n');
      }
      const change = await readChange(req);
      if (typeof change === 'number')
        return send(res, change, 'text/plain; charset=utf-8', 'Bad request body\n');
      const refused = refuseChange(req, change.csrf);
      if (refused !== undefined)
        return await buildPage(req, res, config, {
          status: 403,
          error: `Refused: ${refused}. Nothing was changed.`,
        });
      return await apply(change, req, res, config);
    } catch (error) {
      if (next !== undefined) return next(error);
      if (!res.headersSent) send(res, 500, 'text/plain; charset=utf-8', 'Internal Server Error\n');
      else res.destroy();
    }
  };
}

async function apply(
  change: Change,
  req: IncomingMessage,
  res: ServerResponse,
  config: Limiters,
): Promise<void> {
  const limiter = config.byRule.get(change.rule);
  const badRequest = (why: string) =>
    buildPage(req, res, config, { status: 400, error: `Refused: ${why}. Nothing was changed.` });
  if (limiter === undefined) return badRequest(`no rule named '${change.rule}'`);
  // A rule-wide action (`limiter.setLimit`: every key, every process) carries no key.
  const onRule = RULE_ACTIONS.includes(change.action);
  let key = '';
  if (!onRule) {
    if (change.key === '') return badRequest('no key given');
    const shown = keyShown(change.key);
    if (shown instanceof Error) return badRequest(shown.message);
    key = shown;
  }
  const limit = /^\d{1,15}$/.test(change.limit) ? Number(change.limit) : Number.NaN;
  // An override with a window may leave the limit empty: the window alone.
  const windowOnly = change.action === 'override' && change.window !== '' && change.limit === '';
  if ((change.action === 'override' || change.action === 'rule-limit') && Number.isNaN(limit) && !windowOnly)
    return badRequest(`the limit must be a whole number, got '${change.limit}'`);
  const options = change.for === '' ? {} : { for: change.for };
  try {
    if (change.action === 'unlock') {
      // Through reset: the store clears count, lock and level, and every process's deny cache forgets the key.
      await limiter.reset(change.rule, key);
    } else if (change.action === 'clear-override') await limiter.override(change.rule, key, null);
    else if (change.action === 'override')
      await limiter.override(change.rule, key, overrideOf(limiter, change, limit), options);
    else if (change.action === 'clear-rule-limit') await limiter.setLimit(change.rule, null);
    else await limiter.setLimit(change.rule, limit, options);
  } catch (error) {
    // The limiter's own refusals (a bad limit or duration, a store without overrides) are the operator's
    // to fix; anything else is the store failing.
    // By name, not instanceof: the limiter may come from the package's other module format (ESM/CJS).
    const { name, message } = error as Error;
    if (name === 'RateLimitConfigError' || name === 'RateLimitRequestError') return badRequest(message);
    return buildPage(req, res, config, {
      status: 503,
      error: `The store failed: ${message}. Nothing was changed.`,
    });
  }
  res.statusCode = 303;
  const back = onRule
    ? { done: change.action, rule: change.rule }
    : { rule: change.rule, key: change.key, done: change.action };
  res.setHeader('Location', `?${new URLSearchParams(back)}`);
  res.end();
}

/**
 * A key as the page shows it (`visibleKey`), which its links and forms carry and an operator types, read
 * back to the key; an Error naming a backslash that starts no escape.
 */
function keyShown(text: string): string | Error {
  try {
    return readVisibleKey(text);
  } catch (error) {
    return error as Error;
  }
}

function resolve<Req extends IncomingMessage>(
  limiters: Limiter | readonly Limiter[],
  options: OperatorConsoleOptions<Req>,
): Limiters {
  if (options === null || typeof options !== 'object' || typeof options.authorize !== 'function') {
    refuse(
      'ERR_OPTION',
      'operatorConsole',
      mustBe(
        'options.authorize',
        'a function (req) => boolean deciding who may use the console',
        options?.authorize,
      ),
    );
  }
  assertKnownFields(
    options,
    fieldsOf<OperatorConsoleOptions<Req>>({ authorize: true, title: true, lockedLimit: true }),
    'operatorConsole',
  );
  const title = options.title ?? OPERATOR_DEFAULTS.consoleTitle;
  const lockedLimit = options.lockedLimit ?? OPERATOR_DEFAULTS.consoleLockedLimit;
  if (typeof title !== 'string' || title === '') {
    refuse('ERR_OPTION', 'operatorConsole', mustBe('title', 'a non-empty string', title));
  }
  if (!Number.isSafeInteger(lockedLimit) || lockedLimit < 1 || lockedLimit > 1000) {
    refuse('ERR_OPTION', 'operatorConsole', mustBe('lockedLimit', 'an integer from 1 to 1000', lockedLimit));
  }
  const list = Array.isArray(limiters) ? limiters : [limiters];
  const byRule = new Map<string, Limiter>();
  for (const limiter of list as Limiter[]) {
    if (typeof limiter?.reset !== 'function' || !Array.isArray(limiter.rules)) {
      refuse(
        'ERR_OPTION',
        'operatorConsole',
        `expects a limiter from createLimiter (or an array of them), got ${describe(limiter)}`,
      );
    }
    for (const rule of limiter.rules) {
      if (byRule.has(rule.name)) {
        refuse('ERR_OPTION', 'operatorConsole', `two limiters have a rule named '${rule.name}'`);
      }
      byRule.set(rule.name, limiter);
    }
  }
  return { limiters: list as Limiter[], byRule, title, lockedLimit };
}

/** The form's override: the limit, or with a window typed, the window of the rule's type (and the limit, if typed). */
function overrideOf(limiter: Limiter, change: Change, limit: number): number | KeyOverride {
  if (change.window === '') return limit;
  // The limiter found the rule (its facts are there); its own check refuses a type that cannot be chosen.
  const facts = limiter.ruleFacts.find((f) => f.name === change.rule);
  const window = { type: facts?.type, size: change.window } as WindowSpec;
  return change.limit === '' ? { window } : { limit, window };
}
