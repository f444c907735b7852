//! SigV4 verification as the service does it: the signature recomputed from the request as
//! received, over its `SignedHeaders`, at its `x-amz-date`.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use http::request::Parts;

/// Why a request's signature was refused (the emulator answers 403 `InvalidSignatureException`,
/// or `UnrecognizedClientException` for an unknown key, as AWS does).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignatureError {
    /// No `Authorization` header, or not a SigV4 one.
    MissingAuthorization,
    /// The `Authorization` header does not parse.
    MalformedAuthorization,
    /// The access key id is not one of the configured test credentials.
    UnknownAccessKey,
    /// The credential scope names another region or service than expected.
    WrongScope,
    /// `x-amz-date` is missing or does not parse.
    MissingDate,
    /// `x-amz-date` is more than 5 minutes away from now.
    Skewed,
    /// The session token is missing or is not the one of the credentials.
    WrongSessionToken,
    /// A signed header is missing from the request, or `host` is not signed.
    UnsignedHeaders,
    /// The signature does not match.
    Mismatch,
}

impl SignatureError {
    /// The AWS error type the service answers with.
    pub fn error_type(&self) -> &'static str {
        match self {
            SignatureError::UnknownAccessKey => "UnrecognizedClientException",
            SignatureError::MissingAuthorization => "MissingAuthenticationTokenException",
            _ => "InvalidSignatureException",
        }
    }
}

impl fmt::Display for SignatureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SignatureError::MissingAuthorization => "Missing Authentication Token",
            SignatureError::MalformedAuthorization => "Authorization header is malformed",
            SignatureError::UnknownAccessKey => "The security token included in the request is invalid.",
            SignatureError::WrongScope => "Credential should be scoped to a valid region and service.",
            SignatureError::MissingDate => "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.",
            SignatureError::Skewed => "Signature expired: the request date is more than 5 minutes away from the server time.",
            SignatureError::WrongSessionToken => "The security token included in the request is invalid.",
            SignatureError::UnsignedHeaders => "Signed headers are missing from the request.",
            SignatureError::Mismatch => "The request signature we calculated does not match the signature you provided.",
        })
    }
}

impl std::error::Error for SignatureError {}

/// Checks SigV4 signatures for a set of known credentials, a region and a service.
///
/// ```
/// use agentcore_tower_emulator::SignatureVerifier;
/// use aws_credential_types::Credentials;
///
/// let verifier = SignatureVerifier::new("us-east-1", "bedrock-agentcore")
///     .with_credentials(Credentials::new("AKIDEXAMPLE", "secret", None, None, "test"));
/// let (parts, _) = http::Request::post("/").body(()).unwrap().into_parts();
/// assert!(verifier.verify(&parts, b"", std::time::SystemTime::now()).is_err());
/// ```
#[derive(Clone)]
pub struct SignatureVerifier {
    region: String,
    service: String,
    keys: HashMap<String, Credentials>,
    max_skew: Duration,
}

impl fmt::Debug for SignatureVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut keys: Vec<_> = self.keys.keys().collect();
        keys.sort();
        f.debug_struct("SignatureVerifier")
            .field("region", &self.region)
            .field("service", &self.service)
            .field("access_keys", &keys)
            .finish()
    }
}

impl SignatureVerifier {
    /// A verifier for `region` and `service`, with no credentials yet.
    pub fn new(region: impl Into<String>, service: impl Into<String>) -> Self {
        Self {
            region: region.into(),
            service: service.into(),
            keys: HashMap::new(),
            max_skew: Duration::from_secs(5 * 60),
        }
    }

    /// Accepts signatures made with `credentials`.
    pub fn with_credentials(mut self, credentials: Credentials) -> Self {
        self.keys
            .insert(credentials.access_key_id().to_owned(), credentials);
        self
    }

    /// The access key id a request claims, if its `Authorization` header parses.
    pub fn access_key_of(parts: &Parts) -> Option<String> {
        Authorization::parse(parts)
            .ok()
            .map(|a| a.access_key.to_owned())
    }

