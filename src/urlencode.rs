//! The characters the official SDKs percent-encode in a URL (`aws_smithy_http::urlencode`): the
//! signer's path labels, query values and canonical request all use the one set.

use percent_encoding::{AsciiSet, CONTROLS};

/// The characters the official SDK percent-encodes in a path label or a query value
/// (`aws_smithy_http::urlencode::BASE_SET`): controls, space and
/// `/ : , ? # [ ] { } | @ ! $ & ' ( ) * + ; = % < > " ^` `` ` `` `\`. Non-ASCII is encoded as
/// UTF-8 bytes. Letters, digits, `-`, `.`, `_`, `~` stay as they are.
pub(crate) const BASE_SET: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'/')
    .add(b':')
    .add(b',')
    .add(b'?')
    .add(b'#')
    .add(b'[')
    .add(b']')
    .add(b'{')
    .add(b'}')
    .add(b'|')
    .add(b'@')
    .add(b'!')
    .add(b'$')
    .add(b'&')
    .add(b'\'')
    .add(b'(')
    .add(b')')
    .add(b'*')
    .add(b'+')
    .add(b';')
    .add(b'=')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'"')
    .add(b'^')
    .add(b'`')
    .add(b'\\');
