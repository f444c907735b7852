//! How an attempt says who sends it: a SigV4 signature over the request, or a bearer token
//! (OAuth inbound auth). Both are resolved afresh for every attempt, and both are secrets the
//! answer must never show.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode};
use http_body_util::Full;

use super::credentials::CachedCredentials;
use crate::error::{BoxError, Error, ErrorKind};
use crate::redact::{Needle, Secrets, cached_needle, needle};

/// A bearer token (an OAuth access token, usually a JWT): a secret. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(Arc<str>);

impl BearerToken {
    /// Wraps a token, as sent after `Bearer ` in the `Authorization` header.
    pub fn new(token: impl Into<String>) -> Self {
        Self(Arc::from(token.into()))
    }

    /// The token itself, to hand to whatever needs it: keep it out of logs.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the token can be sent, by the check every attempt makes before it is: RFC
    /// 6750's `b64token` (letters, digits, `-._~+/`, then `=`s) of at least 8 characters — a
    /// shorter one would be masked wherever its few characters occur in an answer, and is no
    /// credential anyway. The error says which rule it breaks, never the token: check a token
    /// where it comes in (a variable, a command's output) to refuse it there.
    ///
    /// ```
    /// use agentcore_tower::sigv4::BearerToken;
    /// assert!(BearerToken::new("eyJhbGciOiJub25lIn0.e30.c2ln").check().is_ok());
    /// let why = BearerToken::new("short").check().unwrap_err();
    /// assert!(why.ends_with("at least 8 characters; this one has 5"), "{why}");
    /// assert!(BearerToken::new("two words").check().is_err());
    /// ```
    pub fn check(&self) -> Result<(), String> {
        token_rule(&self.0)
    }

    /// The claims of a token that is a JWT: the second of its three dot-separated parts,
    /// base64url-encoded JSON (padded or not), decoded — **not verified**: for reading what
    /// the token says of itself (its `exp`, to fetch the next one in time; its `sub`), never for
    /// trusting it. `None` for a token that is not a JWT, or whose payload is not a JSON object.
    ///
    /// ```
    /// use agentcore_tower::sigv4::BearerToken;
    ///
    /// // {"alg":"none"} . {"sub":"user-1","exp":1700000000} . signature
    /// let token = BearerToken::new("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ1c2VyLTEiLCJleHAiOjE3MDAwMDAwMDB9.c2ln");
    /// let claims = token.jwt_claims().unwrap();
    /// assert_eq!(claims["sub"], "user-1");
    /// assert_eq!(claims["exp"], 1_700_000_000);
    /// assert_eq!(BearerToken::new("opaque-access-token").jwt_claims(), None);
    /// ```
    pub fn jwt_claims(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        use base64::Engine;
        let mut parts = self.0.split('.');
        let (Some(_), Some(payload), Some(_), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload.trim_end_matches('='))
            .ok()?;
        serde_json::from_slice(&payload).ok()
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

/// The shortest bearer token sent: a shorter one would be masked wherever its few characters
/// occur in an answer, and is no credential anyway.
const SHORTEST_TOKEN: usize = 8;

/// Whether `token` can be sent: the rule of [`BearerToken::check`], as the error every attempt
/// with an unusable token fails with. The error never quotes it.
fn check_token(token: &str) -> Result<(), Error> {
    token_rule(token).map_err(|why| {
        Error::new(
            ErrorKind::Token,
            format!("the token provider gave no usable bearer token ({why})"),
            None,
        )
    })
}

/// RFC 6750's `b64token` (letters, digits, `-._~+/`, then `=`s), at least [`SHORTEST_TOKEN`]
/// characters: why not, without the token.
fn token_rule(token: &str) -> Result<(), String> {
    let body = token.trim_end_matches('=');
    let well_formed = !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b));
    if !well_formed || token.len() < SHORTEST_TOKEN {
        return Err(format!(
            "RFC 6750: letters, digits, `-._~+/` then `=`s; at least {SHORTEST_TOKEN} \
             characters; this one has {}",
            token.chars().count()
        ));
    }
    Ok(())
}

