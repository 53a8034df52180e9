// mocha: TypeScript through tsx, every test file, a reporter that ends with "N passed, N failed".
module.exports = {
  'node-option': ['import=tsx'],
  spec: ['test/**/*.test.ts'],
  reporter: './test/support/reporter.cjs',
  timeout: 20000,
  exit: true,
};
