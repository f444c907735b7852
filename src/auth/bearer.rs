//! Bearer tokens (OAuth inbound auth): the token, its providers, and the check every attempt
//! makes before it sends one.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use crate::error::{BoxError, Error, ErrorKind};
use crate::redact::Needle;

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
    /// use agentcore_tower::auth::BearerToken;
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
    /// use agentcore_tower::auth::BearerToken;
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
pub(super) fn check_token(token: &str) -> Result<(), Error> {
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
/// use agentcore_tower::auth::{BearerToken, TokenFn};
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

/// A bearer token provider, and the searcher for the last token it gave.
pub(crate) struct Bearer {
    pub(super) tokens: Arc<dyn ProvideToken>,
    pub(super) needle: Mutex<Option<Needle>>,
}

impl Bearer {
    pub(crate) fn new(tokens: Arc<dyn ProvideToken>) -> Self {
        Self {
            tokens,
            needle: Mutex::new(None),
        }
    }
}
