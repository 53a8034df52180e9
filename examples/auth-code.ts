// The seeds' e-mail auth-code service method, no HTTP: at most 1 code per address per 60 s and 5 per
// calendar hour, decided together by a standard `@limited` method decorator (no experimentalDecorators).
// Run directly (`npx tsx examples/auth-code.ts`), it sends codes to one address and prints what happened.
import { randomInt } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { createLimiter, type Limiter, limited, type Rule, type Store } from '../src/index.js';

/**
 * The seeds' two stacked annotations as two rules. Their `key` form is for HTTP (`POST` bodies with an
 * `email`); the decorator gives the key itself, from the method's first argument.
 */
export const AUTH_CODE_RULES: Rule[] = [
  { name: 'auth-code-minute', key: 'body.email', limit: 1, window: { type: 'fixed', size: '60s' } },
  { name: 'auth-code-hour', key: 'body.email', limit: 5, window: { type: 'calendar', unit: 'hour' } },
];

export interface AuthCodeRequest {
  email: string;
}

export interface AuthCodeServiceOptions {
  /** Where counts live (a RedisStore for several processes). @default new MemoryStore() */
  store?: Store;
  /** Delivers a code (an e-mail in production). */
  deliver: (email: string, code: string) => Promise<void>;
}

/** The service and the limiter behind it (for `status`, `reset` and `override` by address). */
export function createAuthCodeService(options: AuthCodeServiceOptions): {
  service: { sendAuthCode(po: AuthCodeRequest): Promise<string> };
  limiter: Limiter;
} {
  const limiter = createLimiter({ rules: AUTH_CODE_RULES, ...(options.store && { store: options.store }) });
  const { deliver } = options;

  class AuthCodeService {
    /** Sends a 6-digit code; a denied call throws RateLimitExceededError and sends nothing. */
    @limited(limiter, { rules: ['auth-code-minute', 'auth-code-hour'], key: '{0.email}' })
    async sendAuthCode(po: AuthCodeRequest): Promise<string> {
      const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
      await deliver(po.email, code);
      return code;
    }
  }
  return { service: new AuthCodeService(), limiter };
}

async function main(): Promise<void> {
  const { service, limiter } = createAuthCodeService({ deliver: async () => {} });
  for (const attempt of [1, 2]) {
    try {
      await service.sendAuthCode({ email: 'alice@example.com' });
      console.log(`attempt ${attempt}: code sent`);
    } catch (error) {
      console.log(`attempt ${attempt}: ${(error as Error).message}`);
    }
  }
  await limiter.close();
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
