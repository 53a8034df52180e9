// The request sequence every HTTP adapter runs, written once; an adapter maps its framework to `HttpExchange`.
import { RateLimitRequestError } from '../src/errors.js';
import { appendsField, type HeaderField } from '../src/headers.js';
import type { Decision, Limiter, RequestInfo } from '../src/index.js';
import { UNTRUSTED_FORWARDED_WARNING, warnOncePerProcess } from '../src/warnings.js';
import type { Setup } from './common.js';
import type { TrustSetting, WiringCheck } from './wiring.js';

/**
 * One request and its response, as the sequence needs them. Each framework implements it once
 * (`adapters/<framework>-exchange.ts`); Nest's guard uses the Express and the Fastify ones.
 */
export interface HttpExchange {
  /** The client's connection, to tell whether it is gone; undefined where the runtime shows none. */
  socket(): ClientSocket | null | undefined;
  /** The warning's words for the framework's proxy setting when it believes every `X-Forwarded-For` entry. */
  spoofable(): string | undefined;
  /** The framework's proxy setting, named for the untrusted-forwarded warning, when it trusts no proxy at all. */
  untrusted(): TrustSetting | undefined;
  /**
   * Arranges for `cancel` to be called when the client goes (at once if it has): the response closes before
   * it finished, or the request's signal aborts. Returns what undoes the arrangement.
   */
  whenGone(cancel: () => void): () => void;
  /** The request as the core sees it. */
  info(): RequestInfo | Promise<RequestInfo>;
  /**
   * True when the limiter is attached to the one route this request took (Fastify's `config.rateLimit`,
   * Nest's `@RateLimit`, a middleware on one Express or Hono route), not to the whole app.
   */
  readonly attached?: boolean;
  /** Puts the decision where the app reads it (`req.rateLimit`, `ctx.state.rateLimit`, `c.get('rateLimit')`). */
  keep(decision: Decision): void;
  /**
   * For a request no rule matched: the wiring warnings (adapters/wiring.ts) the framework can give, when
   * the app routes the request as one some rule matches.
   */
  unmatched(info: RequestInfo, wiring: WiringCheck): void;
  /** Whether the response's headers are out already (an earlier middleware began the response). */
  sent(): boolean;
  /** Sets one rate-limit header; `list`: added to a value an earlier limiter set, as a list. */
  header(name: string, value: string, list: boolean): void;
  /**
   * Sets the rate-limit header fields (`Retry-After` left out when `withoutRetryAfter`) unless the
   * response's headers are out already, without asking first: where present, `sent` and `header` are not
   * used for them. Express's: a property read on an Express 5 response is slow, and `headersSent` would
   * be one more per request (bench/RESULTS.md).
   */
  headers?(fields: readonly HeaderField[], withoutRetryAfter: boolean): void;
  /** The app's own denial (the adapter's `handler` option), or undefined for the default one. */
  readonly handle: ((decision: Decision) => unknown) | undefined;
  /** Sends the default denial: `status`, and `body` as text (a string) or JSON (anything else). */
  send(status: number, body: unknown): void;
  /**
   * Answers a request whose key the limiter refused (`badRequest`'s body): where absent, `send(400, body)`.
   * Nest's guard throws it through the app's exception filters instead.
   */
  refuse?(body: BadRequestBody): void | Promise<void>;
  /** Ends a response whose headers were out before a denial: no status or body can follow them. */
  end(): void;
  /**
   * Calls `done` with the final status once the response is written: on its `finish` (Express, Fastify,
   * Nest; never for a broken connection), or after the rest of the app ran (Koa, Hono).
   */
  finished(done: (status: number) => unknown): void;
  /**
   * Calls `done` once when the app is done with the request (a concurrency rule's slot is then released):
   * the response is ended (its `end()` called, by the handler or the framework), or the rest of the app
   * ran and its response went out or was abandoned (Koa, Hono). A client that goes first does not count:
   * its handler may still be working. Node responses: adapters/response-ends.ts. `lapse`: the response was
   * begun by hand and its client went: the slot is no longer renewed (it lapses a lease later unless `done`
   * comes first).
   */
  handled(done: () => unknown, lapse: () => void): void;
}

