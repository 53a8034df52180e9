// Mocha reporter: the spec reporter's output, then one closing line "N passed, N failed" that CI reads.
// With RK_TIMINGS=1 it lists, before that line, each test file's wall time and the slowest tests.
const path = require('node:path');
const Mocha = require('mocha');

const { Spec } = Mocha.reporters;
const { EVENT_RUN_END, EVENT_SUITE_BEGIN, EVENT_SUITE_END, EVENT_TEST_PASS, EVENT_TEST_FAIL } =
  Mocha.Runner.constants;

/** How many of the slowest tests the timing summary names. */
const SLOWEST_TESTS = 10;

/** Wall time per file (its top-level suites, hooks included) and the duration of every test. */
function recordTimings(runner) {
  const files = new Map();
  const started = new Map();
  const tests = [];
  const fileOf = (runnable) => path.relative(process.cwd(), runnable.file ?? '(no file)');
  runner.on(EVENT_SUITE_BEGIN, (suite) => {
    if (suite.parent?.root) started.set(suite, performance.now());
  });
  runner.on(EVENT_SUITE_END, (suite) => {
    const start = started.get(suite);
    if (start === undefined) return;
    started.delete(suite);
    const file = fileOf(suite);
    files.set(file, (files.get(file) ?? 0) + (performance.now() - start));
  });
  const onTest = (test) =>
    tests.push({ title: test.fullTitle(), file: fileOf(test), ms: test.duration ?? 0 });
  runner.on(EVENT_TEST_PASS, onTest);
  runner.on(EVENT_TEST_FAIL, onTest);
  return () => {
    const seconds = (ms) => `${(ms / 1000).toFixed(1).padStart(7)} s`;
    const lines = ['', 'Test files by wall time:'];
    for (const [file, ms] of [...files].sort((a, b) => b[1] - a[1])) lines.push(`${seconds(ms)}  ${file}`);
    lines.push('', `The ${SLOWEST_TESTS} slowest tests:`);
    for (const test of tests.sort((a, b) => b.ms - a.ms).slice(0, SLOWEST_TESTS))
      lines.push(`${seconds(test.ms)}  ${test.file}: ${test.title}`);
    return `${lines.join('\n')}\n`;
  };
}

class PassedFailedReporter extends Spec {
  constructor(runner, options) {
    super(runner, options);
    const timings = process.env.RK_TIMINGS ? recordTimings(runner) : undefined;
    runner.once(EVENT_RUN_END, () => {
      if (timings) process.stdout.write(timings());
      const { passes, failures, pending } = runner.stats;
      process.stdout.write(
        `\n${passes} passed, ${failures} failed${pending ? `, ${pending} skipped` : ''}\n`,
      );
    });
  }
}

module.exports = PassedFailedReporter;
