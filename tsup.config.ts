// Build: ESM and CommonJS bundles with declarations for every entry point, and the `ratekeeper` command.
import { defineConfig } from 'tsup';

export default defineConfig({
  entry: {
    index: 'src/index.ts',
    express: 'adapters/express.ts',
    koa: 'adapters/koa.ts',
    fastify: 'adapters/fastify.ts',
    hono: 'adapters/hono.ts',
    nest: 'adapters/nest.ts',
    fetch: 'adapters/fetch.ts',
    cloudflare: 'src/stores/durable-object/index.ts',
    console: 'src/operators/console/index.ts',
    prometheus: 'src/operators/prometheus.ts',
    cli: 'src/operators/cli/bin.ts',
  },
  format: ['esm', 'cjs'],
  dts: true,
  shims: true,
  // No source maps in the package: they were half its installed size, and the built files read as written.
  sourcemap: false,
  clean: true,
  target: 'node20',
  splitting: true,
  external: ['ioredis', 'express', 'koa', 'fastify', 'hono', 'prom-client', /^@nestjs\//],
});
