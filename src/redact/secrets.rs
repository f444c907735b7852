//! Redaction: an attempt's secrets (its signature, the session token it was signed with) kept out
//! of every byte the app reads, in headers and across the frames of a streamed body. What it
//! catches and promises is in the [module docs](super).
//!
//! Written here: no crate does a streaming multi-needle replace over JSON-escaped text that
//! holds back only a possible partial match.

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use memchr::memmem::Finder;

/// What replaces a secret in a header; the start of what masks one in a body.
pub(crate) const REDACTED: &str = "[redacted]";

/// How many bytes of a possible secret cut off by the end of the body are masked rather than
/// delivered as they came.
const MASKED_AT_END: usize = 8;

/// Whether `byte` is a character one of the two-byte JSON escapes other than `\/` stands for.
fn is_short_escaped(byte: u8) -> bool {
    matches!(byte, b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t')
}

/// The longest a JSON escape of one character is: `\uXXXX`.
const LONGEST_ESCAPE: usize = 6;

/// A searcher for one secret, shared: built once for what outlives an attempt (a session
/// token, a bearer token: once per credentials), once per attempt for a signature. What the
/// redaction needs to know of the secret is learnt with it, not per attempt.
#[derive(Clone)]
pub(crate) struct Needle(Arc<Searcher>);

struct Searcher {
    secret: String,
    /// Searches for the secret's first [`SEARCHED_PREFIX`] bytes; a match is then checked
    /// whole. Building a searcher costs in proportion to its needle, and a signature's is
    /// built for every attempt.
    prefix: Finder<'static>,
    /// Whether the secret holds a character a two-byte JSON escape other than `\/` stands for.
    short_escaped: bool,
}

/// How much of a secret its searcher looks for before checking the rest: 16 bytes of a
/// signature or a token are 64 bits or more of chance, so a match of them that is not the
/// whole secret is rare — and only costs a comparison.
const SEARCHED_PREFIX: usize = 16;

impl Needle {
    /// The secret's bytes.
    fn secret(&self) -> &[u8] {
        self.0.secret.as_bytes()
    }

    /// Where the secret first occurs whole in `haystack`.
    fn find(&self, haystack: &[u8]) -> Option<usize> {
        let mut from = 0;
        while let Some(found) = self.0.prefix.find(&haystack[from..]) {
            let at = from + found;
            if haystack[at..].starts_with(self.secret()) {
                return Some(at);
            }
            from = at + 1;
        }
        None
    }
}

/// The searcher for `secret` (kept in it: a signature's own string is taken, not copied).
pub(crate) fn needle(secret: impl Into<String>) -> Needle {
    let secret = secret.into();
    let bytes = secret.as_bytes();
    Needle(Arc::new(Searcher {
        prefix: Finder::new(&bytes[..bytes.len().min(SEARCHED_PREFIX)]).into_owned(),
        short_escaped: bytes.iter().copied().any(is_short_escaped),
        secret,
    }))
}

/// The needle for `secret`, from `cache` when it was built for the same secret, else built
/// and kept there: the credentials or token of consecutive attempts are usually the same.
pub(crate) fn cached_needle(cache: &Mutex<Option<Needle>>, secret: &str) -> Needle {
    let mut cached = cache.lock().unwrap_or_else(|p| p.into_inner());
    match &*cached {
        Some(needle) if needle.secret() == secret.as_bytes() => needle.clone(),
        _ => {
            let built = needle(secret);
            *cached = Some(built.clone());
            built
        }
    }
}

/// The secrets of one attempt, to be kept out of what the app reads. The searchers are built
/// at most once per attempt, never per frame.
#[derive(Clone, Default)]
pub(crate) struct Secrets {
    needles: Vec<Needle>,
    /// Whether a secret holds a character a two-byte JSON escape other than `\/` stands for
    /// (`"`, `\`, a control character): then every escape can hide part of one. AWS's
    /// signatures, session tokens and bearer tokens hold none.
    short_escapes_matter: bool,
}

impl Secrets {
    #[cfg(test)]
    pub(crate) fn new(values: impl IntoIterator<Item = String>) -> Self {
        Self::of(values.into_iter().filter(|v| !v.is_empty()).map(needle))
    }

    /// The secrets searched for by `needles` (an empty needle is left out).
    pub(crate) fn of(needles: impl IntoIterator<Item = Needle>) -> Self {
        let mut secrets = Self::default();
        secrets.extend_with(needles.into_iter().filter(|n| !n.secret().is_empty()));
        secrets
    }

    fn extend_with(&mut self, needles: impl IntoIterator<Item = Needle>) {
        for needle in needles {
            self.short_escapes_matter |= needle.0.short_escaped;
            self.needles.push(needle);
        }
    }

    /// Adds `other`'s secrets (shared searchers: nothing is built again).
    pub(crate) fn extend(&mut self, other: &Secrets) {
        self.extend_with(other.needles.iter().cloned());
    }

    /// Whether the JSON-decoded reading of `bytes` (which hold a backslash) can show a secret,
    /// or the start of one, that the bytes as they are do not: only where an escape stands for
    /// a character a secret can hold — `\uXXXX` for any, `\/` for `/`, the others only when a
    /// secret holds `"`, `\` or a control character — or where an escape is cut off by the
    /// end. Any other escape stands for a character no secret holds, so no secret (nor its
    /// start) can span it, and the raw reading finds every one the decoded reading would.
    fn decoding_matters(&self, bytes: &[u8]) -> bool {
        self.short_escapes_matter
            || memchr::memchr_iter(b'\\', bytes)
                .any(|at| matches!(bytes.get(at + 1), None | Some(b'u' | b'/')))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// Whether a secret occurs in `bytes`, in any of the forms caught.
    pub(crate) fn occur_in(&self, bytes: &[u8]) -> bool {
        !self.scan(bytes).matches.is_empty()
    }

    /// The ranges of `bytes` that spell a secret (leftmost first, longest at one place, never
    /// overlapping), and where the possible start of one at the end begins (`bytes.len()` when
    /// nothing at the end could begin one).
    fn scan(&self, bytes: &[u8]) -> Scan {
        self.scan_reading(bytes, true)
    }

    /// [`scan`](Self::scan), the decoded reading left out when it cannot tell more
    /// (`skip_needless`; the test compares both).
    fn scan_reading(&self, bytes: &[u8], skip_needless: bool) -> Scan {
        if memchr::memchr(b'\\', bytes).is_none()
            || (skip_needless && !self.decoding_matters(bytes))
        {
            // No escape: the bytes are their own decoding.
            return Scan {
                matches: self.find_all(bytes),
                tail: self.partial_at_end(bytes),
            };
        }
        // Both readings: the bytes as they are (an app may show them raw, and a backslash
        // before a secret may begin an escape that hides its first character), and as a JSON
        // parser decodes them.
        let decoded = Decoded::of(bytes);
        let mut matches = self.find_all(bytes);
        matches.extend(
            self.find_all(&decoded.bytes)
                .into_iter()
                .map(|m| decoded.source(m)),
        );
        matches.sort_by_key(|m| (m.start, usize::MAX - m.end));
        let mut merged: Vec<Range<usize>> = Vec::with_capacity(matches.len());
        for m in matches {
            match merged.last_mut() {
                Some(last) if m.start < last.end => last.end = last.end.max(m.end),
                _ => merged.push(m),
            }
        }
        let decoded_tail = match self.partial_at_end(&decoded.bytes) {
            at if at < decoded.bytes.len() => decoded.starts[at],
            _ => decoded.incomplete_from.unwrap_or(bytes.len()),
        };
        Scan {
            matches: merged,
            tail: decoded_tail.min(self.partial_at_end(bytes)),
        }
    }

    fn find_all(&self, bytes: &[u8]) -> Vec<Range<usize>> {
        let mut found = Vec::new();
        let mut from = 0;
        while let Some((at, len)) = self
            .needles
            .iter()
            .filter_map(|n| {
                n.find(&bytes[from..])
                    .map(|at| (from + at, n.secret().len()))
            })
            .min_by_key(|(at, len)| (*at, usize::MAX - len))
        {
            found.push(at..at + len);
            from = at + len;
        }
        found
    }

    /// Where the longest suffix of `bytes` that is a proper prefix of a secret starts
    /// (`bytes.len()` when there is none).
    fn partial_at_end(&self, bytes: &[u8]) -> usize {
        let mut cut = bytes.len();
        for needle in self.needles.iter().map(Needle::secret) {
            let window = needle.len().saturating_sub(1).min(bytes.len());
            let start = bytes.len() - window;
            for at in memchr::memchr_iter(needle[0], &bytes[start..]).map(|i| start + i) {
                if at < cut && needle.starts_with(&bytes[at..]) {
                    cut = at;
                    break;
                }
            }
        }
        cut
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} redacted)", self.needles.len())
    }
}

