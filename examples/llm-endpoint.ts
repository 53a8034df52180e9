// The LLM endpoint recipe (docs/recipes.md): a day's token budget per user, reserved on arrival and settled from
// the completion's usage (or, when the client goes mid-stream, from what was produced), and requests per minute.
import express, { type Express, type Request } from 'express';
import { rateLimit } from '../adapters/express.js';
import { createLimiter, type Limiter, type RequestInfo, type Store } from '../src/index.js';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}
/** One chunk of an OpenAI-style stream; with `stream_options.include_usage` the last one has the usage. */
export interface ChatChunk {
  choices: Array<{ delta: { content?: string | null } }>;
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
}
/** What the endpoint uses of an OpenAI-style client (`new OpenAI()`): a streamed chat completion. */
export interface ChatClient {
  chat: {
    completions: {
      create(
        body: {
          model: string;
          messages: ChatMessage[];
          max_tokens: number;
          stream: true;
          stream_options: { include_usage: true };
        },
        options: { signal: AbortSignal },
      ): Promise<AsyncIterable<ChatChunk>>;
    };
  };
}

const MAX_OUTPUT_TOKENS = 4096;
const ROLES = new Set(['system', 'user', 'assistant']);

/** The messages and output cap of a chat request; undefined when the body is not one. */
function chatRequest(body: unknown): { messages: ChatMessage[]; maxTokens: number } | undefined {
  const { messages, max_tokens: maxTokens = 1024 } = (body ?? {}) as {
    messages?: unknown;
    max_tokens?: unknown;
  };
  if (!Array.isArray(messages) || messages.length === 0 || messages.length > 100) return undefined;
  const valid = messages.every((m) => ROLES.has(m?.role) && typeof m?.content === 'string');
  if (!valid || !Number.isSafeInteger(maxTokens)) return undefined;
  if ((maxTokens as number) < 1 || (maxTokens as number) > MAX_OUTPUT_TOKENS) return undefined;
  return { messages: messages as ChatMessage[], maxTokens: maxTokens as number };
}

/** The prompt's tokens, about 4 characters each plus 4 per message: an estimate, settled from the provider's count. */
function promptTokens(messages: ChatMessage[]): number {
  return messages.reduce((sum, m) => sum + Math.ceil(m.content.length / 4) + 4, 0);
}

/** What a request reserves on arrival: the most it can use, its prompt and its output cap (0 for a bad request). */
export function estimateTokens(req: RequestInfo): number {
  const chat = chatRequest(req.body);
  return chat === undefined ? 0 : promptTokens(chat.messages) + chat.maxTokens;
}

export interface LlmAppOptions {
  /** A RedisStore in production, shared by every process. */
  store: Store;
  openai: ChatClient;
  /** Your authentication: the signed-in user, or undefined (answered 401). */
  authenticate(req: Request): { id: string } | undefined;
  model?: string;
  tokensPerDay?: number;
  requestsPerMinute?: number;
}

export function createLlmApp(options: LlmAppOptions): { app: Express; limiter: Limiter } {
  const { store, openai, authenticate, model = 'gpt-4o-mini' } = options;
  const limiter = createLimiter({
    store,
    rules: [
      {
        name: 'llm-tokens',
        match: 'POST /v1/chat',
        key: 'user',
        limit: options.tokensPerDay ?? 200_000,
        window: { type: 'calendar', unit: 'day' },
        cost: estimateTokens, // reserved on arrival: parallel requests never pass the budget on estimates
        settle: true, // replaced by the actual count with limiter.settle
      },
      {
        name: 'llm-requests',
        match: 'POST /v1/chat',
        key: 'user',
        limit: options.requestsPerMinute ?? 20,
        window: { type: 'sliding', size: '1m' },
      },
    ],
  });

  const app = express();
  app.use(express.json({ limit: '64kb' })); // before the limiter: the estimate reads the body
  app.use((req, res, next) => {
    const user = authenticate(req);
    if (user === undefined) {
      res.status(401).json({ error: 'sign in first' });
      return;
    }
    Object.assign(req, { user }); // 'user' keys read req.user.id
    next();
  });

  app.post('/v1/chat', rateLimit(limiter, { headers: 'standard' }), async (req, res) => {
    const chat = chatRequest(req.body);
    if (chat === undefined) {
      res
        .status(400)
        .json({ error: 'expected messages (1 to 100 { role, content }) and max_tokens (1 to 4096)' });
      return;
    }
    // The client going away stops the model: nothing more is produced, or paid for.
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    let used = promptTokens(chat.messages); // the prompt, then one token per chunk streamed
    let usage: ChatChunk['usage'];
    try {
      const stream = await openai.chat.completions.create(
        {
          model,
          messages: chat.messages,
          max_tokens: chat.maxTokens,
          stream: true,
          stream_options: { include_usage: true },
        },
        { signal: abort.signal },
      );
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
      for await (const chunk of stream) {
        if (chunk.usage) usage = chunk.usage;
        const text = chunk.choices[0]?.delta.content;
        if (text) {
          used += 1;
          res.write(`data: ${JSON.stringify({ text })}\n\n`);
        }
      }
      res.end('data: [DONE]\n\n');
    } catch {
      // The client went (the stream was aborted) or the model failed.
      if (!res.headersSent) res.status(502).json({ error: 'the model did not answer' });
      else res.end();
    } finally {
      // The provider's count when the stream ended; else what it was sent and what it streamed until then.
      if (req.rateLimit) await limiter.settle(req.rateLimit, usage?.total_tokens ?? used);
    }
  });
  return { app, limiter };
}
