//! Which runtime every request goes to, and where: the ARN (or id), qualifier, region, endpoint.

use std::fmt;

use http::Uri;
use http::uri::{Authority, Scheme};
use percent_encoding::utf8_percent_encode;

use crate::error::ConfigError;

/// Percent-encodes one path segment or query value as the official SDK does.
pub(crate) fn encode(value: &str) -> impl fmt::Display + '_ {
    utf8_percent_encode(value, crate::urlencode::BASE_SET)
}

/// Whether `region` is a plausible AWS region name: lower-case letters, digits and `-`, at most
/// 64 characters, not empty.
pub(crate) fn check_region(region: &str) -> Result<(), ConfigError> {
    if region.is_empty() {
        return Err(ConfigError::MissingRegion);
    }
    let plausible = region
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && region.len() <= 64;
    if plausible {
        Ok(())
    } else {
        Err(ConfigError::InvalidRegion(region.to_owned()))
    }
}

/// Which AgentCore runtime the requests go to, and through which endpoint.
///
/// ```
/// use agentcore_tower::invoke::InvokeTarget;
///
/// let target = InvokeTarget::arn("arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/my_agent-AbC123")
///     .qualifier("DEFAULT");
/// let resolved = target.resolve().unwrap();
/// assert_eq!(resolved.region(), "us-west-2"); // read off the ARN
/// assert_eq!(
///     resolved.invocation_uri().to_string(),
///     "https://bedrock-agentcore.us-west-2.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-west-2%3A123456789012%3Aruntime%2Fmy_agent-AbC123/invocations?qualifier=DEFAULT"
/// );
///
/// // A runtime id needs the account id; a bad one is refused with what is wrong.
/// let err = InvokeTarget::runtime_id("my_agent-AbC123", "12345").region("us-east-1").resolve().unwrap_err();
/// assert_eq!(err.to_string(), "the account id `12345` is not 12 digits");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct InvokeTarget {
    runtime: String,
    account_id: Option<String>,
    qualifier: Option<String>,
    region: Option<String>,
    endpoint: Option<String>,
    fips: bool,
    dual_stack: bool,
}

impl fmt::Debug for InvokeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InvokeTarget")
            .field("runtime", &self.runtime)
            .field("account_id", &self.account_id)
            .field("qualifier", &self.qualifier)
            .field("region", &self.region)
            .field(
                "endpoint",
                &self.endpoint.as_deref().map(crate::uri::shown_text),
            )
            .field("fips", &self.fips)
            .field("dual_stack", &self.dual_stack)
            .finish()
    }
}

impl InvokeTarget {
    /// Fills what the target leaves open from an AWS configuration: the region when neither the
    /// target nor its ARN names one, the endpoint when none is set and the configuration has one
    /// (`AWS_ENDPOINT_URL`, a profile's `endpoint_url`).
    #[cfg(feature = "aws-config")]
    pub(crate) fn completed_by(mut self, config: &aws_config::SdkConfig) -> Self {
        if let (Err(ConfigError::MissingRegion), Some(region)) =
            (self.clone().resolve(), config.region())
        {
            self.region = Some(region.as_ref().to_owned());
        }
        if let (None, Some(endpoint)) = (&self.endpoint, config.endpoint_url()) {
            self.endpoint = Some(endpoint.to_owned());
        }
        self
    }

    /// The runtime named by its full ARN.
    pub fn arn(arn: impl Into<String>) -> Self {
        Self {
            runtime: arn.into(),
            account_id: None,
            qualifier: None,
            region: None,
            endpoint: None,
            fips: false,
            dual_stack: false,
        }
    }

    /// The runtime named by its id and the 12-digit account that owns it.
    pub fn runtime_id(id: impl Into<String>, account_id: impl Into<String>) -> Self {
        Self {
            account_id: Some(account_id.into()),
            ..Self::arn(id)
        }
    }

    /// The endpoint (qualifier) of the runtime to invoke; without one, the DEFAULT endpoint.
    pub fn qualifier(mut self, qualifier: impl Into<String>) -> Self {
        self.qualifier = Some(qualifier.into());
        self
    }

    /// The region to sign for and to reach. Without one, the region named in the ARN.
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// An explicit endpoint (a VPC endpoint, a test server), used as given instead of the
    /// region's; e.g. `https://vpce-0123.bedrock-agentcore.us-east-1.vpce.amazonaws.com`.
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Uses the region's FIPS endpoint (`bedrock-agentcore-fips.…`).
    pub fn fips(mut self, fips: bool) -> Self {
        self.fips = fips;
        self
    }

    /// Uses the region's dual-stack endpoint (`….api.aws`).
    pub fn dual_stack(mut self, dual_stack: bool) -> Self {
        self.dual_stack = dual_stack;
        self
    }