    /// Recomputes the signature of a received request (its method, path and query, its
    /// `SignedHeaders`, its body) at its `x-amz-date`, and compares.
    pub fn verify(
        &self,
        parts: &Parts,
        body: &[u8],
        now: SystemTime,
    ) -> Result<(), SignatureError> {
        let auth = Authorization::parse(parts)?;
        let credentials = self
            .keys
            .get(auth.access_key)
            .ok_or(SignatureError::UnknownAccessKey)?;
        let scope: Vec<&str> = auth.scope.split('/').collect();
        if scope.len() != 4
            || scope[1] != self.region
            || scope[2] != self.service
            || scope[3] != "aws4_request"
        {
            return Err(SignatureError::WrongScope);
        }
        let date_text = parts
            .headers
            .get("x-amz-date")
            .and_then(|v| v.to_str().ok())
            .ok_or(SignatureError::MissingDate)?;
        let date = parse_amz_date(date_text).ok_or(SignatureError::MissingDate)?;
        let skew = match now.duration_since(date) {
            Ok(behind) => behind,
            Err(ahead) => ahead.duration(),
        };
        if skew > self.max_skew {
            return Err(SignatureError::Skewed);
        }
        if !date_text.starts_with(scope[0]) || scope[0].len() != 8 {
            return Err(SignatureError::WrongScope);
        }
        let token = parts
            .headers
            .get("x-amz-security-token")
            .and_then(|v| v.to_str().ok());
        if token != credentials.session_token() {
            return Err(SignatureError::WrongSessionToken);
        }
        if !auth.signed_headers.contains(&"host") {
            return Err(SignatureError::UnsignedHeaders);
        }
        // The headers the signer adds itself are left out; it puts them back.
        let mut headers = Vec::new();
        for name in &auth.signed_headers {
            if matches!(*name, "x-amz-date" | "x-amz-security-token") {
                continue;
            }
            let value = parts
                .headers
                .get(*name)
                .and_then(|v| v.to_str().ok())
                .ok_or(SignatureError::UnsignedHeaders)?;
            headers.push((*name, value));
        }
        let host = parts
            .headers
            .get("host")
            .and_then(|v| v.to_str().ok())
            .ok_or(SignatureError::UnsignedHeaders)?;
        let path_and_query = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let uri = format!("https://{host}{path_and_query}");
        let signable = SignableRequest::new(
            parts.method.as_str(),
            uri,
            headers.into_iter(),
            SignableBody::Bytes(body),
        )
        .map_err(|_| SignatureError::MalformedAuthorization)?;
        let identity: Identity = credentials.clone().into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(&self.service)
            .time(date)
            .settings(SigningSettings::default())
            .build()
            .map_err(|_| SignatureError::MalformedAuthorization)?
            .into();
        let (_, expected) = sign(signable, &params)
            .map_err(|_| SignatureError::MalformedAuthorization)?
            .into_parts();
        // Compare without an early exit on the first differing byte.
        let same = expected.len() == auth.signature.len()
            && expected
                .bytes()
                .zip(auth.signature.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
        if same {
            Ok(())
        } else {
            Err(SignatureError::Mismatch)
        }
    }
}

struct Authorization<'a> {
    access_key: &'a str,
    scope: &'a str,
    signed_headers: Vec<&'a str>,
    signature: &'a str,
}

impl<'a> Authorization<'a> {
    fn parse(parts: &'a Parts) -> Result<Self, SignatureError> {
        let value = parts
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .ok_or(SignatureError::MissingAuthorization)?;
        let rest = value
            .strip_prefix("AWS4-HMAC-SHA256 ")
            .ok_or(SignatureError::MissingAuthorization)?;
        let (mut credential, mut signed, mut signature) = (None, None, None);
        for field in rest.split(',') {
            let (key, value) = field
                .trim()
                .split_once('=')
                .ok_or(SignatureError::MalformedAuthorization)?;
            match key {
                "Credential" => credential = Some(value),
                "SignedHeaders" => signed = Some(value),
                "Signature" => signature = Some(value),
                _ => return Err(SignatureError::MalformedAuthorization),
            }
        }
        let credential = credential.ok_or(SignatureError::MalformedAuthorization)?;
        let (access_key, scope) = credential
            .split_once('/')
            .ok_or(SignatureError::MalformedAuthorization)?;
        Ok(Authorization {
            access_key,
            scope,
            signed_headers: signed
                .ok_or(SignatureError::MalformedAuthorization)?
                .split(';')
                .collect(),
            signature: signature.ok_or(SignatureError::MalformedAuthorization)?,
        })
    }
}

/// Parses `YYYYMMDDTHHMMSSZ`.
fn parse_amz_date(value: &str) -> Option<SystemTime> {
    let b = value.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let s = value.get(range)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (y, m, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (hh, mm, ss) = (num(9..11)?, num(11..13)?, num(13..15)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amz_dates() {
        assert_eq!(
            parse_amz_date("20250615T150640Z"),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_750_000_000))
        );
        assert_eq!(
            parse_amz_date("19700101T000000Z"),
            Some(SystemTime::UNIX_EPOCH)
        );
        assert_eq!(
            parse_amz_date("20240229T235959Z"),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_709_251_199))
        );
        for bad in [
            "",
            "20250615T150640",
            "2025061xT150640Z",
            "20251315T150640Z",
            "20250615T250640Z",
            "+0250615T150640Z",
        ] {
            assert_eq!(parse_amz_date(bad), None, "{bad}");
        }
    }
}
