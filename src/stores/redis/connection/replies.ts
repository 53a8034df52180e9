// Replies in the one shape the store reads, whatever the client and protocol: RESP2's, as ioredis 5 gives them.

/**
 * `reply` as a RESP2 client decodes it, whether the connection speaks RESP2 or RESP3 (node-redis 6 and
 * ioredis 6 default to RESP3): RESP3 booleans as RESP2 gives Lua's (true 1, false nil), doubles and big
 * numbers as strings, maps as flat key-value arrays, sets as arrays, and the [member, score] pairs of a
 * WITHSCORES reply flattened, scores as strings. A reply already in that shape is returned as is.
 */
export function resp2(reply: unknown, argv: readonly string[]): unknown {
  const decoded = decode(reply);
  if (!Array.isArray(decoded) || decoded.length === 0 || !Array.isArray(decoded[0])) return decoded;
  if (!argv.some((arg) => arg.length === 10 && arg.toUpperCase() === 'WITHSCORES')) return decoded;
  return (decoded as unknown[][]).flatMap(([member, score]) => [member, String(score)]);
}

function decode(reply: unknown): unknown {
  switch (typeof reply) {
    case 'string':
      return reply;
    case 'number':
      // An integer stays a number; a RESP3 double is a string under RESP2.
      return Number.isInteger(reply) ? reply : formatDouble(reply);
    case 'bigint':
      return String(reply);
    case 'boolean':
      return reply ? 1 : null;
    case 'undefined':
      return null;
    case 'object':
      return reply === null ? null : decodeObject(reply);
    default:
      return reply;
  }
}

function decodeObject(reply: object): unknown {
  if (Array.isArray(reply)) {
    // Copied only when an element changes: a script's array of numbers goes through untouched.
    let copy: unknown[] | undefined;
    for (let i = 0; i < reply.length; i++) {
      const item: unknown = reply[i];
      const decoded = decode(item);
      if (decoded !== item) {
        copy ??= reply.slice(0, i);
      }
      if (copy !== undefined) copy.push(decoded);
    }
    return copy ?? reply;
  }
  if (Buffer.isBuffer(reply)) return reply.toString();
  if (reply instanceof String) return reply.valueOf();
  if (reply instanceof Set) return [...reply].map(decode);
  if (reply instanceof Map) return [...reply].flat().map(decode);
  if (reply instanceof Error) return reply;
  return Object.entries(reply).flat().map(decode);
}

function formatDouble(value: number): string {
  if (value === Number.POSITIVE_INFINITY) return 'inf';
  if (value === Number.NEGATIVE_INFINITY) return '-inf';
  return String(value);
}
