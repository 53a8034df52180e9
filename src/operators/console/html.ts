// HTML built by a tagged template that escapes every interpolated value unless it is HTML built the same way.

/** Markup made by `html`: the only kind of value inserted without escaping. */
export class SafeHtml {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ENTITIES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Text safe in element content and in quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c] as string);
}

type Value = SafeHtml | string | number | boolean | null | undefined | readonly Value[];

function render(value: Value): string {
  if (value instanceof SafeHtml) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(String(value));
}

/**
 * Markup where each `${value}` is escaped: keys, rule names and messages can never become tags or
 * attributes, whatever they contain. Nested `html` results and arrays of them are kept as markup.
 * @example html`<td>${key}</td>` // key '<img src=x onerror=alert(1)>' stays text
 */
export function html(strings: TemplateStringsArray, ...values: Value[]): SafeHtml {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) out += render(values[i] as Value) + (strings[i + 1] ?? '');
  return new SafeHtml(out);
}

/** A query string (`?a=1&b=2`) for links; values are URL-encoded, and the result escaped where it is used. */
export function query(params: Record<string, string>): string {
  return `?${new URLSearchParams(params).toString()}`;
}
