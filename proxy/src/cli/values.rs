//! The values of single options, each read and checked alone: the URL of `--gateway-url` and
//! `--url`, the address of `--listen`, the token in a `--listen-token-file`, the DURATION of
//! `--timeout` and `--idle-timeout`, a tool pattern; and how a URL and a duration are shown.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use http::Uri;

/// A `--gateway-url` or `--url`: an absolute `https://` URL (`http://` for a loopback test
/// server only), without a user or password. A message about it shows no query: it may carry
/// a secret.
pub fn parse_url(flag: &str, text: &str) -> Result<Uri, String> {
    let not_a_url =
        || format!("{flag}: not a URL (https://HOST/PATH, e.g. https://example.com/mcp)");
    if text.contains('#') {
        return Err(format!(
            "{flag}: the URL has a fragment (#…), which is never sent"
        ));
    }
    let uri: Uri = text.parse().map_err(|_| not_a_url())?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(not_a_url());
    };
    if authority.as_str().contains('@') {
        return Err(format!(
            "{flag}: the URL carries a user or password; give a token with --bearer-token-env or \
             --bearer-token-command instead"
        ));
    }
    if authority.host().is_empty() {
        return Err(not_a_url());
    }
    match scheme {
        "https" => {}
        "http" if is_loopback_host(authority.host()) => {}
        "http" => {
            return Err(format!(
                "{flag} {}: http:// is for a loopback test server only (localhost, 127.0.0.1, \
                 [::1]): the request's credentials would cross the network in the clear; use \
                 https://",
                shown(&uri)
            ));
        }
        other => return Err(format!("{flag}: the scheme `{other}` is not https")),
    }
    Ok(uri)
}

/// Whether a URL's (or a `Host` header's) host is a loopback one: `localhost`, `127.x.x.x`,
/// `[::1]`.
pub fn is_loopback_host(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let ip = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    ip.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A URL to show (in a log line, a message): scheme, host, port and path; never the query (it
/// may carry a secret) nor a user or password.
pub fn shown(uri: &Uri) -> String {
    let mut text = String::new();
    if let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) {
        text.push_str(scheme);
        text.push_str("://");
        text.push_str(authority.host());
        if let Some(port) = authority.port() {
            text.push(':');
            text.push_str(port.as_str());
        }
    }
    text.push_str(uri.path());
    if uri.query().is_some() {
        text.push_str("?…");
    }
    text
}

/// A `--listen` address: a loopback IP address (or `localhost`) and a port.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let address = match text.strip_prefix("localhost:") {
        Some(port) => port
            .parse::<u16>()
            .map(|port| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
            .map_err(|_| format!("--listen {text}: `{port}` is not a port (0 to 65535)"))?,
        None => text.parse::<SocketAddr>().map_err(|_| {
            format!(
                "--listen {text}: not an ADDRESS:PORT (e.g. 127.0.0.1:8765, [::1]:8765, \
                 localhost:8765)"
            )
        })?,
    };
    if !address.ip().is_loopback() {
        let what = if address.ip().is_unspecified() {
            "binds every network interface"
        } else {
            "is not a loopback address"
        };
        return Err(format!(
            "--listen {text}: {} {what}; the endpoint acts with your AWS identity, so it listens \
             on loopback only (127.0.0.1, [::1] or localhost)",
            address.ip()
        ));
    }
    Ok(address)
}

/// The bearer token in a `--listen-token-file`'s content.
pub fn parse_token(path: &std::path::Path, content: &[u8]) -> Result<String, String> {
    let shown = path.display();
    let token = std::str::from_utf8(content)
        .map_err(|_| format!("--listen-token-file {shown}: the token is not text"))?
        .trim();
    if token.is_empty() {
        return Err(format!("--listen-token-file {shown}: the file is empty"));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "--listen-token-file {shown}: the token must be one word of visible ASCII characters"
        ));
    }
    if token.len() < 16 {
        return Err(format!(
            "--listen-token-file {shown}: the token has {} characters; use at least 16 (e.g. \
             `head -c 32 /dev/urandom | base64`)",
            token.len()
        ));
    }
    Ok(token.to_owned())
}

/// The longest DURATION taken: a day, far past AgentCore's longest request (8 hours, an
/// asynchronous one), and far from where adding it to the clock could overflow.
const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// A DURATION: a whole number followed by `ms`, `s`, `m` or `h`, or alone (seconds): `90s`,
/// `5m`, `1h`, `1500ms`, `120`. More than zero, at most a day.
pub fn parse_duration(flag: &str, text: &str) -> Result<Duration, String> {
    parse_duration_up_to(flag, text, MAX_DURATION, "24h")
}

/// A DURATION of at most `max` (`shown` as the manual says it).
pub fn parse_duration_up_to(
    flag: &str,
    text: &str,
    max: Duration,
    shown: &str,
) -> Result<Duration, String> {
    let bad = || {
        format!(
            "{flag} {text}: not a DURATION (a whole number and a unit: 1500ms, 90s, 5m, 1h, 2d; \
             alone, seconds)"
        )
    };
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    if number.is_empty() {
        return Err(bad());
    }
    let number: u64 = number.parse().map_err(|_| bad())?;
    let duration = match unit {
        "ms" => Duration::from_millis(number),
        "" | "s" => Duration::from_secs(number),
        "m" => Duration::from_secs(number.saturating_mul(60)),
        "h" => Duration::from_secs(number.saturating_mul(3600)),
        "d" => Duration::from_secs(number.saturating_mul(86_400)),
        _ => return Err(bad()),
    };
    if duration.is_zero() {
        return Err(format!(
            "{flag} {text}: the duration must be more than zero"
        ));
    }
    if duration > max {
        return Err(format!(
            "{flag} {text}: the duration must be at most {shown}"
        ));
    }
    Ok(duration)
}

