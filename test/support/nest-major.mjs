// Module hook for RATEKEEPER_NEST=11: every `@nestjs/*` import resolves from test/nest11 (NestJS 11, a
// workspace of its own) instead of the root's NestJS 12, so the guard and the suites run on the previous major.
// Nest's own packages then find each other there too, by Node's resolution from their own place.
const NEST11 = new URL('../nest11/package.json', import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  if (specifier.startsWith('@nestjs/')) return nextResolve(specifier, { ...context, parentURL: NEST11 });
  return nextResolve(specifier, context);
}
