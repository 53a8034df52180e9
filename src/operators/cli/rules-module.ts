// `--rules <module>`: the app's own module, ESM or CommonJS, read for its rule arrays and limiters.
import { existsSync } from 'node:fs';
import { extname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Limiter } from '../../limiter/limiter.js';
import type { Rule } from '../../types.js';
import { OperatorError, redactUrl } from './connect.js';

/** What a module brings: rule arrays (decided on the command line's own store) and ready limiters. */
export interface RulesModule {
  /** Rule arrays, by the export that held them. */
  ruleSets: Array<{ from: string; rules: Rule[] }>;
  /** Limiters exported by the module, used as they are, with their own stores. */
  limiters: Array<{ from: string; limiter: Limiter }>;
}

/** Node's codes for a TypeScript module it cannot run itself (Node 20: any; later Nodes: beyond erasable types). */
const TYPESCRIPT_REFUSED = new Set(['ERR_UNKNOWN_FILE_EXTENSION', 'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX']);

/**
 * Imports the module and collects `rules`, a default rule array, and every exported limiter.
 * @param typed the command line's arguments, to show the command that loads a TypeScript module under tsx
 */
export async function loadRulesModule(
  specifier: string,
  cwd: string,
  typed: readonly string[] = ['--rules', specifier],
): Promise<RulesModule> {
  const path = resolve(cwd, specifier);
  if (!existsSync(path)) {
    throw new OperatorError(`--rules ${specifier}: no such file (looked for ${path})`);
  }
  let exports: Record<string, unknown>;
  try {
    exports = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (error) {
    const ts = ['.ts', '.mts', '.cts'].includes(extname(path));
    if (ts && TYPESCRIPT_REFUSED.has((error as { code?: string }).code ?? '')) {
      throw new OperatorError(
        `--rules ${specifier}: Node ${process.versions.node} cannot import this TypeScript module. ` +
          'Run the command under tsx (npm install -D tsx), as:\n' +
          `  NODE_OPTIONS="--import tsx" npx ratekeeper ${typed.map(shellWord).join(' ')}\n` +
          `or point --rules at the built .js. (${(error as Error).message})`,
      );
    }
    throw new OperatorError(`--rules ${specifier}: the module failed to load: ${(error as Error).message}`);
  }
  const found: RulesModule = { ruleSets: [], limiters: [] };
  const seen = new Set<unknown>();
  const take = (from: string, value: unknown): void => {
    if (value === undefined || value === null || seen.has(value)) return;
    seen.add(value);
    if (isLimiter(value)) found.limiters.push({ from, limiter: value });
    else if (/rules$/i.test(from) || from === 'default') {
      if (isRuleArray(value)) found.ruleSets.push({ from, rules: value });
    }
  };
  // A CommonJS module's `module.exports` is the ESM `default`; its own fields are looked at too.
  const fromDefault =
    exports.default !== null && typeof exports.default === 'object' && !Array.isArray(exports.default)
      ? Object.entries(exports.default as Record<string, unknown>).map(
          ([k, v]) => [`default.${k}`, v] as const,
        )
      : [];
  for (const [name, value] of [...Object.entries(exports), ...fromDefault]) take(name, value);
  if (found.ruleSets.length === 0 && found.limiters.length === 0) {
    const names = Object.keys(exports).join(', ') || 'nothing';
    throw new OperatorError(
      `--rules ${specifier}: exports no rules (an array named \`rules\` or the default export) and no limiter; it exports ${names}`,
    );
  }
  return found;
}

/** Duck-typed rather than `instanceof`: the app's limiter may come from the other module format (ESM/CJS). */
function isLimiter(value: unknown): value is Limiter {
  const l = value as Partial<Limiter>;
  return (
    typeof l === 'object' &&
    typeof l.status === 'function' &&
    typeof l.reset === 'function' &&
    typeof l.locked === 'function' &&
    Array.isArray(l.ruleNames)
  );
}

function isRuleArray(value: unknown): value is Rule[] {
  return (
    Array.isArray(value) &&
    value.length > 0 &&
    value.every((r) => r !== null && typeof r === 'object' && typeof (r as Rule).name === 'string')
  );
}

/** An argument as a POSIX shell reads it back: bare when plain, else single-quoted; a URL's password hidden. */
function shellWord(arg: string): string {
  const shown = arg.replace(/[a-z][a-z0-9+.-]*:\/\/\S*/gi, (url) => redactUrl(url));
  return /^[\w@%+=:,./-]+$/.test(shown) ? shown : `'${shown.replace(/'/g, `'\\''`)}'`;
}
