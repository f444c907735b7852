//! The reference signer, `aws_sigv4::http_request::sign`: what signs the requests the signer
//! of [this module](super) does not sign itself (a URL without a host, a time outside
//! 1970–9999), so that those are signed as the SDK signs them, or refused with its error.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderName, HeaderValue, Method};

use super::{SigV4, X_AMZ_DATE, X_AMZ_SECURITY_TOKEN};
use crate::error::{Error, ErrorKind};
use crate::redact::{Secrets, needle};

/// Signs as [`sign_sigv4`](super::sign_sigv4) does, with `aws_sigv4::http_request::sign` and
/// `SigningSettings::default()`.
pub(super) fn sign_with_aws_sigv4(
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
        pairs.push((name.as_str(), super::canonical::header_text(name, value)?));
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