/**
 * What an adapter fixes about the exchanges it builds on another framework's mapping (Nest's guard on the
 * Express or Fastify one), given at construction; each one left out is the framework's own answer.
 */
export interface ExchangeSettings {
  /** The limiter is a route's own (see `HttpExchange.attached`). */
  readonly attached?: boolean;
  /** How the untrusted-forwarded warning names the proxy setting. */
  readonly trustSetting?: TrustSetting;
  /** Answers a request whose key the limiter refused (see `HttpExchange.refuse`). */
  readonly refuse?: (body: BadRequestBody) => void;
}

/**
 * What the adapter does next: `'next'` runs the rest of the app; `'answered'`: the denial is sent, nothing
 * more runs; `'gone'`: the client's connection is closed, nothing is answered and nothing more runs.
 */
export type Exchanged = 'next' | 'answered' | 'gone';

/** How often a middleware looks at the framework's proxy settings for the spoofable-IP warning (1: its first request). */
export const SPOOF_CHECK_EVERY = 256;

/**
 * The request sequence: client gone? skip? the proxy warnings, the request info, the decision, headers,
 * the denial or the pass, and the outcome when the response finishes. `request` is what the options'
 * functions (`skip`, `onLimited`) receive. Errors (a throwing `skip`, key function or `handler`) are thrown
 * to the adapter, which hands them to the framework's error handling; nothing is consumed for them.
 * slowDown runs it with its `pacing`: every request is recorded (past the limit too), and one over a limit
 * waits instead of being denied (no `Retry-After`), or is denied when its key holds all the waits it may.
 */
export async function exchange<Req>(setup: Setup<Req>, http: HttpExchange, request: Req): Promise<Exchanged> {
  // Reset after writing the request: nothing to answer, nothing to run.
  if (clientGone(http.socket())) return 'gone';
  if (setup.skip !== undefined && (await setup.skip(request))) return 'next';
  // The proxy settings on a middleware's first request and every SPOOF_CHECK_EVERY-th after (a setting
  // changed while the app runs is still found): reading them on every request would be slow on Express 5.
  if (!setup.warned) {
    if (setup.spoofChecks === 0) {
      const setting = http.spoofable();
      if (setting !== undefined) setup.warnSpoofable(setting);
    }
    setup.spoofChecks = (setup.spoofChecks + 1) % SPOOF_CHECK_EVERY;
  }
  // Only Hono's may be a promise (it reads a body); awaiting a plain value would cost a turn of the
  // microtask queue on every request.
  const read = http.info();
  let info = read instanceof Promise ? await read : read;
  // Asking reads the request, slow on Express 5: only for path rules.
  if (setup.pathRules && http.attached === true) info = routeRelative(setup.limiter, info) ?? info;
  const pacing = setup.pacing;
  let decision: Decision;
  try {
    decision = await (pacing === undefined ? setup.limiter.check(info) : setup.limiter.recordRequest(info));
  } catch (error) {
    // An object or array where a rule reads a key, or no key for a rule with missing: 'refuse': answered 400;
    // nothing was consumed.
    const body = badRequest(error);
    if (body === undefined) throw error;
    if (http.refuse !== undefined) await http.refuse(body);
    else if (http.sent()) http.end();
    else http.send(400, body);
    return 'answered';
  }
  // Gone while the store decided: the handler must not run; what was reserved stays counted, slots held are freed.
  if (clientGone(http.socket())) {
    if (holdsSlots(decision)) void setup.limiter.release(decision);
    return 'gone';
  }
  // A limiter that matched no rule sets no header and leaves the decision of an earlier one in place.
  if (decision.rules.length === 0) {
    if (http.attached === true) setup.wiring.unattached(info);
    else http.unmatched(info, setup.wiring);
    return 'next';
  }
  setup.forwarded.check(info, decision, http);
  http.keep(decision);
  // Paced (slowDown): the wait this request earns, undefined when its key may hold no more waits (refused).
  const waitMs = pacing === undefined || decision.allowed ? 0 : pacing.plan(decision);
  const refused = pacing === undefined ? !decision.allowed : waitMs === undefined;
  // A request that waits is not refused: it is told no time to retry after.
  const withoutRetryAfter = !refused && pacing !== undefined;
  if (http.headers !== undefined) http.headers(setup.headerFields(decision), withoutRetryAfter);
  else if (!http.sent()) {
    for (const [name, value] of setup.headerFields(decision)) {
      if (!withoutRetryAfter || name !== 'Retry-After') http.header(name, value, appendsField(name, value));
    }
  }
  if (refused || decision.dryRun) setup.onLimited?.(decision, request);
  if (refused) {
    if (http.handle !== undefined) await http.handle(decision);
    else if (http.sent()) http.end();
    else http.send(setup.statusCode, setup.body(decision));
    return 'answered';
  }
  // Gone while it waited: nothing to answer, the handler must not run; the request stays counted.
  if (pacing !== undefined && waitMs !== undefined && waitMs > 0) {
    if (!(await pacing.wait(waitMs, decision, request, (cancel) => http.whenGone(cancel)))) return 'gone';
  }
  // Nothing to report (no rule counts outcomes): the response is not listened to.
  if (setup.reports) http.finished((status) => setup.report(decision, status));
  // Slots of concurrency rules: held while the app works on the request, not while the client waits.
  if (holdsSlots(decision)) {
    const limiter = setup.limiter;
    // A limiter of the other module format, older than letLapse, keeps renewing.
    http.handled(
      // The release's promise: a fetch handler's runtime keeps it alive (`waitUntil`) past the response.
      () => limiter.release(decision),
      () => limiter.letLapse?.(decision),
    );
  }
  return 'next';
}

