// The attack suite's shared setup: the example app booted on a fresh store with a test clock, and the requests
// an attacker (or the account's owner) sends.
import http, { type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import request from 'supertest';
import type { ExampleAppOptions } from '../../../../examples/rules.js';
import type { Limiter } from '../../../../src/index.js';
import { PATIENT, trackResponses, trackStore } from '../../../support/settle.js';
import type { StoreFactory } from '../../../support/stores.js';

/** A framework's example app as a request listener, with its two limiters. */
export interface Framework {
  name: string;
  create(options: ExampleAppOptions): { listener: RequestListener; limiter: Limiter; loginLimiter: Limiter };
  /** The framework's default denial body, when it is not `{ error, retryAfter }` (Nest's `{ statusCode, message }`). */
  denialBody?: (retryAfterSeconds: number) => unknown;
}

export const START = Date.parse('2026-03-02T00:00:00Z'); // 08:00 in Asia/Shanghai
export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;
export const WRONG = 'hunter2';
/** The example apps' device-cookie key in these tests. */
export const DEVICE_SECRET = 'a test secret of at least thirty-two bytes';
export const RIGHT = 'correct-horse';

/** The n-th address of a botnet: distinct IPv4 addresses (n < 2^24). */
export const bot = (n: number) => `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;

export interface Attempt {
  ip: string;
  username?: unknown;
  password?: unknown;
  cookie?: string;
  path?: string;
}

/**
 * Registers the suite's hooks (call it inside a `describe`) and returns its helpers. `time.now` is the
 * stores' and the apps' clock, back at START before each test.
 */
export function attackContext(framework: Framework, stores: StoreFactory) {
  const time = { now: START };
  const clock = () => time.now;
  const open: Array<{ server: http.Server; limiters: Limiter[] }> = [];

  beforeEach(() => {
    time.now = START;
  });
  afterEach(async () => {
    for (const { server, limiters } of open.splice(0)) {
      server.close();
      await Promise.all(limiters.map((l) => l.close()));
    }
  });

  /** Boots the example app on a fresh store, listening on a free port. */
  async function boot(options: ExampleAppOptions = {}) {
    const tracked = trackStore(await stores.makeStore(clock));
    const built = framework.create({
      store: tracked.store,
      clock,
      trustProxy: 1,
      scryptCost: 1024, // fast fake password hashes
      deviceSecret: DEVICE_SECRET,
      limiterOptions: PATIENT, // every figure asserted is the store's
      ...options,
    });
    const server = http.createServer(built.listener);
    const responsesClosed = trackResponses(server);
    server.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    open.push({ server, limiters: [built.limiter, built.loginLimiter] });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    /**
     * Waits for the outcome of every answered request to reach the store: the adapters report it as the
     * response goes out, which on a shared store lands a round trip or two after the client has it.
     */
    const settle = async (): Promise<void> => {
      await responsesClosed();
      await tracked.idle();
    };
    return { ...built, url, settle };
  }

  type App = Awaited<ReturnType<typeof boot>>;

  function login(app: App, a: Attempt) {
    const body: Record<string, unknown> = {};
    if (a.username !== undefined) body.username = a.username;
    body.password = a.password ?? WRONG;
    const req = request(app.url)
      .post(a.path ?? '/login')
      .set('x-forwarded-for', a.ip)
      .send(body);
    return a.cookie === undefined ? req : req.set('cookie', a.cookie);
  }
  /** Alice logs in from `ip` and gets her device cookie. */
  async function deviceOf(app: App, ip = '203.0.113.7'): Promise<string> {
    const res = await login(app, { ip, username: 'alice', password: RIGHT }).expect(200);
    const setCookie = res.headers['set-cookie'] as unknown as string[] | undefined;
    expect(setCookie?.[0]).to.match(/^__Host-device=[^;]+; Max-Age=2592000; Path=\/; Secure; HttpOnly/);
    await app.settle();
    return (setCookie?.[0] ?? '').split(';')[0] as string;
  }
  /**
   * A JSON body sent with another content type (`null`: none), as a handler that parses any body as JSON
   * (Hono's `c.req.json()`) still reads it.
   */
  function typed(app: App, path: string, ip: string, type: string | null, body: Record<string, unknown>) {
    const req = request(app.url).post(path).set('x-forwarded-for', ip);
    const text = JSON.stringify(body);
    if (type === null) return req.unset('content-type').send(Buffer.from(text));
    return req.set('content-type', type).send(text);
  }
  function code(app: App, ip: string, body: Record<string, unknown>, path = '/sms/code') {
    return request(app.url).post(path).set('x-forwarded-for', ip).send(body);
  }

  return { framework, time, boot, login, deviceOf, code, typed };
}

export type AttackContext = ReturnType<typeof attackContext>;
export type App = Awaited<ReturnType<AttackContext['boot']>>;
