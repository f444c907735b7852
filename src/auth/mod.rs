//! Who sends an attempt: a SigV4 signature over the request, made with AWS credentials (cached
//! by [`CachedCredentials`] where the provider does not cache), or a bearer token (OAuth inbound
//! auth: a [`ProvideToken`] — a [`BearerToken`], a [`TokenFn`] or your own — and the
//! [`BearerChallenge`] of a refused one). Both signing layers,
//! [`SigV4InvokeLayer`](crate::invoke::SigV4InvokeLayer) and
//! [`McpEndpointLayer`](crate::endpoint::McpEndpointLayer), take either, resolved afresh for every
//! attempt; both are secrets the answer never shows ([`redact`](crate::redact)).
//!
//! ```
//! use agentcore_tower::auth::{BearerToken, TokenFn};
//! use agentcore_tower::invoke::{InvokeTarget, SigV4InvokeLayer};
//! # fn main() -> Result<(), agentcore_tower::error::ConfigError> {
//! // A runtime with OAuth inbound auth: a token for every attempt, another after a 401.
//! let tokens = TokenFn::new(|refused: Option<BearerToken>| async move {
//!     // Ask the authorization server for a new token after a refused one; serve a cached one
//!     // else.
//!     let _ = refused;
//!     Ok::<_, std::io::Error>(BearerToken::new("eyJhbGciOi..."))
//! });
//! let layer = SigV4InvokeLayer::bearer(
//!     InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/calc-AbC123"),
//!     tokens,
//! )
//! .build()?;
//! assert!(format!("{layer:?}").contains("Bearer(..)"));
//! # Ok(())
//! # }
//! ```
//!
//! # Expired credentials, a skewed clock
//! One answer gets one more attempt, freshly signed, as the AWS SDKs do — when the call's rule
//! and budget allow it, recorded by the layer (`sigv4`, `mcp-endpoint`) as "refused before
//! execution":
//! * a 403 `ExpiredTokenException`: the credentials are resolved again, the cache of a
//!   [`CachedCredentials`] provider dropped first;
//! * a 403 refusing the signature (`InvalidSignatureException`, `SignatureDoesNotMatch`,
//!   `RequestTimeTooSkewed`, `AuthFailure`, `AccessDeniedException`) while the answer's `Date`
//!   is more than 4 minutes from our clock: the signer's clock is corrected by that offset —
//!   for every later attempt too — and the request signed again.
//!
//! No other 403 is sent again: a wrong key, a missing permission, a bad signature within the
//! clock's tolerance stay what they are.
//!
//! # Runtimes with OAuth inbound auth
//! A runtime configured with a JWT authorizer takes `Authorization: Bearer <token>` instead of
//! a signature, at the same URL with the same headers — and one or the other, never both ("An
//! AgentCore Runtime can support either IAM SigV4 or JWT Bearer Token based inbound auth, but
//! not both simultaneously", AgentCore developer guide, *runtime OAuth*; the
//! `InvokeAgentRuntime` API reference: with OAuth "you can't use the AWS SDK … make a HTTPS
//! request"). [`SigV4InvokeLayer::bearer`](crate::invoke::SigV4InvokeLayer::bearer) is the same
//! layer with a token provider ([`ProvideToken`]: a [`BearerToken`], a [`TokenFn`], or your own)
//! in place of credentials; everything its [module docs](crate::invoke) say about the mapping,
//! the runtime session and the answer holds. (An AgentCore Gateway or another MCP server with a
//! `CUSTOM_JWT` authorizer takes a token through
//! [`McpEndpointLayer::bearer`](crate::endpoint::McpEndpointLayer::bearer).)
//!
//! * The token is asked for on every attempt (cache in the provider, which knows its expiry).
//! * A request without a valid token gets a **401** with
//!   `WWW-Authenticate: Bearer resource_metadata="https://bedrock-agentcore.{region}.amazonaws.com/runtimes/{ARN}/invocations/.well-known/oauth-protected-resource?qualifier={qualifier}"`
//!   (the MCP protocol contract of AgentCore Runtime): nothing ran. The provider is asked once
//!   more, named the refused token, and the call sent again, when it can refresh and the call's
//!   rule and budget allow it — any 401, since a wrong token may come back without the
//!   challenge.
//! * A 401 that stays one is **delivered as an answer**, not turned into an error: with its
//!   `WWW-Authenticate`, and the challenge read into the response's extensions
//!   ([`BearerChallenge`]), so that an MCP client that runs the OAuth flow from a 401 (as rmcp's
//!   does) can; an app reads `resource_metadata()` from it.
//! * A signed request to an OAuth runtime gets a 403 `AccessDeniedException` ("Authorization
//!   method mismatch"), delivered as it is.
//! * The token is a secret like a signature: never in `Debug`, an error or the record, and
//!   redacted from every header and body byte of the answer, plainly or JSON-escaped.

mod bearer;
mod challenge;
mod credentials;
mod sigv4;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use http_body_util::Full;

pub use bearer::{BearerToken, ProvideToken, TokenFn, TokenFuture};
pub use challenge::BearerChallenge;
pub use credentials::CachedCredentials;

