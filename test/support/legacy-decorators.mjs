// Module hooks that compile the NestJS files (nest-*.ts) as a Nest app's TypeScript build does: legacy decorators
// with decorator metadata. tsx compiles every other file with the project's standard decorators.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const NEST_FILE = /\/(?:test\/adapters\/suites|examples|bench)\/nest-[\w-]+\.ts$/;

const compilerOptions = {
  module: ts.ModuleKind.ESNext,
  target: ts.ScriptTarget.ES2022,
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  useDefineForClassFields: false,
  inlineSourceMap: true,
  inlineSources: true,
};

export async function load(url, context, nextLoad) {
  if (!url.startsWith('file:') || !NEST_FILE.test(url.split('?')[0])) return nextLoad(url, context);
  const fileName = fileURLToPath(url);
  const source = await readFile(fileName, 'utf8');
  const { outputText } = ts.transpileModule(source, { fileName, compilerOptions });
  return { format: 'module', source: outputText, shortCircuit: true };
}
