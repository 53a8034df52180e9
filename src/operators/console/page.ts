// The console's one page: store health, a key lookup with its actions, locked keys per rule, the rules.
import { createHash } from 'node:crypto';
import type { StoreHealth } from '../../limiter/failure-policy.js';
import type { LockInfo, RuleLimit, RuleStatus } from '../../types.js';
import { describeHolders, describeInFlight, formatDuration, type RuleSummary } from '../rule-summary.js';
import { visibleKey } from '../visible-key.js';
import { CSRF_FIELD } from './csrf.js';
import { html, query, SafeHtml } from './html.js';

export interface RuleView {
  summary: RuleSummary;
  /** The rule-wide limit in force (`limiter.setLimit`), if any; undefined when none or not readable. */
  ruleLimit?: RuleLimit;
  /** Keys locked now, soonest unlock first; undefined for rules without a lockout. */
  locked?: LockInfo[];
}

export interface PageModel {
  title: string;
  token: string;
  lockedLimit: number;
  health: StoreHealth | undefined;
  rules: RuleView[];
  lookup?: { rule: string; key: string; status?: RuleStatus };
  notice?: string;
  error?: string;
}

const CSS = `
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:0 16px 32px;color:#1d2430}
h1{font-size:20px;margin:18px 0 4px}h2{font-size:16px;margin:26px 0 8px}h3{font-size:14px;margin:14px 0 6px}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #e3e6ea;vertical-align:middle}
th{font-weight:600;color:#4a5361;background:#f6f7f9}td.key{font-family:ui-monospace,monospace;word-break:break-all}
form{display:inline;margin:0}input,select,button{font:inherit;padding:3px 6px}
button{cursor:pointer;border:1px solid #9aa3af;border-radius:4px;background:#fff}button.danger{border-color:#b42318;color:#b42318}
.store{color:#4a5361;margin:0}.ok{color:#067647;font-weight:600}.down{color:#b42318;font-weight:600}
.notice{background:#ecfdf3;border:1px solid #abefc6;padding:8px 10px;border-radius:4px}
.error{background:#fef3f2;border:1px solid #fecdca;padding:8px 10px;border-radius:4px}
.muted{color:#6b7280}.lookup label{margin-right:10px}dl{display:grid;grid-template-columns:max-content auto;gap:4px 16px}dt{color:#4a5361}dd{margin:0}
`;

/** The `style-src` source of the page's one inline stylesheet: no inline script and no outside asset is allowed. */
export const STYLE_HASH = `'sha256-${createHash('sha256').update(CSS).digest('base64')}'`;

export function renderPage(m: PageModel): string {
  return `<!doctype html>${html`<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${m.title}</title><style>${new SafeHtml(CSS)}</style></head><body>
<h1>${m.title}</h1>
${storeLine(m.health)}
${m.notice === undefined ? '' : html`<p class="notice" role="status">${m.notice}</p>`}
${m.error === undefined ? '' : html`<p class="error" role="alert">${m.error}</p>`}
<h2>Look a key up</h2>
<form method="get" class="lookup"><label>Rule <select name="rule">${m.rules.map(
    (r) =>
      html`<option value="${r.summary.name}"${r.summary.name === m.lookup?.rule ? html` selected` : ''}>${r.summary.name}</option>`,
  )}</select></label><label>Key, as shown (a \\ starts an escape) <input name="key" required size="40" value="${m.lookup === undefined ? '' : visibleKey(m.lookup.key)}"></label><button>Look up</button></form>
${m.lookup?.status === undefined ? '' : statusBlock(m.lookup.status, m.token)}
<h2>Locked keys</h2>
${lockedSections(m)}
<h2>Rules</h2>
<table><thead><tr><th>Rule</th><th>Limit</th><th>Lockout</th><th>Applies to</th><th>Mode</th><th>Locked now</th><th>Rule-wide limit (every key)</th></tr></thead><tbody>${m.rules.map(
    ({ summary: s, locked, ruleLimit }) =>
      html`<tr><td>${s.name}</td><td>${s.limit}</td><td>${s.lockout}</td><td>${s.match}</td><td>${s.mode}</td><td>${lockedCount(locked, m.lockedLimit)}</td><td>${ruleLimitCell(s.name, ruleLimit, m.token)}</td></tr>`,
  )}</tbody></table>
</body></html>`}`;
}

function storeLine(health: StoreHealth | undefined): SafeHtml | string {
  if (health === undefined) return '';
  const since = utc(health.sinceMs);
  const last = health.lastError === undefined ? '' : `; last error: ${health.lastError.message}`;
  return html`<p class="store">Shared store: <span class="${health.state}">${health.state}</span> since ${since}${last}</p>`;
}

