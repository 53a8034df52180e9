// Answering the console's requests: the page gathered from the limiters, and the headers every answer carries.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { StoreHealth } from '../../limiter/failure-policy.js';
import type { Limiter } from '../../limiter/limiter.js';
import type { RuleStatus } from '../../types.js';
import { summarizeRule } from '../rule-summary.js';
import { visibleKey } from '../visible-key.js';
import { pageToken } from './csrf.js';
import { type RuleView, renderPage, STYLE_HASH } from './page.js';

export interface Limiters {
  limiters: Limiter[];
  byRule: ReadonlyMap<string, Limiter>;
  title: string;
  lockedLimit: number;
}

/** No script at all, the one stylesheet by its hash, forms only to this origin, never framed. */
const CSP = `default-src 'none'; style-src ${STYLE_HASH}; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`;

export function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.statusCode = status;
  res.setHeader('Content-Type', type);
  res.setHeader('Content-Security-Policy', CSP);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('X-Frame-Options', 'DENY');
  // Keys sit in the page's query string: never sent on to another site, never cached. ('no-referrer'
  // would also make the browser send `Origin: null` with the page's own forms, which are then refused.)
  res.setHeader('Referrer-Policy', 'same-origin');
  res.setHeader('Cache-Control', 'no-store');
  res.end(res.req?.method === 'HEAD' ? undefined : body);
}

/** What the page says after a change, by the `done` its redirect carries. */
const DONE: Record<string, string> = {
  unlock: 'Unlock sent for',
  override: 'Limit override set for',
  'clear-override': 'Limit override cleared for',
};

/** What the page says after a change to a whole rule. */
const RULE_DONE: Record<string, string> = {
  'rule-limit': 'Rule-wide limit set for every key of rule',
  'clear-rule-limit': 'Rule-wide limit cleared for rule',
};

export interface PageRequest {
  rule?: string | undefined;
  key?: string | undefined;
  done?: string | undefined;
  status?: number;
  error?: string;
}

/** Renders the page; a store that fails shows as an error on the page, never as a 500. */
export async function buildPage(
  req: IncomingMessage,
  res: ServerResponse,
  config: Limiters,
  view: PageRequest,
): Promise<void> {
  const errors: string[] = view.error === undefined ? [] : [view.error];
  const failed = (what: string) => (error: unknown) => {
    errors.push(`Could not ${what}: ${(error as Error)?.message ?? String(error)}`);
    return undefined;
  };
  const rules: RuleView[] = [];
  for (const limiter of config.limiters) {
    // A store without rule-wide limits (no `limits`) lists none; a failing store is said on the page.
    const ruleLimits = await limiter
      .limits()
      .catch((error: unknown) =>
        (error as Error)?.name === 'RateLimitConfigError' ? [] : failed('read the rule-wide limits')(error),
      );
    for (const rule of limiter.rules) {
      const entry: RuleView = { summary: summarizeRule(rule) };
      const ruleLimit = ruleLimits?.find((l) => l.rule === rule.name);
      if (ruleLimit !== undefined) entry.ruleLimit = ruleLimit;
      if (rule.lockout !== undefined) {
        entry.locked =
          (await limiter
            .locked(rule.name, { limit: config.lockedLimit })
            .catch(failed(`list the locked keys of '${rule.name}'`))) ?? [];
      }
      rules.push(entry);
    }
  }
  let status: RuleStatus | undefined;
  if (view.rule !== undefined && view.key !== undefined && view.key !== '') {
    const limiter = config.byRule.get(view.rule);
    if (limiter === undefined) errors.push(`No rule named '${view.rule}'.`);
    else
      status = await limiter.status(view.rule, view.key).catch(failed(`look '${visibleKey(view.key)}' up`));
  }
  const path = new URL((req as { originalUrl?: string }).originalUrl ?? req.url ?? '/', 'http://console')
    .pathname;
  const page = renderPage({
    title: config.title,
    token: pageToken(req, res, path),
    lockedLimit: config.lockedLimit,
    health: await worstHealth(config.limiters, failed('read the store health')),
    rules,
    ...(view.rule !== undefined && view.key !== undefined
      ? { lookup: { rule: view.rule, key: view.key, ...(status === undefined ? {} : { status }) } }
      : {}),
    ...(status !== undefined && view.done !== undefined && Object.hasOwn(DONE, view.done)
      ? {
          notice: `${DONE[view.done]} '${visibleKey(status.key)}' (rule ${status.rule}); its state now is below.`,
        }
      : {}),
    ...(view.key === undefined &&
    view.rule !== undefined &&
    view.done !== undefined &&
    Object.hasOwn(RULE_DONE, view.done)
      ? { notice: `${RULE_DONE[view.done]} ${view.rule}; what is in force is in the rules table below.` }
      : {}),
    ...(errors.length === 0 ? {} : { error: errors.join(' ') }),
  });
  send(res, view.status ?? 200, 'text/html; charset=utf-8', page);
}

/** One line for the page: a store that is down wins over one that is fine. */
async function worstHealth(
  limiters: Limiter[],
  onError: (error: unknown) => undefined,
): Promise<StoreHealth | undefined> {
  const all = await Promise.all(limiters.map((l) => l.health().catch(onError)));
  return all.find((h) => h?.state === 'down') ?? all.find((h) => h !== undefined);
}
