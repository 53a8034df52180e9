// A change the console's forms post: read from a url-encoded body (or one a body parser already read), bounded.
import type { IncomingMessage } from 'node:http';
import { CSRF_FIELD } from './csrf.js';

export type ChangeAction = 'unlock' | 'override' | 'clear-override' | 'rule-limit' | 'clear-rule-limit';

export interface Change {
  action: ChangeAction;
  rule: string;
  key: string;
  /** `override`, `rule-limit`: the limit as typed; the limiter validates it. */
  limit: string;
  /** `override`, `rule-limit`: how long it lasts, as typed (empty: until cleared). */
  for: string;
  /** `override`: the key's window size, as typed (empty: the rule's window). */
  window: string;
  /** The token the form carried. */
  csrf: string | undefined;
}

const ACTIONS: readonly string[] = ['unlock', 'override', 'clear-override', 'rule-limit', 'clear-rule-limit'];

/** The actions on a whole rule (every key): they carry no key. */
export const RULE_ACTIONS: readonly string[] = ['rule-limit', 'clear-rule-limit'];

/** Bodies larger than this are refused (413): a form holds a rule name, a key and a token. */
const MAX_BODY_BYTES = 16 * 1024;

/** The change, or the HTTP status refusing a body that no console form sends (413, 415, 400). */
export async function readChange(req: IncomingMessage): Promise<Change | number> {
  const fields = await readFields(req);
  if (typeof fields === 'number') return fields;
  const action = fields.get('action') ?? '';
  const rule = fields.get('rule');
  const key = RULE_ACTIONS.includes(action) ? '' : fields.get('key');
  if (!ACTIONS.includes(action) || rule === null || key === null) return 400;
  return {
    action: action as ChangeAction,
    rule,
    key,
    limit: fields.get('limit')?.trim() ?? '',
    for: fields.get('for')?.trim() ?? '',
    window: fields.get('window')?.trim() ?? '',
    csrf: fields.get(CSRF_FIELD) ?? undefined,
  };
}

async function readFields(req: IncomingMessage): Promise<URLSearchParams | number> {
  // Mounted behind express.urlencoded() (or another body parser) the body is already read.
  const parsed = (req as IncomingMessage & { body?: unknown }).body;
  if (parsed !== null && typeof parsed === 'object' && !Buffer.isBuffer(parsed)) {
    const fields = new URLSearchParams();
    for (const [name, value] of Object.entries(parsed))
      if (typeof value === 'string') fields.set(name, value);
    return fields;
  }
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') return 415;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return 413;
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}
