// Query and request ids for /assist: ULIDs, 26 Crockford base32 characters (48 bits of
// milliseconds, then 80 random bits), as Sentient Chat sends them.
const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

export function ulid(now = Date.now()) {
  let time = "";
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[now % 32] + time;
    now = Math.floor(now / 32);
  }
  // 16 random bytes, 5 bits of each: 80 bits of randomness, no modulo bias (32 divides 256).
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  let random = "";
  for (const byte of bytes) random += CROCKFORD[byte & 31];
  return time + random;
}
