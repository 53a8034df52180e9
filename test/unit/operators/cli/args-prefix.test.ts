// The command line's key prefix: `--prefix`, else $RATEKEEPER_PREFIX, else the RedisStore's default; a bad one
// is refused naming where it came from.
import { expect } from 'chai';
import { parseCli, USAGE, UsageError } from '../../../../src/operators/cli/args.js';

const parse = (argv: string[], env: NodeJS.ProcessEnv = {}) =>
  parseCli(argv, { REDIS_URL: 'redis://127.0.0.1:6379', ...env });

function usageError(argv: string[], env: NodeJS.ProcessEnv): string {
  try {
    parse(argv, env);
  } catch (error) {
    expect(error).to.be.instanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error('expected a UsageError');
}

describe('ratekeeper command line: the key prefix', () => {
  it('takes $RATEKEEPER_PREFIX when no --prefix is given, and --prefix over it', () => {
    expect(parse(['locked', 'login']).prefix).to.equal('rk');
    expect(parse(['locked', 'login'], { RATEKEEPER_PREFIX: 'shop' }).prefix).to.equal('shop');
    expect(parse(['locked', 'login', '--prefix', 'other'], { RATEKEEPER_PREFIX: 'shop' }).prefix).to.equal(
      'other',
    );
    expect(parse(['watch'], { RATEKEEPER_PREFIX: 'shop' }).prefix, 'watch reads it too').to.equal('shop');
  });

  it('treats an empty $RATEKEEPER_PREFIX as unset, as the other variables', () => {
    expect(parse(['locked', 'login'], { RATEKEEPER_PREFIX: '' }).prefix).to.equal('rk');
  });

  it('does not read it on PostgreSQL, where --prefix itself is refused', () => {
    const env = { RATEKEEPER_PREFIX: 'shop', REDIS_URL: '' };
    const args = parse(['locked', 'login', '--postgres', 'postgres://127.0.0.1/app'], env);
    expect(args.postgres).to.equal('postgres://127.0.0.1/app');
    expect(usageError(['locked', 'login', '--postgres', 'postgres://h/db', '--prefix', 'x'], env)).to.equal(
      "--prefix is the RedisStore's; on PostgreSQL give --schema and --table-prefix",
    );
  });

  it('names the variable when its value is refused, and the flag when that is', () => {
    expect(usageError(['locked', 'login'], { RATEKEEPER_PREFIX: 'a{b}' })).to.equal(
      "RATEKEEPER_PREFIX must be non-empty and without '{' or '}', got 'a{b}'",
    );
    expect(usageError(['locked', 'login', '--prefix', 'x}'], { RATEKEEPER_PREFIX: 'ok' })).to.equal(
      "--prefix must be non-empty and without '{' or '}', got 'x}'",
    );
  });

  it('says so in --help', () => {
    const line = USAGE.split('\n').find((l) => l.trimStart().startsWith('--prefix'));
    expect(line).to.match(/default \$RATEKEEPER_PREFIX, else rk$/);
  });

  it('keeps the arguments as typed, for a message that shows the command again', () => {
    const argv = ['rules', '--rules', './rules.ts', '--json'];
    expect(parse(argv).typed).to.deep.equal(argv);
  });
});
