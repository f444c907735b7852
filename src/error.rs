//! The errors of this crate: [`Error`], the one error type of its layers' calls, and
//! [`ConfigError`], what is wrong with a layer's settings when it is built.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use crate::record::AttemptRecord;
use crate::rule::FailureKind;

/// A boxed error, as tower passes them around.
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// An error returned by one of this crate's layers.
///
/// Every layer of this crate returns this type, so a stack of them never nests one wrapper in
/// another: an error from a layer below is passed up as it is, and the original failure of the
/// service below stays reachable through [`source`](StdError::source). Every error carries
/// the call's [`AttemptRecord`], so an app can tell what was sent before it failed.
///
/// Its `Display` and `Debug` never contain a credential, a signature or a header value (none
/// of its fields holds one: the record's and the source's own `Debug` say no more).
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    detail: Option<String>,
    record: Option<AttemptRecord>,
    source: Option<BoxError>,
}

/// What kind of failure an [`Error`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The service below (the HTTP client, or a layer that is not this crate's) failed; its
    /// error is the [`source`](StdError::source).
    Service,
    /// The AWS credentials provider failed; its error is the source.
    Credentials,
    /// The bearer token provider failed, or gave a token that cannot be sent; its error, if
    /// any, is the source.
    Token,
    /// Signing the request failed.
    Signing,
    /// The request cannot be sent as asked: a header the service would refuse, a value that
    /// is not text, an MCP endpoint URL that is not absolute or carries a password.
    InvalidRequest,
    /// The request body is larger than `InvokeAgentRuntime` accepts (100,000,000 bytes).
    BodyTooLarge,
    /// The request body could not be read; its error is the source.
    RequestBody,
    /// The request's send gate refused it: nothing was sent.
    SendGateClosed,
}

impl Error {
    /// Wraps the error of the service below, unless it already is one of ours (then it is
    /// returned as it is, so stacked layers never wrap twice).
    pub(crate) fn from_service(error: impl Into<BoxError>) -> Self {
        match error.into().downcast::<Error>() {
            Ok(ours) => *ours,
            Err(other) => Error {
                kind: ErrorKind::Service,
                detail: None,
                record: None,
                source: Some(other),
            },
        }
    }

    /// An error of `kind`, with a detail for the message and an optional source.
    pub(crate) fn new(
        kind: ErrorKind,
        detail: impl Into<Option<String>>,
        source: Option<BoxError>,
    ) -> Self {
        Error {
            kind,
            detail: detail.into(),
            record: None,
            source,
        }
    }

