// Mocha reporter: the spec reporter's output, then one closing line "N passed, N failed" that CI reads.
const Mocha = require('mocha');

const { Spec } = Mocha.reporters;
const { EVENT_RUN_END } = Mocha.Runner.constants;

class PassedFailedReporter extends Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once(EVENT_RUN_END, () => {
      const { passes, failures, pending } = runner.stats;
      process.stdout.write(
        `\n${passes} passed, ${failures} failed${pending ? `, ${pending} skipped` : ''}\n`,
      );
    });
  }
}

module.exports = PassedFailedReporter;
