// The attack suite: the login and verification-code recipes of the example apps, played as an attacker would,
// for one framework on one store (the tests themselves are in test/adapters/suites/attacks/).

import type { StoreFactory } from '../../support/stores.js';
import { codeAttacks } from './attacks/codes.js';
import { attackContext, type Framework } from './attacks/context.js';
import { loginAccounts } from './attacks/login-accounts.js';
import { loginGuessing } from './attacks/login-guessing.js';

export type { Framework } from './attacks/context.js';

export function attackSuite(framework: Framework, stores: StoreFactory): void {
  describe(`${framework.name} example app on the ${stores.name} store, under attack`, function () {
    this.timeout(60_000);
    const ctx = attackContext(framework, stores);
    loginGuessing(ctx);
    loginAccounts(ctx);
    codeAttacks(ctx);
  });
}
