// Registers the module hooks that compile nest-*.ts files with legacy decorators (see legacy-decorators.mjs),
// and with RATEKEEPER_NEST=11, those that load NestJS 11 instead of 12 (see nest-major.mjs).
// Import the Nest files only after it ran, with a dynamic import.
import { register } from 'node:module';

/** The NestJS major the Nest tests run on: 12 (the root's), or 11 with RATEKEEPER_NEST=11. */
export const NEST_MAJOR = process.env.RATEKEEPER_NEST === '11' ? 11 : 12;

register('./legacy-decorators.mjs', import.meta.url);
if (NEST_MAJOR === 11) register('./nest-major.mjs', import.meta.url);
