// Fastify's request as the core sees it, and whether Fastify's trustProxy believes every X-Forwarded-For entry.
import type { FastifyRequest } from 'fastify';
import type { RequestInfo } from '../src/index.js';
import { pathOf, type Setup } from './common.js';

/** A chain of documentation addresses behind a public peer: only a trust-everything setting takes its left end. */
const PROBE = {
  socket: { remoteAddress: '198.51.100.1' },
  headers: { 'x-forwarded-for': Array.from({ length: 64 }, (_, i) => `192.0.2.${i + 1}`).join(', ') },
};

/**
 * Whether Fastify's `trustProxy` believes every `X-Forwarded-For` entry (`trustProxy: true`), which Fastify
 * does not expose: its `ip` getter is asked about a 65-hop request from a public address.
 */
export function believesAnyProxy(request: FastifyRequest): boolean {
  for (let proto = Object.getPrototypeOf(request); proto !== null; proto = Object.getPrototypeOf(proto)) {
    const getter = Object.getOwnPropertyDescriptor(proto, 'ip')?.get;
    if (getter !== undefined) return getter.call({ raw: PROBE }) === '192.0.2.1';
  }
  return false;
}

/** The request as the core sees it; `ip` is Fastify's own (after `trustProxy`), read only by rules that need it. */
export class FastifyRequestInfo implements RequestInfo {
  readonly method: string;
  readonly headers: RequestInfo['headers'];
  readonly #request: FastifyRequest;
  #path: string | undefined;

  constructor(request: FastifyRequest) {
    this.#request = request;
    this.method = request.method;
    this.headers = request.headers;
  }

  get path(): string {
    this.#path ??= pathOf(this.#request.url);
    return this.#path;
  }

  get ip(): string {
    return this.#request.ip;
  }

  get query(): Record<string, unknown> {
    return this.#request.query as Record<string, unknown>;
  }

  get params(): Record<string, unknown> {
    return this.#request.params as Record<string, unknown>;
  }

  get body(): unknown {
    return this.#request.body;
  }

  get user(): unknown {
    return (this.#request as { user?: unknown }).user;
  }
}

/**
 * For a request no rule matched: warns when, seen from inside the registration's route prefix, some rule
 * would have matched it (rules written relative to the prefix the plugin was registered under). Fastify
 * routes before any hook runs, so a method or URL changed in a hook reroutes nothing: no other check.
 */
export function warnUnmatched(config: Setup<FastifyRequest>, info: RequestInfo, prefix: string): void {
  const path = info.path;
  if (prefix === '' || !path.toLowerCase().startsWith(prefix.toLowerCase())) return;
  const seen = { method: info.method, path };
  config.wiring.unmatched(seen, { method: info.method, path: path.slice(prefix.length) || '/' }, 'mounted');
}
