// What a key form reads of a request, from its spec: the client address, the body. For the facts the
// adapters act on (the untrusted-forwarded warning, parsing a body before the limiter).
import type { KeySpec } from '../types.js';

/** What a rule's key reads: `ip` for `'ip'` or `{ip}` in a template, `body` for `body.<path>` or `{body.<path>}`. */
export interface KeyReads {
  readonly ip: boolean;
  readonly body: boolean;
}

/** What a key form reads, in an array too; a function's reads are unknown, so none are claimed. */
export function keyReads(spec: KeySpec): KeyReads {
  const forms = (Array.isArray(spec) ? spec : [spec]).filter((f): f is string => typeof f === 'string');
  return {
    ip: forms.some((form) => form === 'ip' || form.includes('{ip}')),
    body: forms.some((form) => /(^|\{)body\./.test(form)),
  };
}
