//! The AWS error type of an answer (`x-amzn-errortype`), read as the official SDK reads it
//! and never taken at the server's word.

use std::fmt;

use http::HeaderMap;

use crate::contract::ErrorTypeHeader;

/// The AWS error type of a response, as the official SDK reads `x-amzn-errortype`: the value up
/// to its first `:` (AWS appends `:namespace`), without any `namespace#` prefix — when what is
/// left looks like an AWS error type name: an ASCII capital letter, then letters, digits or `_`,
/// 128 characters at most (`ThrottlingException`, `InternalFailure`). Anything else counts as
/// absent: the header comes from the server, and is never taken at its word.
///
/// ```
/// use agentcore_tower::record::aws_error_type;
/// let mut headers = http::HeaderMap::new();
/// headers.insert("x-amzn-errortype", "ThrottlingException:http://internal.amazon.com/coral/".parse().unwrap());
/// assert_eq!(aws_error_type(&headers), Some("ThrottlingException"));
/// headers.insert("x-amzn-errortype", "com.amazonaws#RetryableConflictException".parse().unwrap());
/// assert_eq!(aws_error_type(&headers), Some("RetryableConflictException"));
/// // A signature's hex, an echoed token: not an error type.
/// headers.insert("x-amzn-errortype", "3f2a9c0d41b7e6f85a2c9d0e1f3b4a5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a".parse().unwrap());
/// assert_eq!(aws_error_type(&headers), None);
/// ```
pub fn aws_error_type(headers: &HeaderMap) -> Option<&str> {
    ErrorTypeHeader::read(headers).name()
}

/// A response's AWS error type, as the record keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorType {
    /// No `x-amzn-errortype` header.
    Absent,
    /// An error type name (see [`aws_error_type`]).
    Named(String),
    /// A header whose value does not look like an error type name: never recorded verbatim,
    /// since it comes from the server (and could echo anything it received).
    Unrecognised,
}

impl ErrorType {
    /// The error type of a response head.
    pub fn of(headers: &HeaderMap) -> Self {
        match ErrorTypeHeader::read(headers) {
            ErrorTypeHeader::Absent => ErrorType::Absent,
            ErrorTypeHeader::Named(name) => ErrorType::Named(name.to_owned()),
            ErrorTypeHeader::Unrecognised => ErrorType::Unrecognised,
        }
    }

    /// The name, when it is one.
    pub fn name(&self) -> Option<&str> {
        match self {
            ErrorType::Named(name) => Some(name),
            ErrorType::Absent | ErrorType::Unrecognised => None,
        }
    }
}

impl fmt::Display for ErrorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorType::Absent => Ok(()),
            ErrorType::Named(name) => f.write_str(name),
            ErrorType::Unrecognised => f.write_str("(unrecognised error type)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use http::StatusCode;

    use super::*;
    use crate::record::Outcome;

    #[test]
    fn error_type_is_the_part_before_the_colon() {
        let mut h = HeaderMap::new();
        assert_eq!(aws_error_type(&h), None);
        h.insert(
            "x-amzn-errortype",
            "RetryableConflictException:ns".parse().unwrap(),
        );
        assert_eq!(aws_error_type(&h), Some("RetryableConflictException"));
        h.insert("x-amzn-errortype", "A B".parse().unwrap());
        assert_eq!(aws_error_type(&h), None);
        assert_eq!(ErrorType::of(&h), ErrorType::Unrecognised);
        h.insert("x-amzn-errortype", ":ns".parse().unwrap());
        assert_eq!(aws_error_type(&h), None);
        for not_a_name in [
            "3f2a9c0d41b7e6f85a2c9d0e1f3b4a5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a",
            "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJH",
            "throttlingException",
            "[redacted]",
        ] {
            h.insert("x-amzn-errortype", not_a_name.parse().unwrap());
            assert_eq!(ErrorType::of(&h), ErrorType::Unrecognised, "{not_a_name}");
            let outcome = Outcome::of_response(StatusCode::OK, &h).to_string();
            assert_eq!(outcome, "HTTP 200 (unrecognised error type)");
        }
        assert_eq!(ErrorType::of(&HeaderMap::new()), ErrorType::Absent);
    }
}