use crate::error::{Error, ErrorKind};
use crate::redact::{Secrets, cached_needle};
use bearer::{Bearer, check_token};
use sigv4::{SigV4, sign_sigv4};

/// A wall clock, for tests.
pub(crate) type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// How far the clocks must be apart before the signer corrects its own (the AWS SDKs' 4 min).
const SKEW_THRESHOLD: Duration = Duration::from_secs(4 * 60);

/// How a layer authenticates its attempts.
pub(crate) enum Auth {
    /// Boxed: its kept keys and URLs make it ten times a bearer's size.
    SigV4(Box<SigV4>),
    Bearer(Bearer),
}

/// The caching provider inside `credentials`, if it is one: its cache is dropped when the
/// service says the credentials expired.
pub(crate) fn cache_of(
    credentials: &(impl ProvideCredentials + 'static),
) -> Option<CachedCredentials> {
    (credentials as &dyn std::any::Any)
        .downcast_ref::<CachedCredentials>()
        .cloned()
}

/// What a builder was given to authenticate with, until it knows what to sign for.
pub(crate) enum AuthSource {
    SigV4 {
        credentials: SharedCredentialsProvider,
        cache: Option<CachedCredentials>,
    },
    Bearer(Arc<dyn ProvideToken>),
}

impl AuthSource {
    pub(crate) fn sigv4(credentials: impl ProvideCredentials + 'static) -> Self {
        AuthSource::SigV4 {
            cache: cache_of(&credentials),
            credentials: SharedCredentialsProvider::new(credentials),
        }
    }

    pub(crate) fn bearer(tokens: impl ProvideToken) -> Self {
        AuthSource::Bearer(Arc::new(tokens))
    }

    pub(crate) fn is_sigv4(&self) -> bool {
        matches!(self, AuthSource::SigV4 { .. })
    }

    /// The auth, signing for `signing_name` in `region` (unused for a bearer token).
    pub(crate) fn into_auth(self, signing_name: &str, region: &str, clock: Clock) -> Auth {
        match self {
            AuthSource::SigV4 { credentials, cache } => Auth::SigV4(Box::new(SigV4::new(
                credentials,
                cache,
                signing_name.to_owned(),
                region.to_owned(),
                clock,
            ))),
            AuthSource::Bearer(tokens) => Auth::Bearer(Bearer::new(tokens)),
        }
    }
}

impl fmt::Debug for AuthSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AuthSource::SigV4 { .. } => "SigV4(..)",
            AuthSource::Bearer(_) => "Bearer(..)",
        })
    }
}

/// An attempt ready to send: the request, the secrets its answer must not show, and the time
/// its signature was dated by (SigV4).
pub(crate) type Authorized = (Request<Full<Bytes>>, Secrets, Option<SystemTime>);

/// What one attempt is authenticated with.
pub(crate) enum Key {
    SigV4(Credentials),
    Bearer(BearerToken),
}

/// The resolution of a [`Key`].
pub(crate) type KeyFuture = Pin<Box<dyn Future<Output = Result<Key, Error>> + Send>>;

/// Why a refused attempt is sent once more, authenticated afresh.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Refresh {
    /// `ExpiredTokenException`: the credentials are resolved again, the cache dropped.
    Expired,
    /// A signature refused while the answer's `Date` was far from the time it was signed at:
    /// the server's clock is this far from our raw clock (ms, the server's minus ours).
    Skewed(i64),
    /// HTTP 401: a new token is asked for.
    TokenRefused,
}

impl Refresh {
    pub(crate) fn cause(&self) -> &'static str {
        match self {
            Refresh::Expired => "expired credentials (ExpiredTokenException)",
            Refresh::Skewed(_) => {
                "clock skew (the signature was refused and the answer's Date is more than 4 minutes from our clock)"
            }
            Refresh::TokenRefused => "the bearer token was refused (HTTP 401)",
        }
    }
}

impl Auth {
    /// Resolves what the next attempt is authenticated with; `refused`, the token of the
    /// attempt before, when the server refused it.
    pub(crate) fn resolve(&self, refused: Option<&BearerToken>) -> KeyFuture {
        match self {
            Auth::SigV4(sigv4) => {
                let provider = sigv4.credentials.clone();
                Box::pin(async move {
                    provider
                        .provide_credentials()
                        .await
                        .map(Key::SigV4)
                        .map_err(|e| {
                            // Name the provider's own failure (the first cause), not only the
                            // category; credentials never appear in a provider's error.
                            let detail = match std::error::Error::source(&e) {
                                Some(cause) => format!("{e}: {cause}"),
                                None => e.to_string(),
                            };
                            Error::new(ErrorKind::Credentials, detail, Some(Box::new(e)))
                        })
                })
            }
            Auth::Bearer(bearer) => {
                let future = bearer.tokens.provide_token(refused);
                Box::pin(async move {
                    future
                        .await
                        .map(Key::Bearer)
                        .map_err(|e| Error::new(ErrorKind::Token, e.to_string(), Some(e)))
                })
            }
        }
    }

