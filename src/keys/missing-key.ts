// What a rule does with a request in which its key finds nothing: skip the rule (warning once when the rule did
// not say so), or refuse the request (`missing: 'refuse'`).
import { RateLimitRequestError } from '../errors.js';
import type { KeySpec } from '../types.js';
import { KEY_MISSING_WARNING, warnOnce } from '../warnings.js';

/** A rule's `missing`, as `Rule.missing` documents it. */
export type MissingKey = 'skip' | 'refuse';

/**
 * Called when a rule's key finds nothing in a request: throws the refusal (`'refuse'`), emits the one-time
 * warning (`missing` left out), or does nothing (an explicit `'skip'`).
 */
export type OnMissingKey = () => void;

/**
 * How a rule answers a request without its key. `stated`: the rule gave `missing` itself; a `'skip'` it did
 * not state warns once, since the rule may be silently off (an authentication middleware after the limiter).
 */
export function onMissingKey(
  rule: string,
  spec: KeySpec,
  missing: MissingKey,
  stated: boolean,
): OnMissingKey {
  const form = keyFormOf(spec);
  if (missing === 'refuse') {
    return () => {
      throw new RateLimitRequestError(
        'ERR_KEY_MISSING',
        `rule "${rule}": the request has ${absence(spec)}, and the rule refuses requests without its key (missing: 'refuse'); nothing was consumed`,
        form === undefined ? {} : { field: form },
      );
    };
  }
  if (stated) return () => {};
  const warn = warnOnce(KEY_MISSING_WARNING);
  return () =>
    warn(
      `rule "${rule}" keys on ${form === undefined ? 'a key function' : `'${form}'`}, but a request reached it with ${absence(spec)}, so the rule did not apply and the request passed it uncounted. ${remedy(spec)}; set missing: 'refuse' on the rule to answer such requests 400 instead, or missing: 'skip' where letting them pass is meant (which also ends this warning)`,
    );
}

/**
 * A key form as the 400's `field` and the messages name it: the form's own text, the parts of a composite
 * key joined by `, `; undefined for a key function, which has no form to name.
 */
export function keyFormOf(spec: KeySpec): string | undefined {
  if (typeof spec === 'string') return spec;
  if (!Array.isArray(spec)) return undefined;
  return spec.map((part) => (typeof part === 'string' ? part : 'key function')).join(', ');
}

/** What the request lacks, in words: "no user", "no 'x-api-key' header". */
function absence(spec: KeySpec): string {
  if (typeof spec === 'function') return 'nothing the key function returned';
  if (typeof spec !== 'string') return `none of the parts of its composite key (${keyFormOf(spec)})`;
  if (spec === 'user') return 'no user';
  if (spec.includes('{')) return `none of the fields of the template '${spec}'`;
  if (spec.startsWith('header:')) return `no '${spec.slice(7)}' header`;
  if (spec.startsWith('query.')) return `no query parameter '${spec.slice(6)}'`;
  if (spec.startsWith('param.')) return `no route param '${spec.slice(6)}'`;
  if (spec.startsWith('body.')) return `no body field '${spec.slice(5)}'`;
  return `no '${spec}'`;
}

/** What to fix, for the key forms whose absence is usually the app's wiring rather than the client. */
function remedy(spec: KeySpec): string {
  const forms = (Array.isArray(spec) ? spec : [spec]).filter((f): f is string => typeof f === 'string');
  if (forms.some((form) => form === 'user' || form.includes('{user}')))
    return "The user is read from req.user (Express, Nest), ctx.state.user (Koa), request.user (Fastify) or c.get('user') (Hono): put the middleware that sets it (authentication) before the rate limiter";
  if (forms.some((form) => /(^|\{)body\./.test(form)))
    return 'Clients that send the field get it counted: check that they send it, and that a body parser runs before the rate limiter';
  if (forms.some((form) => /(^|\{)param\./.test(form)))
    return "Route params are those of the route the limiter is attached to, or the ones the rule's own match captures (match: 'POST /orgs/:org/...')";
  return 'Check that clients send it, and that nothing before the rate limiter removes it';
}
