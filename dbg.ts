import { Redis, Cluster } from 'ioredis';
import { Redis as Redis5 } from 'ioredis5';
import { Redis as Valkey } from 'iovalkey';
import { ioredisConnection } from './src/stores/redis-connection-ioredis.js';
const flat = Array.prototype.flat; let big = 0;
Array.prototype.flat = function (this: unknown[], ...a: any[]) { if (this.length > 0 && Array.isArray(this[0]) && this[0].length > 2) big++; return flat.apply(this, a as []); };
for (const C of [Redis, Redis5, Valkey] as any[]) {
  for (const opts of [{}, { keyPrefix: 'kp:' }, { enableAutoPipelining: true }, {showFriendlyErrorStack: true}]) {
    const c = new C({ port: 6379, ...opts });
    const conn = ioredisConnection(c)!;
    big = 0;
    const r = await conn.send('EVAL', ['return {KEYS[1], ARGV[1]}', '1', 'k', 'b']);
    console.log(C.name, JSON.stringify(opts), r, 'flattened by call:', big);
    c.disconnect();
  }
}