/** Whether a decision holds concurrency slots (`RuleResult.slot`). */
function holdsSlots(decision: Decision): boolean {
  for (const r of decision.rules) if (r.slot !== undefined) return true;
  return false;
}

/** The body of the 400 answering a request whose key the limiter refused. */
export interface BadRequestBody {
  statusCode: 400;
  error: 'Bad Request';
  /**
   * What was wrong, naming the field: `'body.username must be a string, a number or a boolean'`, or for a
   * missing key `'user is required: the rate limiter keys on it'`.
   */
  message: string;
  /**
   * The key form whose value was refused or missing (`'body.username'`, `'user'`, `'header:x-api-key'`;
   * a composite key's parts joined by `, `); absent for a key function.
   */
  field?: string;
}

/**
 * The 400's body when `error` is the limiter refusing a request's key (`ERR_KEY_VALUE`: an object or an
 * array where a rule reads one; `ERR_KEY_MISSING`: no key at all for a rule with `missing: 'refuse'`), else
 * undefined: any other error is the app's, thrown to the framework.
 */
export function badRequest(error: unknown): BadRequestBody | undefined {
  if (!(error instanceof RateLimitRequestError)) return undefined;
  const field = error.field;
  let message: string;
  if (error.code === 'ERR_KEY_VALUE')
    message = `${field ?? 'a value the rate limiter keys on'} must be a string, a number or a boolean`;
  else if (error.code === 'ERR_KEY_MISSING')
    message = `${field ?? 'a value the rate limiter keys on'} is required: the rate limiter keys on it`;
  else return undefined;
  return { statusCode: 400, error: 'Bad Request', message, ...(field === undefined ? {} : { field }) };
}

/**
 * For a limiter attached to one route: when none of its rules matches the request's path, but some match it
 * without its leading segments (the prefix the route is mounted under: Nest's `setGlobalPrefix`, Fastify's
 * `register(..., { prefix })`, Hono's `app.route()`, an Express router's mount path), the rules see that
 * shorter path, the longest one some rule matches. Undefined when no such path exists.
 */
function routeRelative(limiter: Limiter, info: RequestInfo): RequestInfo | undefined {
  if (typeof limiter.matchingRules !== 'function') return undefined;
  const path = info.path;
  if (limiter.matchingRules(info.method, path).length > 0) return undefined;
  for (let at = path.indexOf('/', 1); at > 0; at = path.indexOf('/', at + 1)) {
    const rest = path.slice(at);
    if (rest !== '/' && limiter.matchingRules(info.method, rest).length > 0) return atPath(info, rest);
  }
  return undefined;
}

