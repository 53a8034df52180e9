// Tables for the console and bench/RESULTS.md, and the description of the machine that ran them.

import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { dirname } from 'node:path';

/** One table of results. */
export interface Table {
  title: string;
  columns: string[];
  rows: string[][];
  /** Lines printed under the table (method, caveats, failures). */
  notes?: string[];
}

/** Columns holding words rather than figures: left-aligned. */
const textColumns = new Set([
  'note',
  'target',
  'measured',
  'verdict',
  'commands per decision [inside scripts]',
]);

function leftAligned(table: Table, index: number): boolean {
  return index === 0 || textColumns.has(table.columns[index] ?? '');
}

/** What a scenario hands back: its tables, plus structured figures for the target checks. */
export interface Section {
  id: string;
  title: string;
  intro: string;
  tables: Table[];
}

/** Thousands separated, `digits` decimals; '-' for missing figures. */
export function num(value: number | undefined, digits = 0): string {
  if (value === undefined || !Number.isFinite(value)) return '-';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** A ratio such as `0.84x`. */
export function ratio(value: number | undefined): string {
  return value === undefined || !Number.isFinite(value) ? '-' : `${value.toFixed(2)}x`;
}

/** A relative spread such as `±8%`; '-' with fewer than two repetitions. */
export function pct(value: number | undefined): string {
  return value === undefined || !Number.isFinite(value) ? '-' : `±${Math.round(value * 100)}%`;
}

/** Milliseconds with a precision that suits their size. */
export function ms(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return '-';
  return value < 1 ? value.toFixed(3) : value < 10 ? value.toFixed(2) : value.toFixed(1);
}

function escapeCell(cell: string): string {
  return cell.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

/** GitHub-flavoured Markdown; numbers right-aligned (every column but the first). */
export function markdownTable(table: Table): string {
  const lines = [`### ${table.title}`, ''];
  lines.push(`| ${table.columns.map(escapeCell).join(' | ')} |`);
  lines.push(`| ${table.columns.map((_, i) => (leftAligned(table, i) ? '---' : '---:')).join(' | ')} |`);
  for (const row of table.rows) lines.push(`| ${row.map(escapeCell).join(' | ')} |`);
  for (const note of table.notes ?? []) lines.push('', note);
  return lines.join('\n');
}

/** Fixed-width text for the terminal. */
export function textTable(table: Table): string {
  const widths = table.columns.map((c, i) =>
    Math.max(c.length, ...table.rows.map((r) => (r[i] ?? '').length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0)))
      .join('  ');
  const out = ['', `== ${table.title}`, line(table.columns), widths.map((w) => '-'.repeat(w)).join('  ')];
  for (const row of table.rows) out.push(line(row));
  for (const note of table.notes ?? []) out.push(`   ${note}`);
  return out.join('\n');
}

export interface Machine {
  date: string;
  cpu: string;
  cores: number;
  memoryGiB: number;
  os: string;
  node: string;
  redis: string;
  versions: Record<string, string>;
}

const measuredPackages = [
  'rate-limiter-flexible',
  'express-rate-limit',
  'rate-limit-redis',
  'koa-ratelimit',
  'ioredis',
  'express',
  'koa',
  'autocannon',
];

function packageVersion(name: string): string {
  try {
    const url = new URL(`../node_modules/${name}/package.json`, import.meta.url);
    return (JSON.parse(readFileSync(url, 'utf8')) as { version?: string }).version ?? '?';
  } catch {
    return 'not installed';
  }
}

/** Describes this machine and the versions measured. */
export function describeMachine(redisVersion: string): Machine {
  const cpus = os.cpus();
  const versions: Record<string, string> = { ratekeeper: '?' };
  try {
    const own = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    versions.ratekeeper = own.version ?? '?';
  } catch {
    // keep the fallback
  }
  for (const name of measuredPackages) versions[name] = packageVersion(name);
  return {
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    redis: redisVersion,
    versions,
  };
}

/** The whole RESULTS.md. */
export function resultsMarkdown(options: {
  machine: Machine;
  command: string;
  quick: boolean;
  durationS: number;
  method: string[];
  sections: Section[];
  unavailable: Array<{ name: string; reason: string }>;
  /** What follows the generated part unchanged (see results-file.ts): the soak's block, the History. */
  kept: string;
}): string {
  const { machine } = options;
  const out = [
    '# ratekeeper benchmarks',
    '',
    `Written by \`npm run bench${options.command === 'all' ? '' : ` -- ${options.command}`}\`` +
      `${options.quick ? ' with BENCH_QUICK=1 (a smoke run: short and single, not for quoting)' : ''}` +
      ` on ${machine.date}, in ${Math.round(options.durationS)} s. Do not edit by hand above the History section.`,
    '',
    '## Machine',
    '',
    `- CPU: ${machine.cpu}, ${machine.cores} cores; memory ${machine.memoryGiB} GiB; ${machine.os}`,
    `- Node ${machine.node}; Redis ${machine.redis} (throwaway local redis-server, no persistence, loopback)`,
    `- Versions: ${Object.entries(machine.versions)
      .map(([name, version]) => `${name} ${version}`)
      .join(', ')}`,
    '',
    '## Method',
    '',
    ...options.method.map((line) => `- ${line}`),
  ];
  if (options.unavailable.length > 0) {
    out.push('', '**Not measured:**');
    for (const u of options.unavailable) out.push(`- ${u.name}: ${u.reason}`);
  }
  for (const section of options.sections) {
    out.push('', `## ${section.title}`, '', section.intro);
    for (const table of section.tables) out.push('', markdownTable(table));
  }
  return `${out.join('\n')}\n\n${options.kept}`;
}

export async function writeText(path: string, text: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, text);
}
