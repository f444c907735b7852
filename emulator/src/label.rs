//! A runtime ARN as AWS writes it in a URL path: percent-encoded as a path label, as the
//! official SDKs encode one (`aws_smithy_http::urlencode::BASE_SET`) — written here on its
//! own, not taken from the library, so that the emulator checks the library's URLs rather than
//! sharing their code.

use std::fmt;

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

/// Controls, space and `/ : , ? # [ ] { } | @ ! $ & ' ( ) * + ; = % < > " ^` `` ` `` `\`;
/// non-ASCII as UTF-8 bytes. Letters, digits, `-`, `.`, `_`, `~` stay as they are.
const LABEL: &AsciiSet = &with(CONTROLS, b" /:,?#[]{}|@!$&'()*+;=%<>\"^`\\");

/// `set` with each of `bytes` (at least one) added.
const fn with(set: &AsciiSet, bytes: &[u8]) -> AsciiSet {
    let mut out = set.add(bytes[0]);
    let mut at = 1;
    while at < bytes.len() {
        out = out.add(bytes[at]);
        at += 1;
    }
    out
}

/// `value` percent-encoded as a path label.
pub(crate) fn encode_label(value: &str) -> impl fmt::Display + '_ {
    utf8_percent_encode(value, LABEL)
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_arn_is_encoded_as_the_sdk_encodes_a_label() {
        let arn = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/my_agent-AbC~1.0";
        assert_eq!(
            super::encode_label(arn).to_string(),
            "arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A123456789012%3Aruntime%2Fmy_agent-AbC~1.0"
        );
        assert_eq!(super::encode_label("a b+é").to_string(), "a%20b%2B%C3%A9");
    }
}