    /// Attaches the call's record unless one is attached already.
    pub(crate) fn with_record(mut self, record: &AttemptRecord) -> Self {
        if self.record.is_none() {
            self.record = Some(record.clone());
        }
        self
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The record of every attempt the call made before it failed.
    pub fn record(&self) -> Option<&AttemptRecord> {
        self.record.as_ref()
    }

    /// How the attempt failed, read off the error chain: see [`FailureKind::of_error`].
    pub fn failure_kind(&self) -> FailureKind {
        match &self.source {
            Some(source) => FailureKind::of_error(source.as_ref()),
            None => FailureKind::Other,
        }
    }
}

impl FailureKind {
    /// Classifies an error by walking its [`source`](StdError::source) chain. The first link
    /// that says something decides:
    ///
    /// * **never sent** — proof that the request was not written:
    ///   [`RequestNotSent`] (for transports that can tell, wrap their error in it);
    ///   hyper-util's legacy client error with `is_connect()` (the connection was never
    ///   established, so nothing was written on it), and (feature `reqwest`) a reqwest error with
    ///   `is_connect()`; an [`std::io::Error`] of kind `ConnectionRefused`;
    /// * **connection dropped** — an `io::Error` of kind `ConnectionReset`,
    ///   `ConnectionAborted`, `BrokenPipe` or `UnexpectedEof`, or hyper's "incomplete message"
    ///   (the connection closed before the whole answer came);
    /// * **timed out** — an `io::Error` of kind `TimedOut`, hyper's timeout, tokio's or tower's
    ///   `Elapsed`, and (feature `reqwest`) a reqwest timeout;
    /// * anything else → [`Other`](FailureKind::Other): nothing is known.
    ///
    /// hyper-util's legacy client re-sends by itself a request that was never started on a
    /// reused pooled connection (`retry_canceled_requests`, on by default); what reaches this
    /// crate after that is classified as above.
    pub fn of_error(error: &(dyn StdError + 'static)) -> FailureKind {
        let mut next = Some(error);
        while let Some(e) = next {
            if e.is::<RequestNotSent>() {
                return FailureKind::NeverSent;
            }
            if let Some(client) = e.downcast_ref::<hyper_util::client::legacy::Error>()
                && client.is_connect()
            {
                return FailureKind::NeverSent;
            }
            #[cfg(feature = "reqwest")]
            if let Some(reqwest) = e.downcast_ref::<::reqwest::Error>() {
                // A connection never established carried nothing (a connect timeout among
                // them); reqwest's own timeout type is private, so it is asked here.
                if reqwest.is_connect() {
                    return FailureKind::NeverSent;
                }
                if reqwest.is_timeout() {
                    return FailureKind::TimedOut;
                }
            }
            if let Some(hyper) = e.downcast_ref::<hyper::Error>() {
                if hyper.is_incomplete_message() {
                    return FailureKind::ConnectionDropped;
                }
                if hyper.is_timeout() {
                    return FailureKind::TimedOut;
                }
            }
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                use std::io::ErrorKind as K;
                match io.kind() {
                    K::ConnectionRefused => return FailureKind::NeverSent,
                    K::ConnectionReset
                    | K::ConnectionAborted
                    | K::BrokenPipe
                    | K::UnexpectedEof => {
                        return FailureKind::ConnectionDropped;
                    }
                    K::TimedOut => return FailureKind::TimedOut,
                    _ => {}
                }
            }
            if e.is::<tokio::time::error::Elapsed>() || e.is::<tower::timeout::error::Elapsed>() {
                return FailureKind::TimedOut;
            }
            next = e.source();
        }
        FailureKind::Other
    }
}

/// Proof that a request was never written to the network, for transports that can tell (an
/// HTTP client that failed before sending, a connection pool that refused the request).
/// Wrap the transport's error in it, and the replay rule may re-send any request after it.
///
/// ```
/// use agentcore_tower::{rule::FailureKind, error::RequestNotSent};
/// let error = RequestNotSent::new(std::io::Error::other("pool closed before send"));
/// assert_eq!(FailureKind::of_error(&error), FailureKind::NeverSent);
/// ```
#[derive(Debug)]
pub struct RequestNotSent(BoxError);

impl RequestNotSent {
    /// Wraps the transport's error.
    pub fn new(error: impl Into<BoxError>) -> Self {
        Self(error.into())
    }
}

impl fmt::Display for RequestNotSent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the request was not sent")
    }
}

impl StdError for RequestNotSent {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self.0.as_ref())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind {
            ErrorKind::Service => "the service below failed",
            ErrorKind::Credentials => "could not resolve AWS credentials",
            ErrorKind::Token => "could not get a bearer token",
            ErrorKind::Signing => "could not sign the request",
            ErrorKind::InvalidRequest => "the request cannot be sent",
            ErrorKind::BodyTooLarge => {
                "the request body is larger than InvokeAgentRuntime accepts (100000000 bytes)"
            }
            ErrorKind::RequestBody => "could not read the request body",
            ErrorKind::SendGateClosed => "the send gate refused the request; nothing was sent",
        })?;
        if let Some(detail) = &self.detail {
            write!(f, ": {detail}")?;
        } else if self.kind == ErrorKind::Service {
            // Say how it failed, as far as the error tells; the source has the rest.
            match self.failure_kind() {
                FailureKind::Other => {}
                kind => write!(f, ": {kind}")?,
            }
        }
        if let Some(record) = &self.record {
            let n = record.len();
            write!(f, " (after {n} attempt{})", if n == 1 { "" } else { "s" })?;
        }
        Ok(())
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

