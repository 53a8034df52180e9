// A Worker run for real on workerd (through miniflare, the binary from npm): the entry is bundled with esbuild
// the way wrangler would (ESM, the `workerd`/`worker`/`browser` export conditions, nothing external), so what
// runs is what users deploy. Without `nodejsCompat` the runtime has no `node:` module at all: an import of
// one anywhere in the bundle fails the start, loudly.
import { build } from 'esbuild';
import { Miniflare, type MiniflareOptions } from 'miniflare';

export interface WorkerOptions {
  /** The Worker's entry (TypeScript or JavaScript), bundled with everything it imports. */
  entry: string;
  /** Durable Object bindings: binding name -> the class the entry exports. */
  durableObjects?: Record<string, string>;
  /** Plain text bindings (`env.NAME`). */
  bindings?: Record<string, string>;
  /** Turn on the `nodejs_compat` flag (off by default: the core must run without it). */
  nodejsCompat?: boolean;
}

export interface RunningWorker {
  /** The Worker's address on loopback, for real HTTP requests. */
  url: string;
  /** The bundle's size in bytes. */
  bytes: number;
  /** A request to the Worker through miniflare's dispatcher (headers such as `CF-Connecting-IP` pass as given). */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** Restarts the Worker's isolate with the same code (in-memory state lost; Durable Object storage kept). */
  restart(): Promise<void>;
  close(): Promise<void>;
}

/** The entry bundled as wrangler bundles a Worker: one ES module, nothing left out. */
export async function bundleWorker(entry: string, nodejsCompat = false): Promise<string> {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    format: 'esm',
    platform: nodejsCompat ? 'node' : 'neutral',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['module', 'main'],
    target: 'es2022',
    minify: false,
    write: false,
    logLevel: 'silent',
  });
  return result.outputFiles[0]?.text ?? '';
}

/** Bundles `options.entry` and starts it on workerd; resolves once it accepts requests. */
export async function startWorker(options: WorkerOptions): Promise<RunningWorker> {
  const script = await bundleWorker(options.entry, options.nodejsCompat);
  const config: MiniflareOptions = {
    modules: true,
    script,
    compatibilityDate: '2026-04-01',
    compatibilityFlags: options.nodejsCompat ? ['nodejs_compat'] : [],
    durableObjects: options.durableObjects ?? {},
    bindings: options.bindings ?? {},
    // Durable Object storage in memory, kept across `restart()` (setOptions keeps the same instance's storage).
    durableObjectsPersist: false,
  };
  const mf = new Miniflare(config);
  const url = (await mf.ready).toString().replace(/\/$/, '');
  return {
    url,
    bytes: Buffer.byteLength(script),
    fetch: async (path, init) =>
      (await mf.dispatchFetch(
        `${url}${path}`,
        init as Parameters<Miniflare['dispatchFetch']>[1],
      )) as unknown as Response,
    restart: async () => {
      await mf.setOptions(config);
    },
    close: () => mf.dispose(),
  };
}
