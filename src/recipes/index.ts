// Recipes: ready-made rule sets for login throttling and verification-code sending.
export { LOGIN_DEFAULTS, type LoginRulesOptions, loginRules } from './login.js';
export {
  normalizeDestination,
  VERIFICATION_CODE_DEFAULTS,
  type VerificationCodeRulesOptions,
  verificationCodeRules,
} from './verification-code.js';
