// Registers the module hooks that compile nest-*.ts files with legacy decorators (see legacy-decorators.mjs).
// Import the Nest files only after it ran, with a dynamic import.
import { register } from 'node:module';

register('./legacy-decorators.mjs', import.meta.url);
