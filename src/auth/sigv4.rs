//! SigV4: a request signed as the official SDK signs it, with its credentials' parts built once
//! for as long as they stay the same.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderName, HeaderValue, Method};

use super::Clock;
use super::credentials::CachedCredentials;
use crate::error::{Error, ErrorKind};
use crate::redact::{Needle, Secrets, needle};

const X_AMZ_DATE: HeaderName = HeaderName::from_static("x-amz-date");
const X_AMZ_SECURITY_TOKEN: HeaderName = HeaderName::from_static("x-amz-security-token");

/// SigV4: the credentials, what to sign for, and the clock to date signatures by.
pub(crate) struct SigV4 {
    pub(crate) credentials: SharedCredentialsProvider,
    /// The cache to drop when the service says the credentials expired, when the provider is
    /// a [`CachedCredentials`].
    pub(crate) cache: Option<CachedCredentials>,
    pub(crate) signing_name: String,
    pub(crate) region: String,
    pub(crate) clock: Clock,
    /// How far the service's clock is ahead of ours, in milliseconds, once an answer showed
    /// that ours is off by more than [`SKEW_THRESHOLD`](super::SKEW_THRESHOLD) (as the AWS SDKs
    /// correct it).
    pub(crate) skew_ms: AtomicI64,
    /// What depends only on the credentials last signed with, built once for them.
    last: Mutex<Option<Arc<ForCredentials>>>,
}

impl SigV4 {
    pub(crate) fn new(
        credentials: SharedCredentialsProvider,
        cache: Option<CachedCredentials>,
        signing_name: String,
        region: String,
        clock: Clock,
    ) -> Self {
        Self {
            credentials,
            cache,
            signing_name,
            region,
            clock,
            skew_ms: AtomicI64::new(0),
            last: Mutex::new(None),
        }
    }

    /// What depends only on `credentials`: kept from the last attempt when they are the same
    /// (compared by value), built again when they changed.
    fn for_credentials(&self, credentials: &Credentials) -> Result<Arc<ForCredentials>, Error> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(kept) = &*last
            && kept.credentials == *credentials
        {
            return Ok(kept.clone());
        }
        let token = match credentials.session_token() {
            Some(token) => {
                let mut value = HeaderValue::from_str(token).map_err(|_| {
                    Error::new(
                        ErrorKind::Credentials,
                        "the session token cannot be sent in a header (a character outside \
                         visible ASCII)"
                            .to_owned(),
                        None,
                    )
                })?;
                value.set_sensitive(true);
                Some((needle(token), value))
            }
            None => None,
        };
        let built = Arc::new(ForCredentials {
            credentials: credentials.clone(),
            identity: credentials.clone().into(),
            token,
        });
        *last = Some(built.clone());
        Ok(built)
    }

    /// The time to date a signature by: our clock, corrected by the skew seen.
    pub(super) fn now(&self) -> SystemTime {
        let skew = self.skew_ms.load(Ordering::Relaxed);
        let by = Duration::from_millis(skew.unsigned_abs());
        let now = (self.clock)();
        if skew >= 0 { now + by } else { now - by }
    }
}

/// What a signature needs of its credentials that does not change between attempts: the
/// signing identity, the session token's header value and its searcher (a ~700-character token
/// costs to validate, copy and index on every attempt otherwise).
pub(crate) struct ForCredentials {
    credentials: Credentials,
    identity: Identity,
    token: Option<(Needle, HeaderValue)>,
}

/// Signs `headers` for a request of `method` to `uri_text` with `body`, as the official SDK
/// does (agentcore-wire.md §1.3: the default settings — double percent-encoding of the path,
/// no `x-amz-content-sha256` header but the real payload hash, path normalisation, the
/// session token signed), and returns the attempt's secrets: its signature, the session token.
pub(super) fn sign_sigv4(
    sigv4: &SigV4,
    credentials: &Credentials,
    at: SystemTime,
    method: &Method,
    uri_text: &str,
    headers: &mut HeaderMap,
    body: &Bytes,
) -> Result<Secrets, Error> {
    let mut pairs = Vec::with_capacity(headers.len());
    for (name, value) in headers.iter() {
        let value = value.to_str().map_err(|_| {
            Error::new(
                ErrorKind::InvalidRequest,
                format!("the header `{name}` is not visible ASCII text"),
                None,
            )
        })?;
        pairs.push((name.as_str(), value));
    }
    let signing_error =
        |e: &dyn std::fmt::Display| Error::new(ErrorKind::Signing, e.to_string(), None);
    let signable = SignableRequest::new(
        method.as_str(),
        uri_text,
        pairs.into_iter(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| signing_error(&e))?;
    let kept = sigv4.for_credentials(credentials)?;
    let params = v4::SigningParams::builder()
        .identity(&kept.identity)
        .region(&sigv4.region)
        .name(&sigv4.signing_name)
        .time(at)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| signing_error(&e))?
        .into();
    let (instructions, signature) = sign(signable, &params)
        .map_err(|e| signing_error(&e))?
        .into_parts();
    for (name, value) in instructions.headers() {
        // The names the signer sets, without parsing (and allocating) them again; the session
        // token's value as built for these credentials.
        let (name, value) = match (name, &kept.token) {
            ("x-amz-security-token", Some((_, token))) if token.as_bytes() == value.as_bytes() => {
                (X_AMZ_SECURITY_TOKEN, token.clone())
            }
            (name, _) => {
                let mut value = HeaderValue::from_str(value).map_err(|e| signing_error(&e))?;
                value.set_sensitive(true);
                let name = match name {
                    "authorization" => AUTHORIZATION,
                    "x-amz-date" => X_AMZ_DATE,
                    "x-amz-security-token" => X_AMZ_SECURITY_TOKEN,
                    other => {
                        HeaderName::from_bytes(other.as_bytes()).map_err(|e| signing_error(&e))?
                    }
                };
                (name, value)
            }
        };
        headers.insert(name, value);
    }
    let token = kept.token.as_ref().map(|(needle, _)| needle.clone());
    Ok(Secrets::of([needle(signature)].into_iter().chain(token)))
}