    /// Authenticates a request of `method` to `uri` with `headers` and `body`: signed at the
    /// corrected time, or carrying the bearer token. Returns the request ready to send, the
    /// secrets the answer must not show, and the time a signature was dated by.
    pub(crate) fn authorize(
        &self,
        key: &Key,
        method: Method,
        uri: http::Uri,
        mut headers: HeaderMap,
        body: Bytes,
        extensions: http::Extensions,
    ) -> Result<Authorized, Error> {
        let (secrets, signed_at) = match (self, key) {
            (Auth::SigV4(sigv4), Key::SigV4(credentials)) => {
                let at = sigv4.now();
                let secrets =
                    sign_sigv4(sigv4, credentials, at, &method, &uri, &mut headers, &body)?;
                (secrets, Some(at))
            }
            (Auth::Bearer(bearer), Key::Bearer(token)) => {
                check_token(token.as_str())?;
                let mut value = HeaderValue::try_from(format!("Bearer {}", token.as_str()))
                    .map_err(|_| {
                        Error::new(
                            ErrorKind::Token,
                            "it cannot be a header value".to_owned(),
                            None,
                        )
                    })?;
                value.set_sensitive(true);
                headers.insert(AUTHORIZATION, value);
                let secrets = Secrets::of([cached_needle(&bearer.needle, token.as_str())]);
                (secrets, None)
            }
            _ => unreachable!("a key is resolved by its own auth"),
        };
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        *request.headers_mut() = headers;
        *request.extensions_mut() = extensions;
        Ok((request, secrets, signed_at))
    }

    /// Whether an answer (its head redacted, and the server's time from its `Date`) calls for
    /// fresh authentication: for SigV4, a 403 for an expired token, or for a signature while
    /// the clocks are apart; for a bearer token, a 401 (with a `Bearer` challenge or not) from
    /// a provider that can give another token.
    pub(crate) fn refresh_for(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        server_time: Option<SystemTime>,
        signed_at: Option<SystemTime>,
    ) -> Option<Refresh> {
        match self {
            // Any 401: the token was not taken, so nothing ran. AgentCore sends its `Bearer`
            // challenge with a missing token; a wrong one may come back without it.
            Auth::Bearer(bearer) => (status == StatusCode::UNAUTHORIZED
                && bearer.tokens.can_refresh())
            .then_some(Refresh::TokenRefused),
            Auth::SigV4(sigv4) => {
                if status != StatusCode::FORBIDDEN {
                    return None;
                }
                let millis =
                    |later: SystemTime, earlier: SystemTime| match later.duration_since(earlier) {
                        Ok(ahead) => i64::try_from(ahead.as_millis()).ok(),
                        Err(behind) => i64::try_from(behind.duration().as_millis())
                            .ok()
                            .map(|m| -m),
                    };
                match crate::record::aws_error_type(headers)? {
                    "ExpiredTokenException" | "ExpiredToken" => Some(Refresh::Expired),
                    // `RequestExpired` is a clock error for the AWS SDKs: the date is too old.
                    "InvalidSignatureException"
                    | "SignatureDoesNotMatch"
                    | "RequestTimeTooSkewed"
                    | "RequestExpired"
                    | "AuthFailure"
                    | "AccessDeniedException" => {
                        let server = server_time?;
                        // Judged against the time this attempt was signed at, so an attempt
                        // signed before another call corrected the clock is judged rightly;
                        // the correction is the server's time minus our raw clock, set (not
                        // added), so calls refused together correct it once.
                        let off = millis(server, signed_at.unwrap_or_else(|| sigv4.now()))?;
                        let absolute = millis(server, (sigv4.clock)())?;
                        (off.unsigned_abs() > SKEW_THRESHOLD.as_millis() as u64)
                            .then_some(Refresh::Skewed(absolute))
                    }
                    _ => None,
                }
            }
        }
    }

    /// Gets ready for the fresh authentication: the credentials cache dropped, the clock
    /// corrected. (A refused token is replaced by asking its provider with the refused one.)
    pub(crate) fn refresh(&self, refresh: &Refresh) {
        let Auth::SigV4(sigv4) = self else { return };
        match refresh {
            Refresh::Expired => {
                if let Some(cache) = &sigv4.cache {
                    cache.invalidate();
                }
            }
            Refresh::Skewed(skew) => sigv4.skew_ms.store(*skew, Ordering::Relaxed),
            Refresh::TokenRefused => {}
        }
    }
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the credentials or the token: only what kind.
        match self {
            Auth::SigV4(sigv4) => f
                .debug_struct("SigV4")
                .field("credentials", &"SharedCredentialsProvider(..)")
                .field("signing_name", &sigv4.signing_name)
                .field("region", &sigv4.region)
                .finish(),
            Auth::Bearer(_) => f.write_str("Bearer(..)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_never_in_debug() {
        let token = BearerToken::new("eyJ.secret.sig");
        assert_eq!(format!("{token:?}"), "BearerToken(..)");
        let auth = Auth::Bearer(Bearer::new(Arc::new(token)));
        assert_eq!(format!("{auth:?}"), "Bearer(..)");
    }
}