struct Scan {
    matches: Vec<Range<usize>>,
    tail: usize,
}

/// Bytes with their JSON escapes decoded, and where each decoded byte came from.
struct Decoded {
    bytes: Vec<u8>,
    /// The offset in the source of each decoded byte's first source byte.
    starts: Vec<usize>,
    /// Where an escape cut off by the end of the source begins.
    incomplete_from: Option<usize>,
    source_len: usize,
}

/// What an escape that cannot be part of a secret decodes to here: a byte no secret has.
const OPAQUE: u8 = 0xFF;

impl Decoded {
    fn of(source: &[u8]) -> Self {
        let mut bytes = Vec::with_capacity(source.len());
        let mut starts = Vec::with_capacity(source.len());
        let mut incomplete_from = None;
        let mut i = 0;
        while i < source.len() {
            let (byte, len) = match source[i] {
                b'\\' => match escape_at(&source[i..]) {
                    Escape::Char(byte, len) => (byte, len),
                    Escape::Incomplete => {
                        incomplete_from = Some(i);
                        break;
                    }
                    Escape::NotOne => (b'\\', 1),
                },
                byte => (byte, 1),
            };
            bytes.push(byte);
            starts.push(i);
            i += len;
        }
        Self {
            bytes,
            starts,
            incomplete_from,
            source_len: source.len(),
        }
    }

