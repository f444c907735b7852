//! SigV4: a request signed as the official SDK signs it (agentcore-wire.md §1.3: `aws-sigv4`'s
//! `SigningSettings::default()`), doing per attempt only what changes per attempt.
//!
//! A generic signer derives the signing key (four HMACs) and writes the canonical request from
//! nothing for every request, through a few dozen allocations. Here:
//! * per URL ([`target`]): the canonical URI and query, and the `Host` a request without one
//!   is signed with — built once per URL and kept;
//! * per credentials ([`ForCredentials`]): the session token's header value and its searcher,
//!   and the [`Fingerprint`] (a hash of the secret, the region and the service) that finds
//!   their signing key;
//! * per credentials and UTC day ([`key`]): the signing key, derived with
//!   `aws_sigv4::sign::v4::generate_signing_key` and kept in a few slots; a key is never used
//!   on another day, a rotated secret never signs with the key of the one before;
//! * per attempt ([`canonical`]): the date, one walk over the headers, the payload's hash, the
//!   canonical request and the string to sign written into one buffer, the final HMAC
//!   (`aws_sigv4::sign::v4::calculate_signature`).
//!
//! `aws-sigv4` stays the reference: `interop/tests/sigv4_reference.rs` signs generated requests
//! both ways and compares the headers byte for byte. What this signer does not sign itself — a
//! URL without a host, a time before 1970 or after 9999 — goes to
//! `aws_sigv4::http_request::sign` ([`mod@reference`]), so that it is signed, or refused,
//! exactly as before rather than differently.

mod canonical;
mod date;
mod key;
mod reference;
mod target;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};

use super::Clock;
use super::credentials::CachedCredentials;
use crate::error::{Error, ErrorKind};
use crate::redact::{Needle, Secrets, needle};
use canonical::{ALGORITHM, Fields};
use date::Stamp;
use key::{Fingerprint, KeyCache, SigningKey};
use target::Targets;

/// The signature's date header.
const X_AMZ_DATE: HeaderName = HeaderName::from_static("x-amz-date");
/// The session token's header.
const X_AMZ_SECURITY_TOKEN: HeaderName = HeaderName::from_static("x-amz-security-token");

/// SigV4: the credentials, what to sign for, and the clock to date signatures by; what it
/// built for the URLs, credentials and days it signed for last.
pub(crate) struct SigV4 {
    /// Where each attempt's credentials come from.
    pub(crate) credentials: SharedCredentialsProvider,
    /// The cache to drop when the service says the credentials expired, when the provider is
    /// a [`CachedCredentials`].
    pub(crate) cache: Option<CachedCredentials>,
    /// The service signed for (`bedrock-agentcore`, or an MCP endpoint's).
    pub(crate) signing_name: String,
    /// The region signed for.
    pub(crate) region: String,
    /// The wall clock signatures are dated by, before the skew's correction.
    pub(crate) clock: Clock,
    /// How far the service's clock is ahead of ours, in milliseconds, once an answer showed
    /// that ours is off by more than [`SKEW_THRESHOLD`](super::SKEW_THRESHOLD) (as the AWS SDKs
    /// correct it).
    pub(crate) skew_ms: AtomicI64,
    /// What depends only on the credentials last signed with, built once for them.
    last: Mutex<Option<Arc<ForCredentials>>>,
    /// The signing keys derived last.
    keys: KeyCache,
    /// The canonical parts of the URLs signed for last.
    targets: Targets,
    /// The credential scope after its date: `/{region}/{service}/aws4_request`.
    scope_tail: String,
}

