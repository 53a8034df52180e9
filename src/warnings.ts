// The one-time warnings ratekeeper emits (process warnings with a stable code) when a rule is silently wired
// off or weakened: each names what it saw, and is emitted once per rule (or middleware) that saw it.

/** A client IP any client can choose (Express `trust proxy` true, Koa `proxy` with `maxIpsCount` 0). */
export const SPOOFABLE_IP_WARNING = 'RATEKEEPER_SPOOFABLE_IP';
/**
 * A request carrying `X-Forwarded-For` or `Forwarded` reached an `'ip'` rule while the framework trusts no
 * proxy: behind a proxy every client then has the proxy's address, one bucket for all. Once per process.
 */
export const UNTRUSTED_FORWARDED_WARNING = 'RATEKEEPER_UNTRUSTED_FORWARDED';
/** An `'ip'` key met a request whose client address cannot be resolved; it shares `UNRESOLVED_IP_KEY`. */
export const UNRESOLVED_IP_WARNING = 'RATEKEEPER_UNRESOLVED_IP';
/** A `body.*` key met a request that carries a body nothing parsed (no body parser, or one after the limiter). */
export const UNPARSED_BODY_WARNING = 'RATEKEEPER_UNPARSED_BODY';
/**
 * A request no rule matched would have matched as the app routes it: the limiter is mounted at a prefix
 * (rules match the full original URL), or the URL or method was rewritten (method-override) around it.
 */
export const UNMATCHED_ROUTE_WARNING = 'RATEKEEPER_UNMATCHED_ROUTE';
/**
 * A rule whose `missing` is left out met a request in which its key finds nothing (no user: the
 * authentication middleware runs after the limiter, or not at all), and let it pass uncounted. Once per rule.
 */
export const KEY_MISSING_WARNING = 'RATEKEEPER_KEY_MISSING';
/** A rule that counts outcomes met a redirect (3xx): neither success nor failure, so nothing was reported. */
export const REDIRECT_OUTCOME_WARNING = 'RATEKEEPER_REDIRECT_OUTCOME';
/** The memory store grew past `maxKeys`: every key it could evict still denies. */
export const MEMORY_STORE_FULL_WARNING = 'RATEKEEPER_MEMORY_STORE_FULL';

/**
 * A Redis server holds ratekeeper's function names (or its library's name) for a library that is not
 * ratekeeper's: that library is never called, and the store runs its scripts by EVALSHA instead.
 */
export const FUNCTION_CONFLICT_WARNING = 'RATEKEEPER_FUNCTION_CONFLICT';

/** A `limiter.observe` hook threw (once per observer); the decision went on without it. */
export const OBSERVER_ERROR_WARNING = 'RATEKEEPER_OBSERVER_ERROR';

/** Node's `process` where the runtime has one (Node, Bun, Deno; a Worker with nodejs_compat), else undefined. */
export function hostProcess():
  | {
      emitWarning?: (message: string, options: { code: string }) => void;
      env?: Record<string, string | undefined>;
      stderr?: { write(text: string): unknown };
      pid?: number;
    }
  | undefined {
  return (globalThis as { process?: ReturnType<typeof hostProcess> }).process;
}

/** A warning as Node emits it (`process.emitWarning`, with its code), or on the console where there is no `process`. */
export function emitWarning(message: string, code: string): void {
  const emit = hostProcess()?.emitWarning;
  if (typeof emit === 'function') emit(message, { code });
  else console.warn(`[${code}] ${message}`);
}

/** A function that emits `code`'s warning the first time it is called, and does nothing after. */
export function warnOnce(code: string): (message: string) => void {
  let warned = false;
  return (message) => {
    if (warned) return;
    warned = true;
    emitWarning(`ratekeeper: ${message}`, code);
  };
}

/**
 * `warnOnce` for the whole process: however many middlewares, module copies (ESM and CommonJS, two installs)
 * or apps there are, `code`'s warning is emitted the first time any of them calls, and never again.
 */
export function warnOncePerProcess(code: string): { (message: string): void; readonly done: boolean } {
  const flag = Symbol.for(`ratekeeper.warned.${code}`);
  const flags = (hostProcess() ?? globalThis) as unknown as Record<symbol, boolean | undefined>;
  const warn = (message: string) => {
    if (flags[flag] === true) return;
    flags[flag] = true;
    emitWarning(`ratekeeper: ${message}`, code);
  };
  return Object.defineProperty(warn, 'done', { get: () => flags[flag] === true }) as typeof warn & {
    readonly done: boolean;
  };
}

/** A request value for a warning message: JSON-quoted (no forged log lines) and cut to 64 characters. */
export function quoted(value: unknown): string {
  const text = JSON.stringify(typeof value === 'string' ? value.slice(0, 64) : String(value)) ?? '';
  return typeof value === 'string' && value.length > 64 ? `${text}…` : text;
}
