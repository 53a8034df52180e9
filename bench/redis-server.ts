// A throwaway redis-server for one benchmark run: spawned on a free loopback port, nothing persisted.

import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { Redis } from 'ioredis';
import { stop, track } from './processes.js';

/** A running server and how to reach and stop it. */
export interface RedisServer {
  host: string;
  port: number;
  version: string;
  /** Opens a plain ioredis client to this server (the caller quits it). */
  client(options?: { enableAutoPipelining?: boolean }): Redis;
  stop(): Promise<void>;
}

const host = '127.0.0.1';

/** Asks the OS for a free port on loopback. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => (port ? resolve(port) : reject(new Error('no free port'))));
    });
  });
}

function connect(port: number, enableAutoPipelining = false): Redis {
  return new Redis({ host, port, enableAutoPipelining, maxRetriesPerRequest: 1, lazyConnect: false });
}

async function waitReady(port: number, deadlineMs: number): Promise<string> {
  let lastError: unknown;
  while (Date.now() < deadlineMs) {
    const probe = new Redis({
      host,
      port,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    probe.on('error', () => {});
    try {
      await probe.connect();
      const info = await probe.info('server');
      return /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
    } catch (error) {
      lastError = error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      probe.disconnect();
    }
  }
  throw new Error(`redis-server did not answer on port ${port}: ${String(lastError)}`);
}

/** Starts `redis-server` (from PATH or REDIS_SERVER_BIN) with persistence off, and waits until it answers. */
export async function startRedis(): Promise<RedisServer> {
  const binary = process.env.REDIS_SERVER_BIN ?? 'redis-server';
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const args = ['--port', String(port), '--bind', host, '--save', '', '--appendonly', 'no'];
    args.push('--dir', tmpdir(), '--loglevel', 'warning', '--daemonize', 'no');
    const child = track(spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] }));
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const spawnFailed = new Promise<never>((_, reject) => {
      child.once('error', (error) => reject(new Error(`cannot start ${binary}: ${error.message}`)));
      child.once('exit', (code) => reject(new Error(`${binary} exited with ${code}: ${stderr.trim()}`)));
    });
    spawnFailed.catch(() => {});
    try {
      const version = await Promise.race([waitReady(port, Date.now() + 5000), spawnFailed]);
      return {
        host,
        port,
        version,
        client: (options) => connect(port, options?.enableAutoPipelining),
        stop: () => stop(child),
      };
    } catch (error) {
      lastError = error;
      await stop(child, 500);
    }
  }
  throw lastError instanceof Error ? lastError : new Error(String(lastError));
}