/// What is wrong with a target or a layer's settings, found when the layer is built.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The runtime ARN (or runtime id) is empty.
    EmptyRuntimeArn,
    /// The account id is not 12 digits.
    InvalidAccountId(String),
    /// The qualifier is empty (leave it out to use the default endpoint).
    EmptyQualifier,
    /// No region was given and none can be read off the ARN, or the region is empty.
    MissingRegion,
    /// The region is not a plausible AWS region name (lower-case letters, digits and `-`).
    InvalidRegion(String),
    /// The endpoint override (or an MCP endpoint layer's origin) is not an absolute
    /// `http`/`https` URL with a host.
    InvalidEndpoint {
        /// The endpoint as given, without what could be a secret in it (user information, a
        /// query).
        endpoint: String,
        /// Why it was refused.
        reason: String,
    },
    /// FIPS or dual-stack was asked for together with an explicit endpoint, which is used as given.
    EndpointWithVariant,
    /// The runtime session id is outside the service's 33..=256 characters, or is not visible
    /// ASCII.
    InvalidRuntimeSessionId {
        /// Its length in characters.
        length: usize,
    },
    /// The runtime user id is outside the service's 1..=1024 characters, or is not visible ASCII.
    InvalidRuntimeUserId {
        /// Its length in characters.
        length: usize,
    },
    /// The AWS configuration has no credentials provider.
    NoCredentials,
    /// The SigV4 signing name is not a plausible service name (lower-case letters, digits and
    /// `-`, 1 to 64 characters).
    InvalidSigningName(String),
    /// The AgentCore Gateway id is not one (letters, digits and `-`, 1 to 100 characters).
    InvalidGatewayId(String),
    /// A runtime session's idle timeout or lifetime is longer than AgentCore takes.
    RuntimeSessionTimeTooLong {
        /// The builder's setting, e.g. `runtime_session_max_lifetime`.
        setting: &'static str,
        /// The time it was given.
        given: Duration,
        /// The longest AgentCore takes: 14 days, on AgentCore Instances.
        max: Duration,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::EmptyRuntimeArn => f.write_str("the runtime ARN is empty"),
            ConfigError::InvalidAccountId(id) => {
                write!(f, "the account id `{id}` is not 12 digits")
            }
            ConfigError::EmptyQualifier => {
                f.write_str("the qualifier is empty (leave it out to use the DEFAULT endpoint)")
            }
            ConfigError::MissingRegion => f.write_str(
                "no region: give one, or a runtime ARN that names it (arn:aws:bedrock-agentcore:REGION:…)",
            ),
            ConfigError::InvalidRegion(region) => write!(f, "`{region}` is not an AWS region name"),
            ConfigError::InvalidEndpoint { endpoint, reason } => {
                write!(f, "the endpoint `{endpoint}` cannot be used: {reason}")
            }
            ConfigError::EndpointWithVariant => f.write_str(
                "an explicit endpoint is used as given: it cannot be combined with FIPS or dual-stack",
            ),
            ConfigError::InvalidRuntimeSessionId { length } => write!(
                f,
                "the runtime session id must be 33 to 256 visible ASCII characters (got {length})"
            ),
            ConfigError::NoCredentials => f.write_str(
                "the AWS configuration has no credentials provider (no profile, no environment variables, no SSO session?)",
            ),
            ConfigError::InvalidRuntimeUserId { length } => write!(
                f,
                "the runtime user id must be 1 to 1024 visible ASCII characters (got {length})"
            ),
            ConfigError::InvalidSigningName(name) => write!(
                f,
                "`{name}` is not a SigV4 signing name (lower-case letters, digits and `-`)"
            ),
            ConfigError::InvalidGatewayId(id) => write!(
                f,
                "`{id}` is not an AgentCore Gateway id (letters, digits and `-`)"
            ),
            ConfigError::RuntimeSessionTimeTooLong {
                setting,
                given,
                max,
            } => write!(
                f,
                "{setting} is {given:?}: AgentCore takes at most {max:?} (14 days, for a runtime \
                 on AgentCore Instances; 8 hours on microVMs)"
            ),
        }
    }
}

impl StdError for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ours_is_never_wrapped_twice() {
        let inner = Error::from_service(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        let record = AttemptRecord::new();
        let inner = inner.with_record(&record);
        let outer = Error::from_service(inner);
        assert_eq!(outer.kind(), ErrorKind::Service);
        assert!(outer.record().is_some());
        let source = outer.source().unwrap();
        assert!(
            source.is::<std::io::Error>(),
            "the source is the io error itself"
        );
        assert_eq!(outer.failure_kind(), FailureKind::ConnectionDropped);
    }

    #[test]
    fn failure_kinds() {
        use std::io::{Error as Io, ErrorKind as K};
        let of = |e: BoxError| FailureKind::of_error(e.as_ref());
        assert_eq!(
            of(Box::new(Io::from(K::BrokenPipe))),
            FailureKind::ConnectionDropped
        );
        assert_eq!(of(Box::new(Io::from(K::TimedOut))), FailureKind::TimedOut);
        assert_eq!(of(Box::new(Io::from(K::NotFound))), FailureKind::Other);
        assert_eq!(
            of(Box::new(tower::timeout::error::Elapsed::new())),
            FailureKind::TimedOut
        );
        assert_eq!(of("boom".into()), FailureKind::Other);
        assert_eq!(
            of(Box::new(Io::from(K::ConnectionRefused))),
            FailureKind::NeverSent
        );
        assert_eq!(
            of(Box::new(RequestNotSent::new("x"))),
            FailureKind::NeverSent
        );
        // The first link that says something decides.
        let wrapped = RequestNotSent::new(Io::from(K::ConnectionReset));
        assert_eq!(of(Box::new(wrapped)), FailureKind::NeverSent);
    }
}
