// What to tell a newcomer for the configuration mistakes everyone makes once: the key forms, path-to-regexp 8
// path syntax (wildcards and optional parts changed from Express 4), cron field counts.

/** Every key form, for messages. */
export const KEY_FORMS =
  "'ip', 'user', 'header:<name>', 'body.<path>', 'query.<name>', 'param.<name>', a template such as " +
  "'sms:{body.phone}', a function (req) => string, or an array of these";

/** path-to-regexp's own error message: what it expected, where, in which path. */
const PATH_ERROR = /^(.+?) at index (\d+)(?:, expected [^:]+)?: (.*); visit \S+ for info$/s;

/**
 * What a path-to-regexp error means for the path the user wrote, in path-to-regexp 8's terms (Express 5
 * and @koa/router use the same version), with the corrected pattern where one can be built; undefined
 * when the error is not one of the known cases (the parser's own message is then shown).
 * For '/api/*': "a wildcard needs a name, as in '/api/*rest' (one or more segments) or '/api{/*rest}'
 * (also /api itself)".
 */
export function explainPathError(message: string): string | undefined {
  const parsed = PATH_ERROR.exec(message);
  if (parsed === null) return undefined;
  const [, problem, at, path] = parsed as unknown as [string, string, string, string];
  const before = path[Number(at) - 1];
  if (/:\w+\(/.test(path)) {
    return `a parameter cannot carry its own pattern (':id(\\d+)'); match ':id' and check it in a key function`;
  }
  if (path.includes('(')) {
    return `regular-expression groups are not supported; use a named wildcard such as '*rest' or a parameter such as ':id'`;
  }
  if (problem === 'Missing parameter name' && before === '*') {
    const head = path.slice(0, Number(at) - 1);
    const tail = path.slice(Number(at));
    // A trailing '/*' can also take the slash into an optional part, so that the bare prefix matches too.
    const bare = head.endsWith('/') && head.length > 1 && tail === '' ? head.slice(0, -1) : undefined;
    const orBare = bare === undefined ? '' : ` or '${bare}{/*rest}' (also ${bare} itself)`;
    return `a wildcard needs a name, as in '${head}*rest${tail}' (one or more segments)${orBare}`;
  }
  if (problem === 'Missing parameter name' && before === ':') {
    return `a parameter needs a name, as in ':id'`;
  }
  if (problem === 'Unexpected ?') {
    const fixed = path.replace(/\/:(\w+)\?/g, '{/:$1}');
    const example = fixed === path ? "'/users{/:id}'" : `'${fixed}'`;
    return `optional parts are written in braces, as in ${example}, not with '?'`;
  }
  return undefined;
}

/** Predefined schedules taken instead of fields ('@daily', '@hourly' ...; src/rules/cron.ts). */
const CRON_ALIAS = /^@\w+$/;

/** What a cron expression needs, for messages. */
export const CRON_FIELDS =
  'a cron expression of 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first';

/**
 * How many fields a cron expression has when that is wrong ('4 fields'), or undefined when it has 5
 * or 6 (or is an alias such as '@daily'): a cron parser would read 4 fields as something else and
 * report a confusing range error ("got value 0 expected range 1-31").
 */
export function cronFieldCount(expression: string): string | undefined {
  const trimmed = expression.trim();
  if (CRON_ALIAS.test(trimmed)) return undefined;
  const fields = trimmed === '' ? 0 : trimmed.split(/\s+/).length;
  if (fields === 5 || fields === 6) return undefined;
  return `${fields} field${fields === 1 ? '' : 's'}`;
}

/** How other rate limiters' middleware options name a window's length (in ms, or a duration string). */
const PEER_WINDOW_FIELDS = ['windowMs', 'timeWindow', 'duration', 'ttl'] as const;
/** How they name the limit. */
const PEER_LIMIT_FIELDS = ['limit', 'max'] as const;

/** A length in ms as the shortest duration text that says it exactly: 60000 → '1m', 1500 → '1500ms'. */
function durationText(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/**
 * The ratekeeper rule array that means the same as another limiter's options object (express-rate-limit's
 * `{ windowMs, limit }` or `max`, @fastify/rate-limit's `{ max, timeWindow }`, koa-ratelimit's
 * `{ duration, max }`, @nestjs/throttler's `{ ttl, limit }`), with the fields it was recognized by; undefined
 * when the value has none of them. Those libraries count in fixed windows keyed by the client address, so
 * the rule is a fixed window keyed on 'ip'; a length not given is their usual minute.
 * @example
 * rulesFromPeerOptions({ windowMs: 60000, limit: 100 }).rules
 * // "[{ name: 'api', key: 'ip', limit: 100, window: { type: 'fixed', size: '1m' } }]"
 */
export function rulesFromPeerOptions(value: unknown): { fields: string[]; rules: string } | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const options = value as Record<string, unknown>;
  const windowField = PEER_WINDOW_FIELDS.find((f) => options[f] !== undefined);
  const limitField = PEER_LIMIT_FIELDS.find((f) => options[f] !== undefined);
  // `limit` alone is also a ratekeeper rule's field: a rule without a window is not another library's shape.
  if (windowField === undefined && (limitField === undefined || 'name' in options || 'key' in options))
    return undefined;
  const length = windowField === undefined ? 60_000 : options[windowField];
  const size =
    typeof length === 'number' && Number.isSafeInteger(length) && length > 0
      ? `'${durationText(length)}'`
      : typeof length === 'string'
        ? `'${length.replace(/[^\w .-]/g, '')}'`
        : "'1m'";
  const given = limitField === undefined ? undefined : options[limitField];
  // A limit function is a ratekeeper limit too, of the request; a missing limit is left for the user to write.
  const limit =
    typeof given === 'number' && Number.isSafeInteger(given) && given > 0
      ? String(given)
      : typeof given === 'function'
        ? '(req) => number'
        : '<limit>';
  return {
    fields: [windowField, limitField].filter((f) => f !== undefined),
    rules: `[{ name: 'api', key: 'ip', limit: ${limit}, window: { type: 'fixed', size: ${size} } }]`,
  };
}

/**
 * What an adapter given neither rules nor a limiter was probably given, and what to write instead: another
 * limiter's options (the rule that means the same), an object holding `rules`, or one rule outside an array;
 * '' when the value is none of these.
 */
export function notRulesHint(value: unknown): string {
  const peer = rulesFromPeerOptions(value);
  if (peer !== undefined)
    return `; that is another rate limiter's options (${peer.fields.join(', ')}), and ratekeeper takes rules: the same limit is ${peer.rules}`;
  if (value === null || typeof value !== 'object') return '';
  const fields = value as Record<string, unknown>;
  if (Array.isArray(fields.rules)) return '; give the rules array itself, not an object holding it';
  if (typeof fields.name === 'string' && fields.window !== undefined)
    return `; one rule goes in an array: [{ name: '${fields.name.replace(/'/g, '')}', ... }]`;
  return '';
}