/** The request with another path; everything else read from it as it is. */
function atPath(info: RequestInfo, path: string): RequestInfo {
  return {
    method: info.method,
    headers: info.headers,
    path,
    get ip() {
      return info.ip as string;
    },
    get query() {
      return info.query as Record<string, unknown>;
    },
    get params() {
      return info.params as Record<string, unknown>;
    },
    get body() {
      return info.body;
    },
    get user() {
      return info.user;
    },
  };
}

/**
 * The path of a request URL without query string or fragment. An absolute-form target
 * (`POST http://host/login`, which the frameworks route by its path) yields its path, so it cannot
 * slip past a rule's `match`.
 */
export function pathOf(url: string): string {
  const query = url.indexOf('?');
  const fragment = url.indexOf('#');
  const end = query < 0 ? fragment : fragment < 0 ? query : Math.min(query, fragment);
  const path = end < 0 ? url : url.slice(0, end);
  if (path.startsWith('/')) return path;
  try {
    return new URL(path).pathname;
  } catch {
    return path;
  }
}

/** The parts of a Node socket that tell whether its client is still there. */
export interface ClientSocket {
  readonly destroyed?: boolean;
  readonly remoteAddress?: string | undefined;
  readonly localPort?: number | undefined;
}

/**
 * True when the client's connection is closed already. Its handler must not run: nothing can be sent
 * back, and a client that writes a whole request and resets the connection would otherwise have it
 * served (an SMS sent, a password checked), with no address left to key it on. Node marks such a
 * socket destroyed only once it reads the reset, after the request was dispatched; the peer address is
 * gone at once (the kernel answers no peer name for a reset connection), so a TCP socket (one with a
 * local port) without a remote address is gone too. A Unix socket has neither and is not.
 */
export function clientGone(socket: ClientSocket | null | undefined): boolean {
  if (socket === null || socket === undefined) return false;
  return socket.destroyed === true || (socket.remoteAddress === undefined && socket.localPort !== undefined);
}

// Module-level: Node's warnings are process-wide, and this one is given once per process, whichever limiter meets it.
const warnUntrusted = warnOncePerProcess(UNTRUSTED_FORWARDED_WARNING);

/** The header a proxy forwards the client's address in, when the request carries one. */
export function forwardedHeader(headers: RequestInfo['headers']): string | undefined {
  if (headers['x-forwarded-for'] !== undefined) return 'X-Forwarded-For';
  if (headers.forwarded !== undefined) return 'Forwarded';
  return undefined;
}

export interface ForwardedCheck {
  /**
   * After a decision: warns (once per process) when the request carries `X-Forwarded-For` or
   * `Forwarded`, one of the rules that decided it keys on `'ip'`, and `framework.untrusted()` (asked
   * only then) names the setting of a framework that trusts no proxy (undefined when it trusts one).
   */
  check(info: RequestInfo, decision: Decision, framework: { untrusted(): TrustSetting | undefined }): void;
}

/**
 * The untrusted-forwarded check of one limiter. An app behind a proxy that it does not trust sees the
 * proxy's address on every request, so an `'ip'` rule puts all its clients in one bucket; a request that
 * reached the app directly carrying the header is a client's own claim, rightly ignored: the warning says both.
 */
export function createForwardedCheck(limiter: Limiter): ForwardedCheck {
  const ipRules = new Set(limiter.ruleFacts.filter((rule) => rule.keysOnIp).map((rule) => rule.name));
  return {
    check(info, decision, framework) {
      if (ipRules.size === 0) return;
      // The header first: most requests carry none, and reading it is all they cost; then whether the
      // process has warned already (then headers and settings are looked at no more).
      const header = forwardedHeader(info.headers);
      if (header === undefined || warnUntrusted.done) return;
      const rule = decision.rules.find((r) => ipRules.has(r.rule));
      if (rule === undefined) return;
      const setting = framework.untrusted();
      if (setting === undefined) return;
      warnUntrusted(
        `a request carrying ${header} reached rule "${rule.rule}", keyed on the client address, while ${setting.untrusted}. Behind a proxy every client then has the proxy's address and all share one bucket; a request that reached the app directly with the header is the client's own claim, rightly ignored`,
      );
    },
  };
}
