// Fastify's request as the core sees it (and whether trustProxy believes every X-Forwarded-For entry), and its
// request and reply as the request sequence maps them.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Decision, RequestInfo } from '../src/index.js';
import { responseClosed } from './common.js';
import { type BadRequestBody, type ExchangeSettings, type HttpExchange, pathOf } from './exchange.js';
import { compileTrust, onUnixSocket, type Trust, type TrustProxy, unixSocketClient } from './proxy-trust.js';
import { responseEnded } from './response-ends.js';
import { FASTIFY_TRUST, type TrustSetting, type WiringCheck } from './wiring.js';

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
  return ipGetterOf(request)?.call({ raw: PROBE }) === '192.0.2.1';
}

/** Per request class (one per Fastify instance): whether it trusts no proxy. */
// Module-level: a fact of the Fastify instance, shared by every registration and Nest guard in the process that meets it.
const noProxyTrusted = new WeakMap<object, boolean>();

/**
 * Whether Fastify trusts no proxy at all (`trustProxy` unset, false or 0): its `ip` getter is then the
 * socket's peer and never reads the request's headers, which the getter of every `trustProxy` setting does.
 */
export function trustsNoProxy(request: FastifyRequest): boolean {
  const proto = Object.getPrototypeOf(request) as object;
  let answer = noProxyTrusted.get(proto);
  if (answer === undefined) {
    answer = readsNoHeaderForIp(proto);
    noProxyTrusted.set(proto, answer);
  }
  return answer;
}