    /// Checks the target and works out its endpoint and paths.
    pub fn resolve(&self) -> Result<ResolvedTarget, ConfigError> {
        if self.runtime.trim().is_empty() {
            return Err(ConfigError::EmptyRuntimeArn);
        }
        if let Some(account) = &self.account_id
            && (account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()))
        {
            return Err(ConfigError::InvalidAccountId(account.clone()));
        }
        if self.qualifier.as_deref().is_some_and(str::is_empty) {
            return Err(ConfigError::EmptyQualifier);
        }
        let region = match (&self.region, region_of_arn(&self.runtime)) {
            (Some(r), _) if r.is_empty() => return Err(ConfigError::MissingRegion),
            (Some(r), _) => r.clone(),
            (None, Some(r)) => r.to_owned(),
            (None, None) => return Err(ConfigError::MissingRegion),
        };
        check_region(&region)?;
        let (scheme, authority, base_path) = match &self.endpoint {
            Some(_) if self.fips || self.dual_stack => {
                return Err(ConfigError::EndpointWithVariant);
            }
            Some(endpoint) => parse_endpoint(endpoint)?,
            None => {
                let host = region_host(&region, self.fips, self.dual_stack);
                let authority = host
                    .parse::<Authority>()
                    .map_err(|_| ConfigError::InvalidRegion(region.clone()))?;
                (Scheme::HTTPS, authority, String::new())
            }
        };
        let arn = encode(&self.runtime).to_string();
        let mut invoke_query = Vec::new();
        if let Some(q) = &self.qualifier {
            invoke_query.push(format!("qualifier={}", encode(q)));
        }
        let stop_query = invoke_query.clone();
        if let Some(a) = &self.account_id {
            invoke_query.push(format!("accountId={}", encode(a)));
        }
        let join = |path: String, query: &[String]| {
            if query.is_empty() {
                path
            } else {
                format!("{path}?{}", query.join("&"))
            }
        };
        let uri = |path_and_query: String| {
            Uri::builder()
                .scheme(scheme.clone())
                .authority(authority.clone())
                .path_and_query(path_and_query)
                .build()
                .map_err(|e| ConfigError::InvalidEndpoint {
                    endpoint: crate::uri::shown_text(self.endpoint.as_deref().unwrap_or_default()),
                    reason: e.to_string(),
                })
        };
        let invoke = uri(join(
            format!("{base_path}/runtimes/{arn}/invocations"),
            &invoke_query,
        ))?;
        let stop = uri(join(
            format!("{base_path}/runtimes/{arn}/stopruntimesession"),
            &stop_query,
        ))?;
        let host = http::HeaderValue::from_str(authority.as_str()).map_err(|_| {
            ConfigError::InvalidEndpoint {
                endpoint: crate::uri::shown_text(self.endpoint.as_deref().unwrap_or_default()),
                reason: "its host is not a header value".to_owned(),
            }
        })?;
        Ok(ResolvedTarget {
            region,
            authority,
            host,
            invoke,
            stop,
        })
    }
}

/// The region field of an ARN (`arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE`), if any.
fn region_of_arn(arn: &str) -> Option<&str> {
    let mut fields = arn.split(':');
    (fields.next()? == "arn").then_some(())?;
    let region = fields.nth(2)?;
    (!region.is_empty()).then_some(region)
}

/// The region's endpoint host, by partition (agentcore-wire.md §1.2).
fn region_host(region: &str, fips: bool, dual_stack: bool) -> String {
    let (suffix, dual_suffix) = if region.starts_with("cn-") {
        ("amazonaws.com.cn", "api.amazonwebservices.com.cn")
    } else if region.starts_with("us-isob-") {
        ("sc2s.sgov.gov", "sc2s.sgov.gov")
    } else if region.starts_with("us-iso-") {
        ("c2s.ic.gov", "c2s.ic.gov")
    } else {
        ("amazonaws.com", "api.aws")
    };
    let service = if fips {
        "bedrock-agentcore-fips"
    } else {
        "bedrock-agentcore"
    };
    let suffix = if dual_stack { dual_suffix } else { suffix };
    format!("{service}.{region}.{suffix}")
}

fn parse_endpoint(endpoint: &str) -> Result<(Scheme, Authority, String), ConfigError> {
    let refuse = |reason: &str| ConfigError::InvalidEndpoint {
        endpoint: crate::uri::shown_text(endpoint),
        reason: reason.to_owned(),
    };
    let (scheme, authority, uri) = crate::uri::absolute_http(endpoint).map_err(refuse)?;
    if uri.query().is_some() {
        return Err(refuse("a query is not allowed"));
    }
    let base_path = uri.path().trim_end_matches('/').to_owned();
    Ok((scheme, authority, base_path))
}

