// The faults the soak injects into its PostgreSQL server: restarts (fast, immediate), the apps'
// connections terminated, the server paused past storeTimeout, a role lock_timeout for a while.
import pg from 'pg';
import type { PostgresServer } from '../../test/support/postgres.js';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The role the apps' pools log in as: the faults aimed at "the apps" pick its connections out. */
export const SOAK_ROLE = 'soak_app';

/** Runs `sql` on a connection of its own, as the server's superuser (never the apps' role). */
export async function adminQuery<R extends pg.QueryResultRow>(
  server: PostgresServer,
  sql: string,
): Promise<R[]> {
  const client = new pg.Client({
    host: server.host,
    port: server.port,
    user: 'postgres',
    database: 'postgres',
  });
  client.on('error', () => {});
  await client.connect();
  try {
    return (await client.query<R>(sql)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

/** Creates the apps' role: it may create the store's schema, as an app that installs it on first use. */
export async function createSoakRole(server: PostgresServer): Promise<void> {
  await adminQuery(server, `CREATE ROLE ${SOAK_ROLE} LOGIN SUPERUSER`);
}

const terminateApps = async (server: PostgresServer) =>
  (
    await adminQuery<{ n: string }>(
      server,
      `SELECT count(pg_terminate_backend(pid))::text AS n FROM pg_stat_activity WHERE usename = '${SOAK_ROLE}'`,
    )
  )[0]?.n ?? '0';

export type PostgresFaultKind =
  | 'pg-fast-restart'
  | 'pg-immediate-restart'
  | 'pg-terminate'
  | 'pg-pause'
  | 'pg-lock-timeout';

/** Injects one fault; resolves with what was done once the fault is over (the server answers again). */
export async function injectPostgresFault(
  server: PostgresServer,
  kind: PostgresFaultKind,
  o: { pauseMs: number; lockTimeoutForMs: number },
): Promise<string> {
  switch (kind) {
    case 'pg-fast-restart':
      await server.restart('fast');
      return 'SIGINT (fast shutdown), started again on its port, data kept';
    case 'pg-immediate-restart':
      await server.restart('immediate');
      return 'SIGQUIT (immediate shutdown: crash recovery at start), started again on its port';
    case 'pg-terminate':
      return `pg_terminate_backend of ${await terminateApps(server)} connections of the apps' role`;
    case 'pg-pause':
      server.pause();
      await sleep(o.pauseMs);
      server.resume();
      return `postmaster and backends SIGSTOPped for ${o.pauseMs} ms`;
    case 'pg-lock-timeout': {
      // The setting reaches new sessions only: the apps' connections are terminated so that the pools'
      // next ones run under it (and again after, so that none keeps it past the fault).
      await adminQuery(server, `ALTER ROLE ${SOAK_ROLE} SET lock_timeout = '1ms'`);
      const first = await terminateApps(server);
      await sleep(o.lockTimeoutForMs);
      await adminQuery(server, `ALTER ROLE ${SOAK_ROLE} RESET lock_timeout`);
      const second = await terminateApps(server);
      return `ALTER ROLE ${SOAK_ROLE} SET lock_timeout = '1ms' for ${o.lockTimeoutForMs} ms (${first} + ${second} connections terminated to apply and lift it)`;
    }
  }
}
