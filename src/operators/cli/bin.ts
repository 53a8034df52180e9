#!/usr/bin/env node
// `npx ratekeeper`: look at and fix limits from a shell, against the app's Redis and with the app's own rules.
import { runCli } from './main.js';

const interrupted = new Promise<void>((resolve) => {
  process.once('SIGINT', () => resolve());
  process.once('SIGTERM', () => resolve());
});
runCli(process.argv.slice(2), process.env, process.cwd(), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  tty: process.stdout.isTTY === true,
  interrupted,
}).then((code) => {
  // A module loaded by --rules may hold connections of its own open; the command is done, so exit.
  process.exit(code);
});