/// A checked target: the region to sign for, and the URLs of the two operations (built once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedTarget {
    region: String,
    authority: Authority,
    /// The `Host` header of every request, built once.
    host: http::HeaderValue,
    invoke: Uri,
    stop: Uri,
}

impl ResolvedTarget {
    /// The signing region.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The endpoint's host (and port), as the `Host` header carries it.
    pub fn authority(&self) -> &Authority {
        &self.authority
    }

    /// The `Host` header value.
    pub(crate) fn host(&self) -> &http::HeaderValue {
        &self.host
    }

    /// The URL of `InvokeAgentRuntime`: `POST /runtimes/{ARN}/invocations[?qualifier=…][&accountId=…]`.
    pub fn invocation_uri(&self) -> Uri {
        self.invoke.clone()
    }

    /// The URL of `StopRuntimeSession`: `POST /runtimes/{ARN}/stopruntimesession[?qualifier=…]`.
    pub fn stop_session_uri(&self) -> Uri {
        self.stop.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARN: &str = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/my_agent-AbC123";

    #[test]
    fn the_sdks_wire_form() {
        let t = InvokeTarget::arn(ARN)
            .qualifier("DEFAULT")
            .resolve()
            .unwrap();
        assert_eq!(
            t.invocation_uri().to_string(),
            "https://bedrock-agentcore.us-west-2.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-west-2%3A123456789012%3Aruntime%2Fmy_agent-AbC123/invocations?qualifier=DEFAULT"
        );
        assert_eq!(
            t.stop_session_uri().to_string(),
            "https://bedrock-agentcore.us-west-2.amazonaws.com/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-west-2%3A123456789012%3Aruntime%2Fmy_agent-AbC123/stopruntimesession?qualifier=DEFAULT"
        );
        let t = InvokeTarget::runtime_id("my_agent-AbC123", "123456789012")
            .region("eu-central-1")
            .resolve()
            .unwrap();
        assert_eq!(
            t.invocation_uri().to_string(),
            "https://bedrock-agentcore.eu-central-1.amazonaws.com/runtimes/my_agent-AbC123/invocations?accountId=123456789012"
        );
        assert_eq!(
            t.stop_session_uri().path_and_query().unwrap().as_str(),
            "/runtimes/my_agent-AbC123/stopruntimesession",
            "StopRuntimeSession has no accountId"
        );
    }

    #[test]
    fn encoding_matches_base_set() {
        assert_eq!(
            encode("a b/c:d~e.f_g-h").to_string(),
            "a%20b%2Fc%3Ad~e.f_g-h"
        );
        assert_eq!(encode("é").to_string(), "%C3%A9");
        assert_eq!(encode("q=1&x").to_string(), "q%3D1%26x");
    }

    #[test]
    fn endpoints_by_variant_and_partition() {
        let host = |r: &str, fips, ds| {
            InvokeTarget::arn(ARN)
                .region(r)
                .fips(fips)
                .dual_stack(ds)
                .resolve()
                .unwrap()
                .authority()
                .to_string()
        };
        for (region, fips, dual_stack, expected) in [
            (
                "us-east-1",
                false,
                false,
                "bedrock-agentcore.us-east-1.amazonaws.com",
            ),
            (
                "us-east-1",
                true,
                false,
                "bedrock-agentcore-fips.us-east-1.amazonaws.com",
            ),
            (
                "us-east-1",
                false,
                true,
                "bedrock-agentcore.us-east-1.api.aws",
            ),
            (
                "us-east-1",
                true,
                true,
                "bedrock-agentcore-fips.us-east-1.api.aws",
            ),
            (
                "cn-north-1",
                false,
                false,
                "bedrock-agentcore.cn-north-1.amazonaws.com.cn",
            ),
            (
                "cn-north-1",
                false,
                true,
                "bedrock-agentcore.cn-north-1.api.amazonwebservices.com.cn",
            ),
            (
                "us-gov-west-1",
                false,
                false,
                "bedrock-agentcore.us-gov-west-1.amazonaws.com",
            ),
            (
                "us-iso-east-1",
                false,
                false,
                "bedrock-agentcore.us-iso-east-1.c2s.ic.gov",
            ),
            (
                "us-isob-east-1",
                false,
                false,
                "bedrock-agentcore.us-isob-east-1.sc2s.sgov.gov",
            ),
        ] {
            assert_eq!(
                host(region, fips, dual_stack),
                expected,
                "{region}, fips {fips}, dual stack {dual_stack}"
            );
        }
    }

    #[test]
    fn explicit_endpoints() {
        let t = InvokeTarget::arn(ARN)
            .endpoint("http://127.0.0.1:8080/prefix/")
            .resolve()
            .unwrap();
        assert_eq!(
            t.invocation_uri().to_string(),
            "http://127.0.0.1:8080/prefix/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aus-west-2%3A123456789012%3Aruntime%2Fmy_agent-AbC123/invocations"
        );
        assert_eq!(t.region(), "us-west-2");
    }

    /// Whatever the input, resolving never panics, and what resolves gives well-formed URLs
    /// (seeded; the fuzz target `target` runs the same check for longer).
    #[test]
    fn resolving_never_panics() {
        let mut rng = fastrand::Rng::with_seed(0x7a6);
        let text = |rng: &mut fastrand::Rng, alphabet: &str, max: usize| -> String {
            let chars: Vec<char> = alphabet.chars().collect();
            (0..rng.usize(0..=max))
                .map(|_| match rng.u8(0..8) {
                    0 => rng.char(..),
                    _ => chars[rng.usize(0..chars.len())],
                })
                .collect()
        };
        let arn = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/a-b_c/%é";
        for _ in 0..3000 {
            let runtime = text(&mut rng, arn, 80);
            let mut target = match rng.bool() {
                true => InvokeTarget::runtime_id(runtime, text(&mut rng, "0123456789az", 14)),
                false => InvokeTarget::arn(runtime),
            };
            if rng.bool() {
                target = target.qualifier(text(&mut rng, "DEFAULT-_ %", 20));
            }
            if rng.bool() {
                target = target.region(text(&mut rng, "us-east-1 ", 16));
            }
            if rng.bool() {
                target = target.endpoint(text(&mut rng, "https://a.b:80@/%?#-", 30));
            }
            if let Ok(resolved) = target.fips(rng.bool()).dual_stack(rng.bool()).resolve() {
                let uri = resolved.invocation_uri();
                assert!(uri.path().ends_with("/invocations"));
                let again: Uri = uri.to_string().parse().unwrap();
                assert_eq!(again, uri);
                let _ = resolved.stop_session_uri();
            }
        }
    }

    #[test]
    fn bad_input_is_named() {
        let err = |t: InvokeTarget| t.resolve().unwrap_err();
        assert_eq!(err(InvokeTarget::arn("")), ConfigError::EmptyRuntimeArn);
        assert_eq!(err(InvokeTarget::arn("  ")), ConfigError::EmptyRuntimeArn);
        assert_eq!(
            err(InvokeTarget::runtime_id("x", "1234567890123").region("us-east-1")),
            ConfigError::InvalidAccountId("1234567890123".into())
        );
        assert_eq!(
            err(InvokeTarget::runtime_id("x", "12345678901a").region("us-east-1")),
            ConfigError::InvalidAccountId("12345678901a".into())
        );
        assert_eq!(
            err(InvokeTarget::runtime_id("x", "123456789012")),
            ConfigError::MissingRegion
        );
        assert_eq!(
            err(InvokeTarget::arn(ARN).region("")),
            ConfigError::MissingRegion
        );
        assert_eq!(
            err(InvokeTarget::arn(ARN).region("US East")),
            ConfigError::InvalidRegion("US East".into())
        );
        assert_eq!(
            err(InvokeTarget::arn(ARN).qualifier("")),
            ConfigError::EmptyQualifier
        );
        assert_eq!(
            err(InvokeTarget::arn(ARN).endpoint("https://x").fips(true)),
            ConfigError::EndpointWithVariant
        );
        for (endpoint, reason) in [
            ("not a url", "not a URL"),
            ("localhost:8080", "no scheme (http:// or https://)"),
            ("ftp://example.com", "the scheme must be http or https"),
            (
                "https://user:pw@example.com",
                "credentials in the URL are not allowed",
            ),
            ("https://example.com/?a=b", "a query is not allowed"),
            ("/just/a/path", "no scheme (http:// or https://)"),
        ] {
            assert_eq!(
                err(InvokeTarget::arn(ARN).endpoint(endpoint)),
                ConfigError::InvalidEndpoint {
                    endpoint: crate::uri::shown_text(endpoint),
                    reason: reason.into()
                },
                "{endpoint}"
            );
            let shown = format!(
                "{} {:?}",
                err(InvokeTarget::arn(ARN).endpoint(endpoint)),
                InvokeTarget::arn(ARN).endpoint(endpoint)
            );
            assert!(
                !shown.contains("user:pw") && !shown.contains("a=b"),
                "{shown}"
            );
        }
        assert_eq!(
            err(InvokeTarget::arn("")).to_string(),
            "the runtime ARN is empty"
        );
    }
}