/// What [`ProvideToken::provide_token`] returns.
pub type TokenFuture = Pin<Box<dyn Future<Output = Result<BearerToken, BoxError>> + Send>>;

/// Where a layer gets a bearer token for each attempt: asked for every attempt, as credentials
/// are — cache in the provider, which knows when its token expires.
///
/// Two are provided: a [`BearerToken`] (always the same token) and [`TokenFn`] (a closure).
pub trait ProvideToken: Send + Sync + 'static {
    /// A token for the next attempt of a call. `refused` is `None` for its first attempt, and
    /// the token the server refused (HTTP 401) for the attempt after: give another one then,
    /// not the cached one. A provider shared by concurrent calls may already hold the token
    /// that replaced `refused` (another call was refused first): giving that one, rather than
    /// fetching again, makes calls refused together cost one fetch.
    fn provide_token(&self, refused: Option<&BearerToken>) -> TokenFuture;

    /// Whether asking after a refused token can give another token: when it cannot (a static
    /// token), a 401 is delivered at once instead of being sent again.
    fn can_refresh(&self) -> bool {
        true
    }
}

impl ProvideToken for BearerToken {
    fn provide_token(&self, _refused: Option<&BearerToken>) -> TokenFuture {
        let token = self.clone();
        Box::pin(async move { Ok(token) })
    }

    fn can_refresh(&self) -> bool {
        false
    }
}

/// A [`ProvideToken`] from a closure `Fn(refused: Option<BearerToken>) -> Future<Output =
/// Result<BearerToken, E>>`: `refused` as [`ProvideToken::provide_token`] has it.
///
/// ```
/// use agentcore_tower::sigv4::{BearerToken, TokenFn};
///
/// let tokens = TokenFn::new(|refused: Option<BearerToken>| async move {
///     // Ask the authorization server for a new token after a refused one; serve a cached one
///     // else.
///     let _ = refused;
///     Ok::<_, std::io::Error>(BearerToken::new("eyJhbGciOi..."))
/// });
/// # let _ = tokens;
/// ```
pub struct TokenFn<F>(F);

impl<F> TokenFn<F> {
    /// Wraps the closure.
    pub fn new<Fut, E>(f: F) -> Self
    where
        F: Fn(Option<BearerToken>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<BearerToken, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        Self(f)
    }
}

impl<F, Fut, E> ProvideToken for TokenFn<F>
where
    F: Fn(Option<BearerToken>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<BearerToken, E>> + Send + 'static,
    E: Into<BoxError>,
{
    fn provide_token(&self, refused: Option<&BearerToken>) -> TokenFuture {
        let future = (self.0)(refused.cloned());
        Box::pin(async move { future.await.map_err(Into::into) })
    }
}

impl<F> fmt::Debug for TokenFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenFn(..)")
    }
}

const X_AMZ_DATE: HeaderName = HeaderName::from_static("x-amz-date");
const X_AMZ_SECURITY_TOKEN: HeaderName = HeaderName::from_static("x-amz-security-token");

/// A wall clock, for tests.
pub(crate) type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// How far the clocks must be apart before the signer corrects its own (the AWS SDKs' 4 min).
const SKEW_THRESHOLD: Duration = Duration::from_secs(4 * 60);

/// How a layer authenticates its attempts.
pub(crate) enum Auth {
    SigV4(SigV4),
    Bearer(Bearer),
}

/// A bearer token provider, and the searcher for the last token it gave.
pub(crate) struct Bearer {
    tokens: Arc<dyn ProvideToken>,
    needle: Mutex<Option<Needle>>,
}