/// A duration as a DURATION is written, in its largest whole unit: `15m`, `90s`, `1500ms`.
pub fn shown_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if !millis.is_multiple_of(1000) {
        return format!("{millis}ms");
    }
    let secs = duration.as_secs();
    match secs {
        s if s.is_multiple_of(3600) => format!("{}h", s / 3600),
        s if s.is_multiple_of(60) => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// A `--allow-tool` or `--deny-tool` PATTERN: a tool name, `*` for any run of characters and
/// `?` for any one.
pub fn parse_pattern(flag: &str, text: &str) -> Result<String, String> {
    if text.chars().any(char::is_control) {
        return Err(format!(
            "{flag} {text:?}: a tool name pattern holds no control character"
        ));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_read_in_each_unit_and_bad_ones_named() {
        for (text, secs_ms) in [
            ("5m", 300_000),
            ("15m", 900_000),
            ("90s", 90_000),
            ("1h", 3_600_000),
            ("1500ms", 1_500),
            ("120", 120_000),
            ("24h", 86_400_000),
        ] {
            let duration = parse_duration("--timeout", text).unwrap();
            assert_eq!(duration, Duration::from_millis(secs_ms), "{text}");
        }
        assert_eq!(
            parse_duration("--timeout", "5m").unwrap(),
            Duration::from_secs(300)
        );
        for (bad, why) in [
            ("", "not a DURATION"),
            ("m", "not a DURATION"),
            ("5 m", "not a DURATION"),
            ("1.5m", "not a DURATION"),
            ("-5s", "not a DURATION"),
            ("5min", "not a DURATION"),
            ("5M", "not a DURATION"),
            ("99999999999999999999s", "not a DURATION"),
            ("0", "more than zero"),
            ("0ms", "more than zero"),
            ("25h", "at most 24h"),
            ("18446744073709551615h", "at most 24h"),
        ] {
            let error = parse_duration("--idle-timeout", bad).unwrap_err();
            assert!(
                error.starts_with(&format!("--idle-timeout {bad}: ")),
                "{error}"
            );
            assert!(error.contains(why), "{bad}: {error}");
        }
    }

    #[test]
    fn durations_are_shown_in_their_largest_whole_unit() {
        for (millis, shown) in [
            (900_000, "15m"),
            (300_000, "5m"),
            (90_000, "90s"),
            (3_600_000, "1h"),
            (5_400_000, "90m"),
            (1_500, "1500ms"),
            (3_000, "3s"),
        ] {
            assert_eq!(shown_duration(Duration::from_millis(millis)), shown);
        }
    }

    #[test]
    fn urls_are_shown_without_their_query() {
        let url = parse_url("--url", "https://h.example:8443/a/mcp?token=s3cr3t").unwrap();
        assert_eq!(shown(&url), "https://h.example:8443/a/mcp?…");
        assert_eq!(url.query(), Some("token=s3cr3t"), "sent as given");
        let url = parse_url("--url", "https://h.example").unwrap();
        assert_eq!(shown(&url), "https://h.example/");
        for loopback in [
            "http://localhost:1/mcp",
            "http://127.0.0.2/mcp",
            "http://[::1]:9/mcp",
        ] {
            assert!(parse_url("--url", loopback).is_ok(), "{loopback}");
        }
    }

    #[test]
    fn only_loopback_addresses_are_listened_on() {
        for ok in ["127.0.0.1:8765", "127.1.2.3:1", "[::1]:8765", "localhost:0"] {
            let address = parse_listen(ok).unwrap();
            assert!(address.ip().is_loopback(), "{ok}");
        }
        assert_eq!(
            parse_listen("localhost:80").unwrap(),
            "127.0.0.1:80".parse().unwrap()
        );
        for (bad, why) in [
            ("0.0.0.0:8765", "binds every network interface"),
            ("[::]:8765", "binds every network interface"),
            ("192.168.1.10:8765", "is not a loopback address"),
            ("[::ffff:127.0.0.1]:8765", "is not a loopback address"),
            ("example.com:80", "not an ADDRESS:PORT"),
            ("localhost:http", "`http` is not a port"),
        ] {
            let error = parse_listen(bad).unwrap_err();
            assert!(error.contains(why), "{bad}: {error}");
        }
    }

    #[test]
    fn a_token_is_one_long_enough_word() {
        let path = std::path::Path::new("t");
        assert_eq!(
            parse_token(path, b"  0123456789abcdef\n").unwrap(),
            "0123456789abcdef"
        );
        for (content, why) in [
            (&b" \n"[..], "empty"),
            (b"short", "use at least 16"),
            (b"0123456789 abcdef", "one word"),
            (b"\xff\xfe0123456789abcdef", "not text"),
        ] {
            let error = parse_token(path, content).unwrap_err();
            assert!(error.contains(why), "{content:?}: {error}");
        }
    }
}
