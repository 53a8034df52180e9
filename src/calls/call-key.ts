// The key of a wrapped call, from its arguments: a template such as '{0.email}' or 'sms:{1}', or a function.
import { refuse } from '../config/refuse.js';
import { describe, RateLimitRequestError } from '../errors.js';
import { identityOf } from '../keys/direct-key.js';
import { createExtractor } from '../keys/extractors.js';
import type { RequestInfo } from '../types.js';

/** A placeholder: an argument index, then own fields: `{0}`, `{1.email}`, `{0.user.id}`. */
const PLACEHOLDER = /\{([^{}]*)\}/g;
const ARGUMENT_PATH = /^\d+(\.[^.]+)*$/;

/**
 * The key of a call from its arguments, as an identity string (the string `status`, `reset` and
 * `override` take). Throws `RateLimitConfigError` now for a template it cannot read; the function it
 * returns throws `RateLimitRequestError` when the arguments give no key (nothing is consumed).
 *
 * A template is read by the rules' own key templates (keys/extractors.ts) over the arguments as a body, so it
 * behaves as they do: strings, finite numbers and booleans, own fields only, values escaped when several
 * placeholders share the key, and no two placeholders with only letters or digits between them. An
 * object or array where a placeholder reads is refused (`ERR_KEY`), as a missing value is.
 */
export function argumentKey<A extends unknown[]>(
  key: string | ((...args: A) => string | number),
): (args: A) => string {
  if (typeof key === 'function') {
    return (args) => {
      let value: unknown;
      try {
        value = key(...args);
      } catch (error) {
        throw new RateLimitRequestError(
          'ERR_KEY_FUNCTION',
          `wrap: key function threw: ${(error as Error)?.message ?? describe(error)}`,
          { cause: error },
        );
      }
      return identityOf(value);
    };
  }
  if (!key.includes('{')) {
    const constant = identityOf(key);
    return () => constant;
  }
  const bad = [...key.matchAll(PLACEHOLDER)].find((m) => !ARGUMENT_PATH.test(m[1] as string));
  if (bad !== undefined) {
    refuse(
      'ERR_KEY',
      'wrap',
      `key ${describe(key)} has the placeholder '${bad[0]}': use an argument index and own fields, such as '{0}' or '{1.email}'`,
    );
  }
  let extract: (req: RequestInfo) => string | undefined;
  try {
    extract = createExtractor(
      key.replace(PLACEHOLDER, (_, path: string) => `{body.${path}}`),
      { ipv6Subnet: 128, normalize: undefined },
    );
  } catch (error) {
    const reason = (error as Error).message.replaceAll('{body.', '{').replaceAll("'body.", "'");
    refuse('ERR_KEY', 'wrap', `key ${describe(key)} cannot be read: ${reason}`);
  }
  return (args) => {
    let identity: string | undefined;
    try {
      identity = extract({ method: '', path: '', headers: {}, body: args });
    } catch (error) {
      const field = (error as RateLimitRequestError).field?.replace(/^body\./, '');
      throw new RateLimitRequestError(
        'ERR_KEY',
        `wrap: key ${describe(key)} found an object or an array at {${field}}, where a key must be a string, a number or a boolean; nothing was consumed`,
        { cause: error },
      );
    }
    if (identity !== undefined) return identity;
    throw new RateLimitRequestError(
      'ERR_KEY',
      `wrap: key ${describe(key)} found no non-empty string, finite number or boolean in the arguments; nothing was consumed`,
    );
  };
}