    /// The source range a decoded range came from.
    fn source(&self, decoded: Range<usize>) -> Range<usize> {
        let end = self
            .starts
            .get(decoded.end)
            .copied()
            .or(self.incomplete_from)
            .unwrap_or(self.source_len);
        self.starts[decoded.start]..end
    }
}

enum Escape {
    /// A whole escape: the byte it stands for (or [`OPAQUE`]) and its length.
    Char(u8, usize),
    /// The source ends before the escape does.
    Incomplete,
    /// A backslash that begins no escape.
    NotOne,
}

/// The JSON escape at the start of `at` (which begins with a backslash).
fn escape_at(at: &[u8]) -> Escape {
    let Some(&kind) = at.get(1) else {
        return Escape::Incomplete;
    };
    match kind {
        b'/' | b'\\' | b'"' => Escape::Char(kind, 2),
        // `\b`, `\n`, … decode to control characters, which no secret has; read as the letter
        // instead, a secret that begins with it is found too (`\b` before `b16a…`).
        b'u' => {
            let digits = &at[2..at.len().min(LONGEST_ESCAPE)];
            if !digits.iter().all(u8::is_ascii_hexdigit) {
                return Escape::NotOne;
            }
            if digits.len() < 4 {
                return Escape::Incomplete;
            }
            let value = digits
                .iter()
                .fold(0u32, |v, d| v * 16 + u32::from(hex_value(*d)));
            let byte = u8::try_from(value)
                .ok()
                .filter(u8::is_ascii)
                .unwrap_or(OPAQUE);
            Escape::Char(byte, LONGEST_ESCAPE)
        }
        _ => Escape::NotOne,
    }
}

fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        _ => digit - b'A' + 10,
    }
}

/// Masks `range` of `bytes` in place, with as many bytes as it spans.
fn mask(bytes: &mut [u8], range: Range<usize>) {
    let target = &mut bytes[range];
    target.fill(b'*');
    if target.len() >= REDACTED.len() {
        target[..REDACTED.len()].copy_from_slice(REDACTED.as_bytes());
    }
}

