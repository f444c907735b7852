//! The derived signing keys kept: a key is the same for one secret, one UTC day, one region and
//! one service, and deriving it (four HMACs) is most of what a generic signer spends per
//! request. A few slots, so that credentials alternating between two secrets, or the minutes
//! either side of midnight UTC, never derive on every attempt.
//!
//! A slot is found by a [`Fingerprint`] — a SHA-256 of the region, the service and the secret,
//! never the secret itself — and the date. A key is only ever used for the date it was derived
//! for, so it is never used past its UTC day; a rotated secret has another fingerprint, so it
//! gets its own key on its very first attempt (aws-sdk-js-v3#1776 was a cache that keyed by
//! everything but the secret).

use std::fmt;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

/// How many keys are kept: two secrets (a rotation) on two days (around midnight UTC).
const SLOTS: usize = 4;

/// What a signing key is derived from but the date: the region, the service and the secret,
/// hashed together (each prefixed by its length, so no two triples hash alike by
/// concatenation).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of `secret` signing for `service` in `region`.
    pub(super) fn of(secret: &str, region: &str, service: &str) -> Self {
        let mut hash = Sha256::new();
        for part in [region, service, secret] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part.as_bytes());
        }
        Fingerprint(hash.finalize().into())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Fingerprint(..)")
    }
}

/// A SigV4 signing key: `HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service),
/// "aws4_request")`.
#[derive(Clone, Copy)]
pub(super) struct SigningKey([u8; 32]);

impl SigningKey {
    /// The key `derived` (what `aws_sigv4::sign::v4::generate_signing_key` returns).
    pub(super) fn new(derived: impl AsRef<[u8]>) -> Self {
        let mut key = [0; 32];
        key.copy_from_slice(derived.as_ref());
        SigningKey(key)
    }
}

impl AsRef<[u8]> for SigningKey {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningKey(..)")
    }
}

/// One kept key, with what it was derived for.
#[derive(Clone, Copy)]
struct Slot {
    /// The secret, region and service.
    fingerprint: Fingerprint,
    /// `YYYYMMDD`, UTC.
    date: [u8; 8],
    /// The key derived for them.
    key: SigningKey,
}

/// The keys derived last, the most recently used first; the least recently used gives way.
pub(super) struct KeyCache {
    /// The most recently used first.
    slots: Mutex<[Option<Slot>; SLOTS]>,
}

impl KeyCache {
    /// An empty cache.
    pub(super) fn new() -> Self {
        KeyCache {
            slots: Mutex::new([None; SLOTS]),
        }
    }

    /// The key for `fingerprint` on `date` (`YYYYMMDD`, UTC): kept, or `derive`d and kept.
    /// A key is derived under the lock, so attempts that meet a new day together derive once.
    pub(super) fn key(
        &self,
        fingerprint: Fingerprint,
        date: [u8; 8],
        derive: impl FnOnce() -> SigningKey,
    ) -> SigningKey {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let kept = slots.iter().position(|slot| {
            slot.is_some_and(|slot| slot.fingerprint == fingerprint && slot.date == date)
        });
        // The slot used moves to the front: found, or the last one (evicted) made anew.
        let at = kept.unwrap_or(SLOTS - 1);
        slots[..=at].rotate_right(1);
        if kept.is_none() {
            slots[0] = Some(Slot {
                fingerprint,
                date,
                key: derive(),
            });
        }
        slots[0].expect("the slot in front was just filled").key
    }
}

impl fmt::Debug for KeyCache {
    /// How many keys are kept; never a key, a fingerprint or a date.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let kept = slots.iter().flatten().count();
        write!(f, "KeyCache({kept} of {SLOTS} kept)")
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// Asks `cache` for a key, counting the derivations in `derived`; the key is the
    /// fingerprint's first byte with the date's last, so a test can tell which it got.
    fn ask(cache: &KeyCache, derived: &Cell<u32>, secret: &str, date: &[u8; 8]) -> [u8; 32] {
        let fingerprint = Fingerprint::of(secret, "us-east-1", "bedrock-agentcore");
        let key = cache.key(fingerprint, *date, || {
            derived.set(derived.get() + 1);
            let mut key = [0; 32];
            key[0] = Fingerprint::of(secret, "us-east-1", "bedrock-agentcore").0[0];
            key[1] = date[7];
            SigningKey(key)
        });
        key.0
    }

    #[test]
    fn a_key_is_derived_once_per_secret_and_day() {
        let (cache, derived) = (KeyCache::new(), Cell::new(0));
        let first = ask(&cache, &derived, "secret-a", b"20250101");
        assert_eq!(ask(&cache, &derived, "secret-a", b"20250101"), first);
        assert_eq!(derived.get(), 1);
        // Another day, another secret: their own keys, each derived once.
        let next_day = ask(&cache, &derived, "secret-a", b"20250102");
        let rotated = ask(&cache, &derived, "secret-b", b"20250101");
        assert_ne!(next_day, first);
        assert_ne!(rotated, first);
        assert_eq!(derived.get(), 3);
        for _ in 0..3 {
            ask(&cache, &derived, "secret-a", b"20250101");
            ask(&cache, &derived, "secret-b", b"20250101");
            ask(&cache, &derived, "secret-a", b"20250102");
        }
        assert_eq!(
            derived.get(),
            3,
            "alternating secrets and days derive nothing more"
        );
    }

    #[test]
    fn the_least_recently_used_key_gives_way() {
        let (cache, derived) = (KeyCache::new(), Cell::new(0));
        for secret in ["a", "b", "c", "d"] {
            ask(&cache, &derived, secret, b"20250101");
        }
        ask(&cache, &derived, "a", b"20250101");
        ask(&cache, &derived, "e", b"20250101");
        assert_eq!(derived.get(), 5);
        // "b" was the least recently used: it is derived again; "a" is still kept.
        ask(&cache, &derived, "a", b"20250101");
        assert_eq!(derived.get(), 5);
        ask(&cache, &derived, "b", b"20250101");
        assert_eq!(derived.get(), 6);
    }

    #[test]
    fn the_region_and_service_are_part_of_the_fingerprint() {
        let of = Fingerprint::of;
        let base = of("secret", "us-east-1", "bedrock-agentcore");
        assert!(base != of("secret", "us-west-2", "bedrock-agentcore"));
        assert!(base != of("secret", "us-east-1", "execute-api"));
        assert!(base != of("secret2", "us-east-1", "bedrock-agentcore"));
        // Lengths keep the parts apart.
        assert!(of("ab", "c", "d") != of("b", "ac", "d"));
    }

    #[test]
    fn debug_shows_nothing_secret() {
        let (cache, derived) = (KeyCache::new(), Cell::new(0));
        ask(&cache, &derived, "wJalrXUtnFEMI", b"20250101");
        assert_eq!(format!("{cache:?}"), "KeyCache(1 of 4 kept)");
        let fingerprint = Fingerprint::of("wJalrXUtnFEMI", "us-east-1", "s");
        assert_eq!(format!("{fingerprint:?}"), "Fingerprint(..)");
        assert_eq!(format!("{:?}", SigningKey([7; 32])), "SigningKey(..)");
    }
}
