//! The rules options keep with each other, checked once clap has read them: one door, one
//! token source, the options that go with one door only, and the `--header` rules of the door.

use super::headers::{self, Headers};
use super::options::Options;
use super::{Args, Door, TokenSource};

impl Options {
    /// The settings, once the options are known to go together.
    pub(super) fn check(mut self) -> Result<Args, String> {
        // A name given twice is said first, as a value that cannot be read.
        let headers = Headers::of(std::mem::take(&mut self.headers))?;
        let door = self.door()?;
        let tokens = self.tokens()?;
        self.fits(&door)?;
        self.signs_or_sends(&door, tokens.as_ref())?;
        match &door {
            Door::Runtime(_) => headers::check_runtime(&headers)?,
            Door::Gateway(_) => headers::check_gateway(&headers)?,
            Door::Url(_) => headers::check_endpoint("--url", &headers)?,
        }
        if self.listen_token_file.is_some() && self.listen.is_none() {
            return Err("--listen-token-file needs --listen".into());
        }
        if let Some(tool) = self
            .strict_tools
            .iter()
            .find(|tool| self.idempotent_tools.contains(tool))
        {
            return Err(format!(
                "{tool} is given to both --idempotent-tool and --strict-tool: a tool is one or \
                 the other"
            ));
        }
        Ok(Args {
            door,
            region: self.region,
            qualifier: self.qualifier,
            endpoint: self.endpoint,
            signing_name: self.signing_name,
            tokens,
            idempotent_tools: self.idempotent_tools,
            strict_tools: self.strict_tools,
            trust_tool_annotations: self.trust_tool_annotations,
            allow_tools: self.allow_tools,
            deny_tools: self.deny_tools,
            read_only: self.read_only,
            timeout: self.timeout,
            idle_timeout: self.idle_timeout,
            tasks: !self.no_tasks,
            max_task_duration: self.max_task_duration,
            bridge_modern_clients: self.bridge_modern_clients,
            runtime_user_id: self.runtime_user_id,
            runtime_idle_timeout: self.runtime_idle_timeout,
            runtime_max_lifetime: self.runtime_max_lifetime,
            profile: self.profile,
            stop_session_on_exit: self.stop_session_on_exit,
            listen: self.listen,
            listen_token_file: self.listen_token_file,
            headers,
        })
    }

    /// The one door given.
    fn door(&self) -> Result<Door, String> {
        let mut doors = Vec::new();
        if let Some(arn) = &self.runtime_arn {
            doors.push(Door::Runtime(arn.clone()));
        }
        if let Some(url) = &self.gateway_url {
            doors.push(Door::Gateway(url.clone()));
        }
        if let Some(url) = &self.url {
            doors.push(Door::Url(url.clone()));
        }
        if doors.len() > 1 {
            return Err(format!(
                "{} and {} exclude each other: give one of them",
                doors[0].flag(),
                doors[1].flag()
            ));
        }
        doors
            .pop()
            .ok_or_else(|| "one of --runtime-arn, --gateway-url or --url is required".into())
    }

    /// The one token source given, if any.
    fn tokens(&self) -> Result<Option<TokenSource>, String> {
        Ok(match (&self.bearer_token_env, &self.bearer_token_command) {
            (Some(_), Some(_)) => {
                return Err(
                    "--bearer-token-env and --bearer-token-command exclude each \
                                other: give one of them"
                        .into(),
                );
            }
            (Some(name), None) => Some(TokenSource::Env(name.clone())),
            (None, Some(command)) => Some(TokenSource::Command(command.clone())),
            (None, None) => None,
        })
    }

    /// Refuses the runtime's own options for another door.
    fn fits(&self, door: &Door) -> Result<(), String> {
        if matches!(door, Door::Runtime(_)) {
            return Ok(());
        }
        let runtime_only = [
            ("--qualifier", self.qualifier.is_some()),
            ("--endpoint", self.endpoint.is_some()),
            ("--stop-session-on-exit", self.stop_session_on_exit),
            ("--runtime-user-id", self.runtime_user_id.is_some()),
            (
                "--runtime-idle-timeout",
                self.runtime_idle_timeout.is_some(),
            ),
            (
                "--runtime-max-lifetime",
                self.runtime_max_lifetime.is_some(),
            ),
        ];
        match runtime_only.iter().find(|(_, given)| *given) {
            Some((flag, _)) => Err(format!(
                "{flag} applies to --runtime-arn only, not to {}",
                door.flag()
            )),
            None => Ok(()),
        }
    }

    /// SigV4 (with `--signing-name` for `--url`, with `--profile` if given) or a bearer
    /// token: one of them, as the door takes it.
    fn signs_or_sends(&self, door: &Door, tokens: Option<&TokenSource>) -> Result<(), String> {
        if self.signing_name.is_some() {
            if !matches!(door, Door::Url(_)) {
                return Err(format!(
                    "--signing-name applies to --url only: {} signs for bedrock-agentcore",
                    door.flag()
                ));
            }
            if let Some(tokens) = tokens {
                return Err(format!(
                    "--signing-name is for SigV4, and {} sends a bearer token instead: give one \
                     of them",
                    tokens.flag()
                ));
            }
        }
        if matches!(door, Door::Url(_)) && self.signing_name.is_none() && tokens.is_none() {
            return Err(
                "--url needs --signing-name NAME (SigV4: e.g. execute-api for API Gateway, lambda \
                 for a Lambda function URL) or a bearer token (--bearer-token-env or \
                 --bearer-token-command)"
                    .into(),
            );
        }
        if let (Some(_), Some(tokens)) = (&self.profile, tokens) {
            return Err(format!(
                "--profile is for SigV4 (the AWS credentials of that profile), and {} sends a \
                 bearer token instead: give one of them",
                tokens.flag()
            ));
        }
        Ok(())
    }
}