/// Masks every secret in a byte stream, across frame boundaries.
pub(crate) struct Redactor {
    secrets: Secrets,
    held: BytesMut,
}

impl Redactor {
    pub(crate) fn new(secrets: Secrets) -> Self {
        Self {
            secrets,
            held: BytesMut::new(),
        }
    }

    /// The secrets it masks.
    pub(crate) fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    /// How many bytes are held back, waiting for the next frame.
    pub(crate) fn held(&self) -> usize {
        self.held.len()
    }

    /// Takes the next bytes of the stream; returns what is safe to pass on now (possibly
    /// nothing: a possible secret's start is held back).
    pub(crate) fn feed(&mut self, data: Bytes) -> Bytes {
        if self.secrets.is_empty() {
            return data;
        }
        let (mut buf, scan) = if self.held.is_empty() {
            let scan = self.secrets.scan(&data);
            if scan.matches.is_empty() && scan.tail == data.len() {
                // Fast path: nothing held, no secret in it, no secret's start at its end.
                return data;
            }
            (BytesMut::from(&data[..]), scan)
        } else {
            let mut joined = std::mem::take(&mut self.held);
            joined.extend_from_slice(&data);
            let scan = self.secrets.scan(&joined);
            (joined, scan)
        };
        for range in scan.matches {
            mask(&mut buf, range);
        }
        self.held = buf.split_off(scan.tail);
        buf.freeze()
    }

