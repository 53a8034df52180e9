// mocha: TypeScript through tsx, every test file, a reporter that ends with "N passed, N failed".
module.exports = {
  'node-option': ['import=tsx'],
  // `npx mocha test/x.test.ts` runs just that file; plain `mocha` runs them all.
  spec: process.argv.some((arg) => arg.endsWith('.test.ts')) ? [] : ['test/**/*.test.ts'],
  // test/nest11 holds NestJS 11's packages (RATEKEEPER_NEST=11), none of them a test of ours.
  ignore: ['test/nest11/**'],
  reporter: './test/support/reporter.cjs',
  timeout: 20000,
  exit: true,
};