function readsNoHeaderForIp(start: object): boolean {
  for (let proto: object | null = start; proto !== null; proto = Object.getPrototypeOf(proto)) {
    const getter = Object.getOwnPropertyDescriptor(proto, 'ip')?.get;
    if (getter === undefined) continue;
    let readsHeaders = false;
    const socket = { remoteAddress: '127.0.0.1' };
    const raw = {
      socket,
      get headers() {
        readsHeaders = true;
        return { 'x-forwarded-for': '192.0.2.1' };
      },
    };
    getter.call({ raw, socket });
    return !readsHeaders;
  }
  return true;
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

  /**
   * The path of the route Fastify chose, its parameters filled in, so rules match whatever reached the
   * handler: Fastify decodes `/%6Cogin`, and may ignore duplicate or trailing slashes and a `;` part
   * (`//login`, `/login//`, `/login;jsessionid=1`), and each is `/login` here. A request no route took
   * (a 404) is matched by its URL's path.
   */
  get path(): string {
    this.#path ??= routedPath(this.#request) ?? pathOf(this.#request.url);
    return this.#path;
  }

  /**
   * Fastify's `request.ip`; on a Unix domain socket, where it is undefined (the peer has no address, and
   * Fastify 5.12 and later ignore a number of hops), the entry the proxy there appended, read through the
   * `trustProxy` option compiled as Express compiles `trust proxy` (`unixSocketClient`).
   */
  get ip(): string | undefined {
    const request = this.#request;
    const ip = request.ip as string | undefined;
    if (ip !== undefined || !onUnixSocket(request.raw.socket)) return ip;
    const { trust } = proxyOption(request);
    return trust && unixSocketClient(request.headers['x-forwarded-for'] as string | undefined, trust);
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

/** A Fastify instance's `trustProxy` option: compiled as Express compiles `trust proxy`, and what Fastify does with it. */
interface ProxyOption {
  /** The option compiled; undefined when unset, false or 0, or not found. */
  trust: Trust | undefined;
  /** A number of hops that Fastify ignores (5.12 and later: its `request.ip` is the peer whatever the hops). */
  hopsIgnored: boolean;
}

// Module-level: a fact of the Fastify instance, shared by every registration and Nest guard in the process that meets it.
const proxyOptions = new WeakMap<object, ProxyOption>();

/**
 * The `trustProxy` option of the Fastify instance that took `request`. Fastify exposes it nowhere but in the
 * options it keeps under its `fastify.options` symbol (on the root instance, which child contexts inherit),
 * so it is read there.
 */
function proxyOption(request: FastifyRequest): ProxyOption {
  const server = request.server;
  let known = proxyOptions.get(server);
  if (known === undefined) {
    let option: TrustProxy | undefined;
    for (let at: object | null = server; at !== null; at = Object.getPrototypeOf(at)) {
      const key = Object.getOwnPropertySymbols(at).find((symbol) => symbol.description === 'fastify.options');
      if (key === undefined) continue;
      option = (at as Record<symbol, { trustProxy?: TrustProxy } | undefined>)[key]?.trustProxy;
      break;
    }
    const hopsIgnored =
      typeof option === 'number' && option > 0 && ipGetterOf(request)?.call(HOP_PROBE) === '127.0.0.1';
    known = { trust: compileTrust(option), hopsIgnored };
    proxyOptions.set(server, known);
  }
  return known;
}

/** A loopback peer behind one proxy entry: any hop count of 1 or more takes the entry. */
const HOP_PROBE = {
  raw: { socket: { remoteAddress: '127.0.0.1' }, headers: { 'x-forwarded-for': '192.0.2.1' } },
};

/** The `ip` getter of the request's class. */
function ipGetterOf(request: FastifyRequest): (() => unknown) | undefined {
  for (let proto = Object.getPrototypeOf(request); proto !== null; proto = Object.getPrototypeOf(proto)) {
    const getter = Object.getOwnPropertyDescriptor(proto, 'ip')?.get;
    if (getter !== undefined) return getter;
  }
  return undefined;
}

/** `:name`, `:name(regex)`, an optional `:name?`, or the wildcard `*` of a find-my-way pattern; `::` is a literal colon. */
const PATTERN_PARTS = /::|:([^/:(?-]+)(\([^/]*?\))?(\?)?|\*/g;

/**
 * The route's pattern with the request's parameters in it, each escaped as a path segment (a `/` inside
 * a parameter stays `%2F`, so it cannot make the path look like another route's); undefined when no route
 * took the request.
 */
export function routedPath(request: FastifyRequest): string | undefined {
  const pattern = request.routeOptions?.url;
  if (typeof pattern !== 'string' || !pattern.startsWith('/')) return undefined;
  const params = (request.params ?? {}) as Record<string, unknown>;
  const value = (name: string) => {
    const v = params[name];
    return typeof v === 'string' ? v : undefined;
  };
  const path = pattern.replace(PATTERN_PARTS, (part, name: string | undefined, _regex, optional) => {
    if (part === '::') return ':';
    if (name === undefined) return (value('*') ?? '').split('/').map(encodeURIComponent).join('/');
    const v = value(name);
    return v === undefined ? (optional === '?' ? '' : part) : encodeURIComponent(v);
  });
  return path.length > 1 && path.endsWith('/') && !pattern.endsWith('/') ? path.slice(0, -1) : path;
}

/** Fastify's request and reply as the request sequence needs them; Nest on Fastify uses it too. */
export class FastifyExchange implements HttpExchange {
  readonly #request: FastifyRequest;
  readonly #reply: FastifyReply;
  readonly #prefix: string;
  readonly handle: ((decision: Decision) => unknown) | undefined;
  /** Given by Nest's guard: the 400 for a refused key goes through the app's exception filters. */
  refuse?: (body: BadRequestBody) => void;
  /** How the untrusted-forwarded warning names the proxy setting (Nest on Fastify names its own). */
  readonly #trustSetting: TrustSetting;
  /** The route's own limiter (`config.rateLimit`, Nest's `@RateLimit`) decides, not the plugin's. */
  readonly attached: boolean;

  /**
   * `handle`: the app's own denial, or undefined for the default body; `prefix`: the route prefix the plugin
   * was registered under ('' for Nest, which registers every route with its full path).
   */
  constructor(
    request: FastifyRequest,
    reply: FastifyReply,
    handle: ((decision: Decision) => unknown) | undefined,
    prefix: string,
    settings: ExchangeSettings = {},
  ) {
    this.#request = request;
    this.#reply = reply;
    this.handle = handle;
    this.#prefix = prefix;
    this.#trustSetting = settings.trustSetting ?? FASTIFY_TRUST;
    this.attached = settings.attached ?? false;
    if (settings.refuse !== undefined) this.refuse = settings.refuse;
  }

  socket() {
    return this.#request.raw.socket;
  }

  spoofable(): string | undefined {
    if (!believesAnyProxy(this.#request)) return undefined;
    return `Fastify trustProxy is true (${this.#trustSetting.spoofable})`;
  }

  /**
   * No proxy setting, or a number of hops that Fastify ignores (its `request.ip` is the peer, the proxy):
   * except on a Unix domain socket, where the hops are counted (`FastifyRequestInfo.ip`).
   */
  untrusted(): TrustSetting | undefined {
    const request = this.#request;
    if (trustsNoProxy(request)) return this.#trustSetting;
    const ignored = proxyOption(request).hopsIgnored && !onUnixSocket(request.raw.socket);
    return ignored ? this.#trustSetting : undefined;
  }

  whenGone(cancel: () => void): () => void {
    return responseClosed(this.#reply.raw, cancel);
  }

  info(): RequestInfo {
    return new FastifyRequestInfo(this.#request);
  }

  keep(decision: Decision): void {
    // Typed by the plugin's declaration (adapters/fastify.ts), which Nest on Fastify does not load.
    (this.#request as { rateLimit?: Decision }).rateLimit = decision;
  }

  /**
   * Warns when, seen from inside the registration's route prefix, some rule would have matched the request
   * (rules written relative to the prefix). Fastify routes before any hook runs, so a method or URL changed
   * in a hook reroutes nothing: no other check.
   */
  unmatched(info: RequestInfo, wiring: WiringCheck): void {
    const prefix = this.#prefix;
    const path = info.path;
    if (prefix === '' || !path.toLowerCase().startsWith(prefix.toLowerCase())) return;
    const seen = { method: info.method, path };
    wiring.unmatched(seen, { method: info.method, path: path.slice(prefix.length) || '/' }, 'mounted');
  }

  sent(): boolean {
    return this.#reply.sent;
  }

  header(name: string, value: string, list: boolean): void {
    const previous = list ? this.#reply.getHeader(name) : undefined;
    this.#reply.header(name, previous === undefined ? value : `${previous}, ${value}`);
  }

  send(status: number, body: unknown): void {
    this.#reply.code(status);
    if (typeof body === 'string') this.#reply.type('text/plain; charset=utf-8');
    this.#reply.send(body);
  }

  /** A sent reply is complete: Fastify writes it whole. */
  end(): void {}

  finished(done: (status: number) => void): void {
    const reply = this.#reply;
    reply.raw.once('finish', () => done(reply.statusCode));
  }

  handled(done: () => void, lapse: () => void): void {
    responseEnded(this.#reply.raw, done, lapse);
  }
}
