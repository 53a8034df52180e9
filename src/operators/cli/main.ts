// The command line's run: parse, load the app's rules, connect, answer one command, say what went wrong.
import { readFileSync } from 'node:fs';
import { RateLimitConfigError } from '../../errors.js';
import { type CliArgs, parseCli, USAGE } from './args.js';
import { OperatorError } from './connect.js';
import type { Output } from './output.js';
import type { Targets } from './targets.js';

type Command = (t: Targets, a: CliArgs, o: Output) => Promise<void>;

/**
 * The commands, loaded when one is run: `--version` and `--help` load none of them, and none loads the
 * limiter, the Redis store or a Redis client until it needs one (each command starts well within a second).
 */
async function loadCommand(name: string): Promise<Command> {
  if (name === 'watch') return (await import('./watch.js')).watch;
  const commands: Record<string, Command> = await import('./commands.js');
  return commands[name] as Command;
}

export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** stdout is a terminal. */
  tty: boolean;
  /** Resolves when the operator interrupts (Ctrl-C): `watch` stops. */
  interrupted: Promise<void>;
}

/** Runs one command line; resolves to the exit status (0 done, 1 a fault to fix, 2 wrong usage). */
export async function runCli(
  argv: string[],
  env: NodeJS.ProcessEnv,
  cwd: string,
  io: CliIo,
): Promise<number> {
  let args: CliArgs;
  try {
    args = parseCli(argv, env);
  } catch (error) {
    io.stderr(`ratekeeper: ${(error as Error).message}\nRun 'ratekeeper --help' for usage.\n`);
    return 2;
  }
  if (args.command === 'help') {
    io.stdout(USAGE);
    return 0;
  }
  if (args.command === 'version') {
    io.stdout(`${version()}\n`);
    return 0;
  }
  if (args.command === 'sql') return printSchema(args, io);
  let targets: Targets | undefined;
  try {
    const [command, { openTargets }, { createOutput }] = await Promise.all([
      loadCommand(args.command),
      import('./targets.js'),
      import('./output.js'),
    ]);
    const rule = args.command === 'rules' || args.command === 'watch' ? undefined : args.positionals[0];
    const store = args.command !== 'rules' && args.command !== 'watch';
    targets = await openTargets(args, cwd, { redis: args.command === 'watch', store, rule });
    await Promise.race([command(targets, args, createOutput(args.json, io.tty, io.stdout)), io.interrupted]);
    return 0;
  } catch (error) {
    const known = error instanceof OperatorError || error instanceof RateLimitConfigError;
    const message = error instanceof Error ? error.message : String(error);
    io.stderr(`ratekeeper: ${known ? message : `${message} (${(error as Error)?.name ?? 'error'})`}\n`);
    return 1;
  } finally {
    await targets?.close();
  }
}

/**
 * This package's own version. The built bin sits in dist/, the source in src/operators/cli/; the file is
 * recognized by its name, so an app's package.json above node_modules/ratekeeper is never read instead.
 */
function version(): string {
  for (const path of ['../package.json', '../../../package.json']) {
    try {
      const manifest = JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (manifest.name === 'ratekeeper' && typeof manifest.version === 'string') return manifest.version;
    } catch {
      // Not there from this file's place (source or build): the other path is.
    }
  }
  return 'unknown';
}

/** `sql`: the PostgresStore's schema for the options given, printed; connects to nothing. */
async function printSchema(args: CliArgs, io: CliIo): Promise<number> {
  const { postgresNames, schemaSql } = await import('../../stores/postgres/sql.js');
  try {
    io.stdout(schemaSql(postgresNames(args.schema, args.tablePrefix)));
    return 0;
  } catch (error) {
    io.stderr(`ratekeeper: ${(error as Error).message}\n`);
    return 1;
  }
}
