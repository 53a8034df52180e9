// SHA-256 digests without node:crypto (the Web platform's crypto.subtle is asynchronous; keys are made
// synchronously): identities too long or too odd to store as they are, and names derived from texts.
import { sha256 } from '@noble/hashes/sha2';
import { bytesToHex } from '@noble/hashes/utils';

/** base64url without padding, as Node's `digest('base64url')` writes it. */
function base64url(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** `#` + base64url(SHA-256) of the string's UTF-16 code units: lossless for any string, lone surrogates included. */
export function digest(value: string): string {
  const bytes = new Uint8Array(value.length * 2);
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    bytes[2 * i] = unit & 0xff;
    bytes[2 * i + 1] = unit >>> 8;
  }
  return `#${base64url(sha256(bytes))}`;
}

/** SHA-256 of a text's UTF-8 bytes (lone surrogates as U+FFFD, as Node encodes them). */
export function sha256Bytes(text: string): Uint8Array {
  return sha256(new TextEncoder().encode(text));
}

/** SHA-256 of a text's UTF-8 bytes, in lower-case hex. */
export function sha256Hex(text: string): string {
  return bytesToHex(sha256Bytes(text));
}
