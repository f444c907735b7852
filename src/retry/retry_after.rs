//! How long a server asked us to wait: `Retry-After` (RFC 9110 §10.2.3: seconds or an
//! HTTP-date) and AWS's own `x-amz-retry-after` (whole milliseconds, as the AWS SDKs read it).

use std::time::{Duration, SystemTime};

use http::header::RETRY_AFTER;
use http::{HeaderMap, HeaderName};

/// The header AWS services put their wait in, in milliseconds.
const AMZ_RETRY_AFTER: HeaderName = HeaderName::from_static("x-amz-retry-after");

/// Reads the wait a response head asks for, at the current wall-clock time: its one
/// `Retry-After` (see [`parse_retry_after`]) and its one `x-amz-retry-after` (whole
/// milliseconds, `1*DIGIT`). When both are there, the longer wins: each says "not before", so
/// only the longer satisfies both. Several values of one header count as none of it: the server
/// did not say one thing.
///
/// ```
/// use std::time::Duration;
/// use agentcore_tower::retry::retry_after;
/// let mut headers = http::HeaderMap::new();
/// headers.insert("x-amz-retry-after", "1500".parse().unwrap());
/// assert_eq!(retry_after(&headers), Some(Duration::from_millis(1500)));
/// headers.insert("retry-after", "1".parse().unwrap());
/// assert_eq!(retry_after(&headers), Some(Duration::from_millis(1500)), "the longer wins");
/// ```
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    retry_after_at(headers, SystemTime::now())
}

/// [`retry_after`] at a given time `now` (for HTTP-dates).
pub fn retry_after_at(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let standard = one(headers, &RETRY_AFTER).and_then(|v| parse_retry_after(v, now));
    let amz = one(headers, &AMZ_RETRY_AFTER)
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis);
    standard.max(amz)
}

/// The one value of `name`, when there is exactly one and it is text.
fn one<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value
        .to_str()
        .ok()
        .map(|v| v.trim_matches(|c| c == ' ' || c == '\t'))
}

/// Parses one `Retry-After` value: `delay-seconds` (`1*DIGIT`) or an HTTP-date in any of the
/// three forms HTTP allows (IMF-fixdate, RFC 850, asctime), relative to `now`.
///
/// * A date in the past means "now": `Some(Duration::ZERO)`.
/// * Anything else — a negative or fractional number, a number too large for a `u64`,
///   several comma-separated values, garbage, an empty value — is `None`: absent, so the
///   caller uses its own backoff. Never a panic, never a wrong wait.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use agentcore_tower::retry::parse_retry_after;
///
/// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_747); // Sun, 06 Nov 1994 08:49:07 GMT
/// assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
/// assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now), Some(Duration::from_secs(30)));
/// assert_eq!(parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now), Some(Duration::from_secs(30)));
/// assert_eq!(parse_retry_after("Sun Nov  6 08:49:37 1994", now), Some(Duration::from_secs(30)));
/// assert_eq!(parse_retry_after("Sat, 05 Nov 1994 08:49:37 GMT", now), Some(Duration::ZERO));
/// assert_eq!(parse_retry_after("-1", now), None);
/// assert_eq!(parse_retry_after("1.5", now), None);
/// assert_eq!(parse_retry_after("5, 10", now), None);
/// ```
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    // Optional whitespace around a field value is not part of it (RFC 9110 §5.5).
    let value = value.trim_matches(|c| c == ' ' || c == '\t');
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        // `u64::from_str` refuses overflow rather than wrapping.
        return value.parse::<u64>().ok().map(Duration::from_secs);
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn epoch(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn table() {
        let now = epoch(784_111_747);
        let cases: &[(&str, Option<u64>)] = &[
            ("0", Some(0)),
            ("7", Some(7)),
            (" 7\t", Some(7)),
            ("007", Some(7)),
            ("18446744073709551615", Some(u64::MAX)),
            ("18446744073709551616", None),
            ("99999999999999999999999999", None),
            ("", None),
            ("   ", None),
            ("-1", None),
            ("+1", None),
            ("1.5", None),
            ("1e3", None),
            ("5, 10", None),
            ("5 10", None),
            ("soon", None),
            ("Sun, 06 Nov 1994 08:49:37 GMT", Some(30)),
            (
                "Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:38 GMT",
                None,
            ),
            ("Sun, 06 Nov 1994 08:49:37 UTC", None),
            ("Thu, 01 Jan 1970 00:00:00 GMT", Some(0)),
            ("Sun, 06 Nov 1994 08:49:07 GMT", Some(0)),
        ];
        for (input, want) in cases {
            assert_eq!(
                parse_retry_after(input, now),
                want.map(Duration::from_secs),
                "{input:?}"
            );
        }
    }

    #[test]
    fn header_forms() {
        let now = epoch(1_000);
        let mut h = HeaderMap::new();
        assert_eq!(retry_after_at(&h, now), None);
        h.insert(RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(retry_after_at(&h, now), Some(Duration::from_secs(3)));
        h.append(RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(
            retry_after_at(&h, now),
            None,
            "several values count as none"
        );
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_bytes(b"\xff3").unwrap());
        assert_eq!(retry_after_at(&h, now), None, "not text");
    }

    /// Random text (digits, dates, spaces and arbitrary characters mixed), seeded: whatever
    /// is accepted is digits or a date before the year 10000, and nothing panics.
    #[test]
    fn never_panics_and_never_exceeds_a_date() {
        let mut rng = fastrand::Rng::with_seed(0x5eed);
        let pieces = [
            "1",
            "0",
            "99",
            " ",
            "\t",
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "GMT",
            ",",
            "-",
            "é",
            "\u{0}",
        ];
        for _ in 0..4000 {
            let mut s = String::new();
            for _ in 0..rng.usize(0..8) {
                match rng.u8(0..4) {
                    0 => s.push(rng.char(..)),
                    _ => s.push_str(pieces[rng.usize(0..pieces.len())]),
                }
            }
            let now = epoch(rng.u64(0..4_000_000_000));
            if let Some(d) = parse_retry_after(&s, now) {
                let t = s.trim_matches(|c| c == ' ' || c == '\t');
                assert!(
                    t.bytes().all(|b| b.is_ascii_digit())
                        || d <= Duration::from_secs(253_402_300_800),
                    "{s:?}"
                );
            }
        }
    }
}