impl Bearer {
    pub(crate) fn new(tokens: Arc<dyn ProvideToken>) -> Self {
        Self {
            tokens,
            needle: Mutex::new(None),
        }
    }
}

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
    /// that ours is off by more than [`SKEW_THRESHOLD`] (as the AWS SDKs correct it).
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
    fn now(&self) -> SystemTime {
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
            AuthSource::SigV4 { credentials, cache } => Auth::SigV4(SigV4::new(
                credentials,
                cache,
                signing_name.to_owned(),
                region.to_owned(),
                clock,
            )),
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

/// The `Bearer` challenge of a 401 (`WWW-Authenticate`), as the MCP authorization
/// specification reads it: where the protected resource's metadata is, for an app that runs
/// the OAuth flow. The signing layers put it in the extensions of a 401 or 403 they deliver
/// with one (AgentCore Gateway answers a token without the scopes it wants with a 403
/// `insufficient_scope` challenge).
///
/// ```
/// use agentcore_tower::sigv4::BearerChallenge;
///
/// let mut headers = http::HeaderMap::new();
/// headers.insert(
///     "www-authenticate",
///     r#"Bearer resource_metadata="https://example.com/.well-known/oauth-protected-resource", error="invalid_token""#
///         .parse()
///         .unwrap(),
/// );
/// let challenge = BearerChallenge::of(&headers).unwrap();
/// assert_eq!(
///     challenge.resource_metadata(),
///     Some("https://example.com/.well-known/oauth-protected-resource")
/// );
/// assert_eq!(challenge.error(), Some("invalid_token"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BearerChallenge {
    resource_metadata: Option<String>,
    error: Option<String>,
    scope: Option<String>,
}

impl BearerChallenge {
    /// The `Bearer` challenge among `headers`' `WWW-Authenticate` values, if there is one.
    pub fn of(headers: &HeaderMap) -> Option<Self> {
        headers
            .get_all(http::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|value| challenge_starts(value).find_map(|at| parse_bearer(&value[at..])))
    }

    /// The URL of the protected resource's metadata (RFC 9728), the start of the OAuth flow.
    pub fn resource_metadata(&self) -> Option<&str> {
        self.resource_metadata.as_deref()
    }

    /// The error code (RFC 6750: `invalid_token`, `insufficient_scope`, …), if given.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// The scope the resource asks for, if given.
    pub fn scope(&self) -> Option<&str> {
        self.scope.as_deref()
    }
}

/// Where a challenge may start in a `WWW-Authenticate` value, which can hold several
/// (`Basic realm="x", Bearer resource_metadata="…"`): its start, and after every comma outside
/// a quoted string (a parameter's comma too: [`parse_bearer`] tells a scheme from a parameter).
fn challenge_starts(value: &str) -> impl Iterator<Item = usize> + '_ {
    let mut quoted = false;
    let mut escaped = false;
    std::iter::once(0).chain(value.char_indices().filter_map(move |(i, c)| {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => return Some(i + 1),
            _ => {}
        }
        None
    }))
}

