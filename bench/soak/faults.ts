// The faults the soak injects into the stores it runs, one at a time: each returns when the store is back
// (the span the audit treats as an outage), and `restore` puts the setup back for the next one.
import type { PostgresServer } from '../../test/support/postgres.js';
import type { RedisCluster, RedisServer } from '../../test/support/redis.js';
import { withConnection } from '../../test/support/redis.js';
import type { FaultWindow } from './audit.js';
import type { FaultKind } from './config.js';
import { injectPostgresFault } from './postgres-faults.js';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface InjectedFault extends FaultWindow {
  detail: string;
  /** Puts the setup back as it was (a killed Cluster master rejoins as a replica). */
  restore(): Promise<void>;
}

export class Faults {
  #turn = 0;
  #stalls = 0;

  constructor(
    readonly cluster: RedisCluster,
    readonly standalone: RedisServer,
    readonly postgres: PostgresServer,
    readonly pauseMs: number,
    readonly lockTimeoutForMs: number,
    /** The app processes' ids, for the stall. */
    readonly appPids: readonly number[],
    readonly stallMs: number,
  ) {}

  async inject(kind: FaultKind): Promise<InjectedFault> {
    const start = Date.now();
    const done = (
      stores: FaultWindow['stores'],
      detail: string,
      dataLoss = false,
      restore = async () => {},
    ) => ({
      kind,
      stores,
      start,
      end: Date.now(),
      dataLoss,
      detail,
      restore,
    });
    switch (kind) {
      case 'pg-fast-restart':
      case 'pg-immediate-restart':
      case 'pg-terminate':
      case 'pg-pause':
      case 'pg-lock-timeout': {
        const options = { pauseMs: this.pauseMs, lockTimeoutForMs: this.lockTimeoutForMs };
        return done(['postgres'], await injectPostgresFault(this.postgres, kind, options));
      }
      case 'app-stall': {
        // No store is at fault: the stores' own audits leave it alone (a stalled call's long bracket is
        // its own excuse), the slot audit treats it as an outage of every slot the process held.
        const index = this.#stalls++ % this.appPids.length;
        const pid = this.appPids[index] as number;
        process.kill(pid, 'SIGSTOP');
        await sleep(this.stallMs);
        process.kill(pid, 'SIGCONT');
        return done([], `app process ${index} SIGSTOPped for ${this.stallMs} ms`);
      }
      case 'cluster-failover': {
        const victim = await this.cluster.killMaster(this.#turn++ % 3);
        return done(['cluster'], `master on port ${victim.port} SIGKILLed, its replica promoted`, true, () =>
          this.cluster.restartNode(victim.port),
        );
      }
      case 'standalone-restart':
        await this.standalone.restart({ keepData: true });
        return done(
          ['standalone'],
          'SHUTDOWN SAVE, a new process on the same port (data kept, scripts gone)',
        );
      case 'standalone-pause':
        this.standalone.pause();
        await sleep(this.pauseMs);
        this.standalone.resume();
        return done(['standalone'], `SIGSTOP for ${this.pauseMs} ms`);
      case 'client-kill': {
        // Every app connection, the subscribers included; the admin connection itself is skipped.
        const master = this.cluster.nodes.find((node) => node.role === 'master');
        const kill = (node: { host: string; port: number }) =>
          withConnection(node, (conn) => conn.call('CLIENT', 'KILL', 'TYPE', 'normal') as Promise<number>);
        const [standalone, cluster] = await Promise.all([
          kill(this.standalone),
          master ? kill(master) : Promise.resolve(0),
        ]);
        return done(
          ['standalone', 'cluster'],
          `CLIENT KILL TYPE normal: ${standalone} + ${cluster} connections`,
        );
      }
    }
  }
}
