//! The doors: who a request is (a SigV4 signature, a bearer token), the refusals and `Bearer`
//! challenges of each, and the protected-resource metadata a bearer door publishes.

use std::time::SystemTime;

use http::{HeaderValue, Response, StatusCode};
use serde_json::{Value, json};

use super::answer::{AnswerBody, aws_error, plain_json, respond, with_session};
use crate::{Principal, SignatureError, SignatureVerifier, State};

/// How a request presented itself, and the emulator's verdict on it.
pub(super) enum Auth {
    /// A SigV4 signature that checked out, by this access key id.
    Signed(String),
    /// The SigV4 signature was refused.
    SignatureRefused(SignatureError),
    /// An accepted bearer token, by the principal it stands for.
    Bearer(Principal),
    /// The bearer door: no bearer token (no `Authorization`, or another scheme than SigV4).
    NoToken,
    /// The bearer door: a bearer token that is not accepted.
    WrongToken,
    /// The other door's credentials: SigV4 at a bearer runtime, a bearer token at a SigV4
    /// runtime.
    Mismatch,
    /// Not checked (the metadata document needs no auth).
    Unchecked,
}

/// The scheme of the `Authorization` header, for the audit.
pub(super) fn scheme(parts: &http::request::Parts) -> Option<&'static str> {
    let value = parts.headers.get("authorization")?.as_bytes();
    Some(if value.starts_with(b"AWS4-HMAC-SHA256 ") {
        "sigv4"
    } else if bearer_token(value).is_some() {
        "bearer"
    } else {
        "other"
    })
}

/// The token of an `Authorization: Bearer <token>` value (the scheme is case-insensitive).
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let (scheme, token) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = token.trim_ascii();
    (!token.is_empty()).then_some(token)
}

pub(super) fn authenticate(parts: &http::request::Parts, body: &[u8], state: &State) -> Auth {
    let presented = scheme(parts);
    let tokens = state.tokens.lock().unwrap_or_else(|p| p.into_inner());
    let Some(tokens) = tokens.as_ref() else {
        // The SigV4 door. A runtime tells a bearer token for the other door; a gateway checks
        // the signature as it is (and finds none).
        if presented == Some("bearer") && !state.config.gateway {
            return Auth::Mismatch;
        }
        return match state.verifier.verify(parts, body, SystemTime::now()) {
            Ok(()) => Auth::Signed(SignatureVerifier::access_key_of(parts).unwrap_or_default()),
            Err(refused) => Auth::SignatureRefused(refused),
        };
    };
    let value = parts
        .headers
        .get("authorization")
        .map(HeaderValue::as_bytes)
        .unwrap_or_default();
    match bearer_token(value) {
        Some(token) if tokens.iter().any(|t| same_bytes(t.as_bytes(), token)) => {
            Auth::Bearer(token_principal(token))
        }
        Some(_) => Auth::WrongToken,
        None if presented == Some("sigv4") => Auth::Mismatch,
        None => Auth::NoToken,
    }
}

/// Compares without an early exit on the first differing byte.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Who a bearer token stands for, as a gateway scopes its sessions: a JWT's `sub` claim (its
/// payload read, its signature not checked: the token was accepted by value), so that a
/// refreshed token of the same user keeps the user's sessions; any other token by a
/// fingerprint of itself.
fn token_principal(token: &[u8]) -> Principal {
    let subject = std::str::from_utf8(token).ok().and_then(|token| {
        match agentcore_tower::auth::BearerToken::new(token)
            .jwt_claims()?
            .remove("sub")?
        {
            Value::String(sub) if !sub.is_empty() => Some(sub),
            _ => None,
        }
    });
    match subject {
        Some(sub) => Principal::Subject(sub),
        None => {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::hash::DefaultHasher::new();
            token.hash(&mut hasher);
            Principal::Token(hasher.finish())
        }
    }
}

