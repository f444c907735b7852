//! `Retry-After` parsing: never a panic; digits mean exactly that many seconds.
#![no_main]

use std::time::{Duration, SystemTime};

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (&str, u32)| {
    let (value, secs) = input;
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(u64::from(secs));
    let parsed = agentcore_tower::retry::parse_retry_after(value, now);
    let trimmed = value.trim_matches(|c| c == ' ' || c == '\t');
    if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit()) {
        assert_eq!(parsed, trimmed.parse::<u64>().ok().map(Duration::from_secs));
    }
    if let Ok(header) = http::HeaderValue::from_str(value) {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::RETRY_AFTER, header);
        assert_eq!(agentcore_tower::retry::retry_after_at(&headers, now), parsed);
    }
});