function statusBlock(s: RuleStatus, token: string): SafeHtml {
  const lock = s.locked ? `yes, unlocks in ${formatDuration(s.lockRemainingMs)}` : 'no';
  return html`<section class="result"><h3>${s.rule}: <span class="key">${shownKey(s.key)}</span></h3>
<dl>${countRows(s)}
<dt>Locked</dt><dd>${lock}</dd><dt>Lockout level</dt><dd>${s.level}</dd></dl>
<p>${changeForm(s, token, 'unlock', s.locked ? 'Unlock' : 'Reset count')}</p>
<p>${changeForm(s, token, 'override', 'Set limit', html`<label>Limit for this key <input name="limit" inputmode="numeric" pattern="[0-9]+" size="6"></label> <label>window <input name="window" placeholder="e.g. 10s; empty: the rule's" size="22"></label> <label>for <input name="for" placeholder="e.g. 1h; empty: until cleared" size="28"></label> `)}
${s.overridden ? changeForm(s, token, 'clear-override', 'Clear override') : ''}</p></section>`;
}

/** Count, remaining and reset; for a concurrency rule (holders listed), in flight and how long each has been. */
function countRows(s: RuleStatus): SafeHtml {
  if (s.holders !== undefined) {
    return html`<dt>In flight</dt><dd>${describeInFlight(s)}</dd><dt>Held for</dt><dd>${describeHolders(s.holders, s.count)}</dd>`;
  }
  const full = s.locked ? 'when unlocked' : s.count > 0 ? formatDuration(s.resetMs) : 'now';
  const window = s.windowMs === undefined ? '' : `, window ${formatDuration(s.windowMs)}`;
  return html`<dt>Count</dt><dd>${s.count} of ${s.limit}${s.overridden ? ` (override for this key${window})` : ''}</dd>
<dt>Remaining</dt><dd>${s.locked ? 'none while locked (counting starts again from 0 when the lock ends)' : s.remaining}</dd><dt>Back to full in</dt><dd>${full}</dd>`;
}

/**
 * A POST form acting on one key; `fields` are the visible inputs before the button. The key travels as shown
 * (`visibleKey`), as in the look-up links: a lone surrogate, a NUL or a CR would not survive UTF-8 and the
 * HTML parser, and the form would act on another key.
 */
function changeForm(
  target: { rule: string; key: string },
  token: string,
  action: string,
  label: string,
  fields: SafeHtml | string = '',
): SafeHtml {
  return html`<form method="post"><input type="hidden" name="${CSRF_FIELD}" value="${token}"><input type="hidden" name="action" value="${action}"><input type="hidden" name="rule" value="${target.rule}"><input type="hidden" name="key" value="${visibleKey(target.key)}">${fields}<button${action === 'unlock' ? html` class="danger"` : ''}>${label}</button></form>`;
}

/** The rule-wide limit in force, with its end, and the forms that set or clear it. */
function ruleLimitCell(rule: string, ruleLimit: RuleLimit | undefined, token: string): SafeHtml {
  const target = { rule, key: '' };
  const inForce =
    ruleLimit === undefined
      ? html`<span class="muted">none</span> `
      : html`<strong>${ruleLimit.limit}</strong>${ruleLimit.untilMs === undefined ? ' until cleared' : ` until ${utc(ruleLimit.untilMs)}`} ${changeForm(target, token, 'clear-rule-limit', 'Clear')} `;
  return html`${inForce}${changeForm(target, token, 'rule-limit', 'Set', html`<input name="limit" aria-label="Limit for every key of ${rule}" inputmode="numeric" pattern="[0-9]+" required size="6"> <input name="for" aria-label="for how long" placeholder="for, e.g. 1h" size="10"> `)}`;
}

function lockedSections(m: PageModel): SafeHtml[] | SafeHtml {
  const withLockout = m.rules.filter((r) => r.locked !== undefined);
  if (withLockout.length === 0) return html`<p class="muted">No rule has a lockout.</p>`;
  return withLockout.map(({ summary, locked = [] }) => {
    const rows = locked.map(
      (
        l,
      ) => html`<tr><td class="key">${shownKey(l.key)}</td><td>${formatDuration(l.remainingMs)}</td><td>${utc(l.lockedUntil)}</td><td>${l.level}</td>
<td><a href="${query({ rule: l.rule, key: visibleKey(l.key) })}">look up</a></td><td>${changeForm(l, m.token, 'unlock', 'Unlock')}</td></tr>`,
    );
    const more =
      locked.length >= m.lockedLimit
        ? html`<p class="muted">The ${m.lockedLimit} soonest to unlock are shown.</p>`
        : '';
    return html`<h3>${summary.name}</h3>${
      locked.length === 0
        ? html`<p class="muted">No key is locked.</p>`
        : html`<table><thead><tr><th>Key</th><th>Unlocks in</th><th>At</th><th>Level</th><th></th><th></th></tr></thead><tbody>${rows}</tbody></table>${more}`
    }`;
  });
}

/**
 * A key as text the operator can trust: invisible, control and bidirectional characters written as escapes,
 * isolated from the text around it (`<bdi>`), so 'alice\u200b' never reads as 'alice' nor a reversed address
 * as another. The forms and links beside it carry the same text, which the console reads back to the key.
 */
function shownKey(key: string): SafeHtml {
  return html`<bdi>${visibleKey(key)}</bdi>`;
}

function lockedCount(locked: LockInfo[] | undefined, cap: number): string {
  if (locked === undefined) return 'no lockout';
  return locked.length >= cap ? `${cap}+` : String(locked.length);
}

/** `2026-11-23 11:30:54 UTC`: to the second, readable in a table. */
function utc(epochMs: number): string {
  return `${new Date(epochMs).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}