/// Parses one challenge `Bearer k="v", k=v, …` (RFC 9110 §11.6.1's auth-params, quoted or
/// not); anything unreadable after the scheme is skipped, never a panic.
fn parse_bearer(value: &str) -> Option<BearerChallenge> {
    let value = value.trim_start();
    let scheme = value.get(..6)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let rest = &value[6..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let mut challenge = BearerChallenge {
        resource_metadata: None,
        error: None,
        scope: None,
    };
    let mut rest = rest.trim_start();
    while !rest.is_empty() {
        let Some(eq) = rest.find('=') else { break };
        let name = rest[..eq].trim().to_ascii_lowercase();
        let after = rest[eq + 1..].trim_start();
        let (param, next) = if let Some(quoted) = after.strip_prefix('"') {
            let mut out = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            out.push(escaped);
                        }
                    }
                    '"' => {
                        end = Some(i + 1);
                        break;
                    }
                    c => out.push(c),
                }
            }
            let Some(end) = end else { break };
            (out, &quoted[end..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_owned(), &after[end..])
        };
        match name.as_str() {
            "resource_metadata" => challenge.resource_metadata = Some(param),
            "error" => challenge.error = Some(param),
            "scope" => challenge.scope = Some(param),
            _ => {}
        }
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    Some(challenge)
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
        (uri, uri_text): (http::Uri, &str),
        mut headers: HeaderMap,
        body: Bytes,
        extensions: http::Extensions,
    ) -> Result<Authorized, Error> {
        let (secrets, signed_at) = match (self, key) {
            (Auth::SigV4(sigv4), Key::SigV4(credentials)) => {
                let at = sigv4.now();
                let secrets = sign_sigv4(
                    sigv4,
                    credentials,
                    at,
                    &method,
                    uri_text,
                    &mut headers,
                    &body,
                )?;
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

/// Signs `headers` for a request of `method` to `uri_text` with `body`, as the official SDK
/// does (agentcore-wire.md §1.3: the default settings — double percent-encoding of the path,
/// no `x-amz-content-sha256` header but the real payload hash, path normalisation, the
/// session token signed), and returns the attempt's secrets: its signature, the session token.
fn sign_sigv4(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn challenge(value: &str) -> Option<BearerChallenge> {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::WWW_AUTHENTICATE, value.parse().unwrap());
        BearerChallenge::of(&headers)
    }

    #[test]
    fn bearer_challenges_are_read_quoted_or_not() {
        let c = challenge(
            r#"Bearer resource_metadata="https://x/.well-known/oauth-protected-resource?qualifier=DEFAULT""#,
        )
        .unwrap();
        assert_eq!(
            c.resource_metadata(),
            Some("https://x/.well-known/oauth-protected-resource?qualifier=DEFAULT")
        );
        let c = challenge(r#"bearer error=invalid_token, scope="a b", realm="x\"y""#).unwrap();
        assert_eq!(
            (c.error(), c.scope(), c.resource_metadata()),
            (Some("invalid_token"), Some("a b"), None)
        );
        assert_eq!(challenge("Bearer").unwrap().error(), None);
        assert_eq!(challenge("Basic realm=\"x\""), None);
        // Several challenges in one value: the Bearer one is found, not a quoted look-alike.
        let c = challenge(r#"Basic realm="a, Bearer error=fake", Bearer error="invalid_token", resource_metadata="https://m""#).unwrap();
        assert_eq!(
            (c.error(), c.resource_metadata()),
            (Some("invalid_token"), Some("https://m"))
        );
        assert_eq!(challenge("Bearerish x=1"), None);
        // Unterminated quotes and stray text: read what can be read, never a panic.
        let c = challenge(r#"Bearer error="invalid_token, resource_metadata"#).unwrap();
        assert_eq!(c.error(), None);
        let c = challenge("Bearer ,,, =,= error=e").unwrap();
        assert_eq!(c.error(), None);
    }

    #[test]
    fn arbitrary_challenges_never_panic() {
        let mut rng = fastrand::Rng::with_seed(15);
        let alphabet = b"Bearer =\",\\ abcrsoue_mtadx";
        for _ in 0..20_000 {
            let len = rng.usize(0..40);
            let text: String = (0..len)
                .map(|_| alphabet[rng.usize(..alphabet.len())] as char)
                .collect();
            // Another scheme is never taken for Bearer; a Bearer challenge is always read.
            let other = parse_bearer(&format!("Basic {text}"));
            assert_eq!(other, None, "{text:?}");
            let bearer = parse_bearer(&format!("Bearer {text}"));
            assert!(bearer.is_some(), "{text:?}");
        }
    }

    #[test]
    fn a_token_is_never_in_debug() {
        let token = BearerToken::new("eyJ.secret.sig");
        assert_eq!(format!("{token:?}"), "BearerToken(..)");
        let auth = Auth::Bearer(Bearer::new(Arc::new(token)));
        assert_eq!(format!("{auth:?}"), "Bearer(..)");
    }
}
