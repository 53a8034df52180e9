// One racing process of the exactness scenario: sets a contender up, then fires its attempts at one key.

import type { ContenderInstance } from './contender.js';
import { errorMessage } from './contender.js';
import { findContender } from './contenders.js';
import { type Message, serve } from './fork.js';

let instance: ContenderInstance | undefined;

async function race(key: string, attempts: number, concurrency: number): Promise<Message> {
  const decide = instance?.decide;
  if (!decide) throw new Error('race before setup');
  let issued = 0;
  let admitted = 0;
  let errors = 0;
  let firstError: string | undefined;
  const lane = async () => {
    while (issued < attempts) {
      issued++;
      try {
        if (await decide(key)) admitted++;
      } catch (error) {
        errors++;
        firstError ??= errorMessage(error);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  return { type: 'done', admitted, errors, firstError: firstError ?? null };
}

serve(async (message) => {
  switch (message.type) {
    case 'setup': {
      const contender = await findContender(String(message.contender));
      instance = await contender.create(
        { limit: Number(message.limit), windowMs: Number(message.windowMs) },
        { redisPort: Number(message.redisPort), prefix: String(message.prefix) },
      );
      // Scripts loaded and connection open before the start signal, so the race is on decisions only.
      await instance.decide(`${String(message.key)}-warm`);
      return { type: 'ready' };
    }
    case 'race':
      return race(String(message.key), Number(message.attempts), Number(message.concurrency));
    case 'teardown': {
      const open = instance;
      instance = undefined;
      await open?.close();
      return { type: 'closed' };
    }
    default:
      throw new Error(`unknown message ${message.type}`);
  }
});