impl SigV4 {
    /// Signs for `signing_name` in `region` with `credentials`, dating by `clock`.
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
            scope_tail: format!("/{region}/{signing_name}/aws4_request"),
            signing_name,
            region,
            clock,
            skew_ms: AtomicI64::new(0),
            last: Mutex::new(None),
            keys: KeyCache::new(),
            targets: Targets::new(),
        }
    }

    /// What depends only on `credentials`: kept from the last attempt when they are the same
    /// (compared by value, the secret included), built again when they changed.
    fn for_credentials(&self, credentials: &Credentials) -> Result<Arc<ForCredentials>, Error> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(kept) = &*last
            && kept.credentials == *credentials
        {
            return Ok(kept.clone());
        }
        let built = Arc::new(ForCredentials {
            credentials: credentials.clone(),
            identity: credentials.clone().into(),
            token: token_header(credentials)?,
            fingerprint: Fingerprint::of(
                credentials.secret_access_key(),
                &self.region,
                &self.signing_name,
            ),
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

/// The session token of `credentials` as a sensitive header value, with its searcher; the
/// error when it cannot be a header value.
fn token_header(credentials: &Credentials) -> Result<Option<(Needle, HeaderValue)>, Error> {
    let Some(token) = credentials.session_token() else {
        return Ok(None);
    };
    let mut value = HeaderValue::from_str(token).map_err(|_| {
        Error::new(
            ErrorKind::Credentials,
            "the session token cannot be sent in a header (a character outside visible ASCII)"
                .to_owned(),
            None,
        )
    })?;
    value.set_sensitive(true);
    Ok(Some((needle(token), value)))
}

/// What a signature needs of its credentials that does not change between attempts: the
/// signing identity (for the reference signer), the session token's header value and its
/// searcher (a ~700-character token costs to validate, copy and index on every attempt
/// otherwise), and the fingerprint their signing keys are kept by.
pub(crate) struct ForCredentials {
    /// The credentials this was built for, to tell whether the next attempt's are the same.
    credentials: Credentials,
    /// The signing identity of the reference signer.
    identity: Identity,
    /// The session token's searcher and sensitive header value, if there is a token.
    token: Option<(Needle, HeaderValue)>,
    /// What the signing keys of these credentials are kept by.
    fingerprint: Fingerprint,
}

/// Signs `headers` for a request of `method` to `uri` with `body`, as the official SDK
/// does (agentcore-wire.md §1.3: the default settings — double percent-encoding of the path,
/// no `x-amz-content-sha256` header but the real payload hash, path normalisation, the
/// session token signed): sets `x-amz-date`, `authorization` and, with a session token,
/// `x-amz-security-token`, all three sensitive. Returns the attempt's secrets: its signature,
/// the session token.
pub(super) fn sign_sigv4(
    sigv4: &SigV4,
    credentials: &Credentials,
    at: SystemTime,
    method: &Method,
    uri: &Uri,
    headers: &mut HeaderMap,
    body: &Bytes,
) -> Result<Secrets, Error> {
    let mut fields = Fields::of(headers, credentials.session_token().is_some())?;
    let (Some(target), Some(stamp)) = (sigv4.targets.get(uri), Stamp::of(at)) else {
        drop(fields);
        let text = uri.to_string();
        return reference::sign_with_aws_sigv4(
            sigv4,
            credentials,
            at,
            method,
            &text,
            headers,
            body,
        );
    };
    let kept = sigv4.for_credentials(credentials)?;
    let key = sigv4.keys.key(kept.fingerprint, stamp.date(), || {
        let secret = credentials.secret_access_key();
        SigningKey::new(v4::generate_signing_key(
            secret,
            at,
            &sigv4.region,
            &sigv4.signing_name,
        ))
    });
    let token = kept.token.as_ref().map(|(_, value)| value.as_bytes());
    fields.add(target.host(), stamp.date_time(), token);
    let payload_hash = canonical::sha256_hex(body);
    let mut buffer = Vec::new();
    let names = canonical::write_request(
        &mut buffer,
        method.as_str(),
        target.canonical(),
        fields,
        &payload_hash,
    );
    let head = Head {
        access_key_id: credentials.access_key_id(),
        date: stamp.date(),
        scope_tail: &sigv4.scope_tail,
        signed_headers: &buffer[names],
    };
    let mut authorization = head.write();
    let request_hash = canonical::sha256_hex(&buffer);
    canonical::write_string_to_sign(
        &mut buffer,
        stamp.date_time(),
        &sigv4.scope_tail,
        &request_hash,
    );
    let signature = v4::calculate_signature(key, &buffer);
    authorization.extend_from_slice(signature.as_bytes());
    set_headers(headers, &stamp, authorization, &kept)?;
    let token = kept.token.as_ref().map(|(needle, _)| needle.clone());
    Ok(Secrets::of([needle(signature)].into_iter().chain(token)))
}

/// What `Authorization` says before the signature.
struct Head<'a> {
    access_key_id: &'a str,
    /// `YYYYMMDD`, the scope's date.
    date: [u8; 8],
    /// `/{region}/{service}/aws4_request`.
    scope_tail: &'a str,
    /// The signed header names, `;`-separated.
    signed_headers: &'a [u8],
}

impl Head<'_> {
    /// `AWS4-HMAC-SHA256 Credential={key id}/{scope}, SignedHeaders={names}, Signature=`, in a
    /// buffer with room for the signature's 64 hex digits and no more (so that it becomes a
    /// header value without a copy).
    fn write(&self) -> Vec<u8> {
        const CREDENTIAL: &[u8] = b" Credential=";
        const SIGNED_HEADERS: &[u8] = b", SignedHeaders=";
        const SIGNATURE: &[u8] = b", Signature=";
        let parts: [&[u8]; 9] = [
            ALGORITHM.as_bytes(),
            CREDENTIAL,
            self.access_key_id.as_bytes(),
            b"/",
            &self.date,
            self.scope_tail.as_bytes(),
            SIGNED_HEADERS,
            self.signed_headers,
            SIGNATURE,
        ];
        let mut out = Vec::with_capacity(parts.iter().map(|p| p.len()).sum::<usize>() + 64);
        for part in parts {
            out.extend_from_slice(part);
        }
        out
    }
}

/// Sets the signature's headers on `headers`, sensitive, in the order aws-sigv4 gives them:
/// `x-amz-date`, `authorization`, and the session token of `kept`, if any.
fn set_headers(
    headers: &mut HeaderMap,
    stamp: &Stamp,
    authorization: Vec<u8>,
    kept: &ForCredentials,
) -> Result<(), Error> {
    let mut authorization = HeaderValue::from_maybe_shared(Bytes::from(authorization))
        .map_err(|e| Error::new(ErrorKind::Signing, e.to_string(), None))?;
    authorization.set_sensitive(true);
    let mut date =
        HeaderValue::from_bytes(stamp.date_time()).expect("a date stamp is digits and letters");
    date.set_sensitive(true);
    headers.insert(X_AMZ_DATE, date);
    headers.insert(AUTHORIZATION, authorization);
    if let Some((_, token)) = &kept.token {
        headers.insert(X_AMZ_SECURITY_TOKEN, token.clone());
    }
    Ok(())
}