/// The runtime's refusal of a request's credentials, if any.
pub(super) fn refuse_runtime(
    auth: &Auth,
    parts: &http::request::Parts,
    state: &State,
) -> Option<Response<AnswerBody>> {
    match auth {
        Auth::Signed(_) | Auth::Bearer(_) | Auth::Unchecked => None,
        Auth::SignatureRefused(refused) => {
            state.record(|a| a.signature_failures += 1);
            Some(aws_error(
                StatusCode::FORBIDDEN,
                refused.error_type(),
                &refused.to_string(),
            ))
        }
        Auth::Mismatch => {
            state.record(|a| a.auth_method_mismatches += 1);
            Some(aws_error(
                StatusCode::FORBIDDEN,
                "AccessDeniedException",
                AUTH_METHOD_MISMATCH,
            ))
        }
        Auth::NoToken => Some(runtime_challenge(
            parts,
            state,
            "Missing Authentication Token",
        )),
        Auth::WrongToken => Some(runtime_challenge(
            parts,
            state,
            "OAuth authorization failed: the token is not one this runtime accepts",
        )),
    }
}

/// What AWS answers a SigV4 request to a runtime configured for OAuth (and the reverse).
const AUTH_METHOD_MISMATCH: &str = "Authorization method mismatch. The agent is configured for a \
     different authorization method than what was used in your request. Check the agent's \
     authorization configuration and ensure your request uses the matching method (OAuth or SigV4)";

pub(super) const METADATA_OPERATION: &str = "oauth-protected-resource";

pub(super) const GATEWAY_METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

pub(super) const RUNTIME_METADATA_OPERATION: &str =
    "invocations/.well-known/oauth-protected-resource";

/// The `qualifier` of the query, as requested (still encoded), or `DEFAULT`.
fn qualifier(parts: &http::request::Parts) -> &str {
    parts
        .uri
        .query()
        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("qualifier=")))
        .unwrap_or("DEFAULT")
}

/// `<endpoint>/runtimes/<escaped ARN>/invocations`.
fn runtime_invocations(state: &State) -> String {
    format!(
        "{}/runtimes/{}/invocations",
        state.endpoint,
        crate::label::encode_label(&state.config.runtime_arn)
    )
}

fn unauthorized(state: &State, challenge: &str, message: &str) -> Response<AnswerBody> {
    state.record(|a| a.unauthorized += 1);
    with_session(
        respond(
            StatusCode::UNAUTHORIZED,
            &[
                ("www-authenticate", challenge),
                ("content-type", "application/json"),
            ],
            json!({"jsonrpc": "2.0", "error": {"code": -32001, "message": message}}).to_string(),
        ),
        None,
    )
}

/// A bearer runtime's 401: the challenge names its protected-resource metadata.
fn runtime_challenge(
    parts: &http::request::Parts,
    state: &State,
    message: &str,
) -> Response<AnswerBody> {
    let challenge = format!(
        "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource?qualifier={}\"",
        runtime_invocations(state),
        qualifier(parts)
    );
    unauthorized(state, &challenge, message)
}

/// A bearer gateway's 401.
pub(super) fn gateway_challenge(state: &State) -> Response<AnswerBody> {
    let challenge = format!(
        "Bearer error=\"invalid_token\", resource_metadata=\"{}{GATEWAY_METADATA_PATH}\"",
        state.endpoint
    );
    unauthorized(state, &challenge, "Invalid Bearer token")
}

/// The RFC 9728 document of a bearer runtime.
pub(super) fn runtime_metadata(
    parts: &http::request::Parts,
    arn: &str,
    state: &State,
) -> Response<AnswerBody> {
    if arn != state.config.runtime_arn {
        return aws_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            "No runtime with this ARN.",
        );
    }
    let resource = format!(
        "{}?qualifier={}",
        runtime_invocations(state),
        qualifier(parts)
    );
    metadata(parts, &resource, state)
}

/// The RFC 9728 document of a bearer gateway.
pub(super) fn gateway_metadata(
    parts: &http::request::Parts,
    state: &State,
) -> Response<AnswerBody> {
    metadata(parts, &format!("{}/mcp", state.endpoint), state)
}

fn metadata(parts: &http::request::Parts, resource: &str, state: &State) -> Response<AnswerBody> {
    if parts.method != http::Method::GET {
        return aws_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowedException",
            "GET only.",
        );
    }
    let document = json!({
        "resource": resource,
        "authorization_servers": [state.config.issuer],
        "bearer_methods_supported": ["header"],
    });
    with_session(plain_json(StatusCode::OK, document.to_string()), None)
}