    /// The end of the stream (or its failure): what was held back, masked when 8 bytes or more
    /// of a possible secret had arrived.
    pub(crate) fn finish(&mut self) -> Bytes {
        let mut held = std::mem::take(&mut self.held);
        if held.len() >= MASKED_AT_END {
            let all = 0..held.len();
            mask(&mut held, all);
        }
        held.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A secret longer than the searched prefix is found where it occurs whole, first, and
    /// nowhere else: over a two-letter alphabet the prefix matches all the time without the
    /// rest, and matches overlap.
    #[test]
    fn a_needle_finds_the_first_whole_secret_past_its_prefix() {
        let mut rng = fastrand::Rng::with_seed(0x1616);
        let mut found = 0;
        for _ in 0..5_000 {
            let letter = |rng: &mut fastrand::Rng| if rng.u8(..8) == 0 { 'b' } else { 'a' };
            let secret: String = (0..rng.usize(1..40)).map(|_| letter(&mut rng)).collect();
            let haystack: Vec<u8> = (0..rng.usize(0..200))
                .map(|_| letter(&mut rng) as u8)
                .collect();
            let naive = haystack
                .windows(secret.len())
                .position(|w| w == secret.as_bytes());
            assert_eq!(
                needle(&secret).find(&haystack),
                naive,
                "{secret} in {haystack:?}"
            );
            found += usize::from(naive.is_some());
        }
        assert!(found > 1_000, "only {found} haystacks held their secret");
    }

    /// Leaving out the decoded reading where it cannot tell more changes nothing: the same
    /// matches and the same held-back tail as reading both, on random escaped text, for
    /// secrets without and with characters a short escape stands for.
    #[test]
    fn the_decoded_reading_is_left_out_only_where_it_tells_nothing() {
        let mut rng = fastrand::Rng::with_seed(0x17_17);
        let alphabet = b"AB/+=\\\\\\u00412f\"nrtbx";
        let mut compared = 0;
        for round in 0..3_000 {
            let secret = |rng: &mut fastrand::Rng| -> String {
                let len = rng.usize(3..9);
                (0..len)
                    .map(|_| b"AB/+=0x"[rng.usize(..7)] as char)
                    .chain((round % 3 == 0).then_some('"'))
                    .collect()
            };
            let (one, two) = (secret(&mut rng), secret(&mut rng));
            let secrets = Secrets::new([one.clone(), two]);
            for _ in 0..10 {
                let noise = |rng: &mut fastrand::Rng| -> Vec<u8> {
                    (0..rng.usize(0..12))
                        .map(|_| alphabet[rng.usize(..alphabet.len())])
                        .collect()
                };
                let mut bytes = noise(&mut rng);
                // A secret in it, each character plain or escaped in some way, at times cut off.
                if rng.bool() {
                    for c in one.chars() {
                        match (c, rng.u8(..4)) {
                            ('"', 0 | 1) => bytes.extend_from_slice(b"\\\""),
                            ('/', 0) => bytes.extend_from_slice(b"\\/"),
                            (c, 1) => {
                                bytes.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
                            }
                            (c, _) => bytes.push(c as u8),
                        }
                    }
                    if rng.bool() {
                        bytes.truncate(rng.usize(..=bytes.len()));
                    }
                }
                bytes.extend(noise(&mut rng));
                let skipped = secrets.scan_reading(&bytes, true);
                let both = secrets.scan_reading(&bytes, false);
                assert_eq!(
                    skipped.matches,
                    both.matches,
                    "{:?}",
                    String::from_utf8_lossy(&bytes)
                );
                assert_eq!(
                    skipped.tail,
                    both.tail,
                    "{:?}",
                    String::from_utf8_lossy(&bytes)
                );
                compared += usize::from(!both.matches.is_empty() || both.tail < bytes.len());
            }
        }
        assert!(
            compared > 1_000,
            "the inputs hold secrets and their starts ({compared})"
        );
    }

    fn redact_in_frames(secrets: &[&str], frames: &[&[u8]]) -> (Vec<Bytes>, Vec<u8>) {
        let mut r = Redactor::new(Secrets::new(secrets.iter().map(|s| s.to_string())));
        let mut out = Vec::new();
        for f in frames {
            out.push(r.feed(Bytes::copy_from_slice(f)));
        }
        out.push(r.finish());
        let all = out.concat();
        (out, all)
    }

    /// The mask of a secret `len` bytes long.
    fn masked(len: usize) -> String {
        let mut m = vec![b'*'; len];
        if len >= REDACTED.len() {
            m[..REDACTED.len()].copy_from_slice(REDACTED.as_bytes());
        }
        String::from_utf8(m).unwrap()
    }

    #[test]
    fn masks_whole_and_split_secrets_keeping_the_length() {
        let (_, all) = redact_in_frames(&["SECRETTOKEN"], &[b"a SECRETTOKEN b"]);
        assert_eq!(all, b"a [redacted]* b");
        let (frames, all) = redact_in_frames(&["SECRETTOKEN"], &[b"a SECR", b"ETTOK", b"EN b"]);
        assert_eq!(all, b"a [redacted]* b");
        assert_eq!(
            &frames[0][..],
            b"a ",
            "only the possible start is held back"
        );
        let (_, all) = redact_in_frames(&["SECRETTOKEN", "sig123"], &[b"SECRETTOKENsig123SECRET"]);
        assert_eq!(
            all, b"[redacted]*******SECRET",
            "a short partial secret at the very end is no secret"
        );
        let (_, all) = redact_in_frames(&["SECRETTOKEN"], &[b"x SECRETTOK"]);
        assert_eq!(
            all, b"x *********",
            "8 bytes or more of one are masked at the end"
        );
    }

    #[test]
    fn json_escaped_forms_are_caught() {
        let token = "IQoJb3J/pZ2+luX2Vj==";
        let escaped = [
            r"IQoJb3J\/pZ2+luX2Vj==".to_string(),
            r"IQoJb3J\u002fpZ2\u002BluX2Vj==".to_string(),
            r"\u0049\u0051\u006f\u004a\u0062\u0033\u004a\u002f\u0070\u005a\u0032\u002b\u006c\u0075\u0058\u0032\u0056\u006a\u003d\u003d".to_string(),
        ];
        for form in &escaped {
            let body = format!(r#"{{"echo":"{form}"}}"#);
            let (_, all) = redact_in_frames(&[token], &[body.as_bytes()]);
            assert_eq!(
                String::from_utf8(all).unwrap(),
                format!(r#"{{"echo":"{}"}}"#, masked(form.len())),
                "{form}"
            );
            // Split at every place: the same.
            for cut in 1..body.len() {
                let (_, all) = redact_in_frames(
                    &[token],
                    &[&body.as_bytes()[..cut], &body.as_bytes()[cut..]],
                );
                assert_eq!(all.len(), body.len());
                assert!(
                    !String::from_utf8(all).unwrap().contains("luX2"),
                    "{form} cut at {cut}"
                );
            }
        }
        // A backslash before a secret may begin an escape (`\b`) that hides its first character
        // from a JSON parser: the raw bytes still spell it, and are masked.
        let (_, all) = redact_in_frames(&["b16a0"], &[br"x\b16a0"]);
        assert_eq!(all, br"x\*****");
        // An escaped backslash before `u0041` is a backslash and the letters, not an escape.
        let (_, all) = redact_in_frames(&["AB"], &[br"\\u0041B"]);
        assert_eq!(all, br"\\u0041B");
    }

    #[test]
    fn what_is_held_back_is_bounded_and_sse_events_are_not_kept_waiting() {
        let token = "TOKEN0123456789";
        let mut r = Redactor::new(Secrets::new([token.to_string()]));
        // Every character but the last escaped: all of it may be the start of the token.
        let escaped: String = token[..token.len() - 1]
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        assert!(r.feed(Bytes::from(escaped.clone())).is_empty());
        assert_eq!(r.held(), escaped.len());
        assert!(r.held() <= LONGEST_ESCAPE * token.len());
        let rest = r.feed(Bytes::from_static(b"9 and more"));
        assert_eq!(rest.len(), escaped.len() + 10);
        assert!(rest.starts_with(REDACTED.as_bytes()));

        let (frames, _) = redact_in_frames(
            &["IQoJb3JpZ2luX2VjEJ"],
            &[b"data: {\"a\":1}\n\n", b"data: {}\n\n"],
        );
        assert_eq!(&frames[0][..], b"data: {\"a\":1}\n\n");
        assert_eq!(&frames[1][..], b"data: {}\n\n");
    }

    /// Seeded random texts of secret pieces, escapes and other bytes, cut at random places:
    /// the frames do not matter, the length is kept, no secret survives either reading.
    #[test]
    fn redaction_is_exact() {
        let mut rng = fastrand::Rng::with_seed(0x4ed);
        let pieces = [
            "x", "TOKEN99", "TOK", "EN99", "sigA", "si", "gA", " ", "\\u0054", "\\/", "\\", "\\b",
            "\\s",
        ];
        for _ in 0..3000 {
            let text: String = (0..rng.usize(0..30))
                .map(|_| pieces[rng.usize(0..pieces.len())])
                .collect();
            let mut cuts: Vec<usize> = (0..rng.usize(0..6))
                .map(|_| rng.usize(0..200))
                .filter(|c| *c < text.len())
                .collect();
            cuts.sort_unstable();
            cuts.dedup();
            let mut frames = Vec::new();
            let mut start = 0;
            for c in cuts.into_iter().chain(std::iter::once(text.len())) {
                frames.push(&text.as_bytes()[start..c]);
                start = c;
            }
            let (_, all) = redact_in_frames(&["TOKEN99", "sigA"], &frames);
            let whole = redact_in_frames(&["TOKEN99", "sigA"], &[text.as_bytes()]).1;
            // The frames do not matter to what is masked (a mask cut by a frame may read `***`
            // where the whole reads `[redacted]`).
            let masked = |out: &[u8]| -> Vec<bool> {
                out.iter()
                    .zip(text.as_bytes())
                    .map(|(o, i)| o != i)
                    .collect()
            };
            assert_eq!(
                masked(&all),
                masked(&whole),
                "the frames do not matter: {text:?}"
            );
            assert_eq!(all.len(), text.len(), "the length is kept");
            let decoded = String::from_utf8_lossy(&Decoded::of(&all).bytes).into_owned();
            assert!(
                !decoded.contains("TOKEN99") && !decoded.contains("sigA"),
                "{decoded}"
            );
            let raw = String::from_utf8_lossy(&all).into_owned();
            assert!(!raw.contains("TOKEN99") && !raw.contains("sigA"), "{raw}");
        }
    }
}
