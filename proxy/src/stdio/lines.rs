//! The client's side of stdio: standard input taken for the proxy alone and read line by line,
//! standard output written a whole line at a time.

use std::io::{BufRead, Write};

use serde_json::Value;
use tokio::sync::mpsc;
use tracing::error;

/// Where the MCP client's messages are read from: the proxy's standard input, taken for the
/// proxy alone by [`take_stdin`].
pub type MessagesIn = Box<dyn std::io::Read + Send>;

/// Takes the standard input for the proxy: on Unix, a duplicate of fd 0 to read the client's
/// messages from, and `/dev/null` put at fd 0. Why: every process the proxy starts inherits fd 0
/// unless told otherwise, and aws-config runs a profile's `credential_process` with tokio's
/// `Command::output()`, which (unlike std's) leaves stdin inherited — a process that reads its
/// stdin would take the client's messages. With `/dev/null` at fd 0, it and any other child
/// (an SSO or assume-role helper) read nothing. Called before anything can start a process.
pub fn take_stdin() -> std::io::Result<MessagesIn> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let messages = std::io::stdin().as_fd().try_clone_to_owned()?;
        let null = std::fs::File::open("/dev/null")?;
        rustix::stdio::dup2_stdin(&null)?;
        Ok(Box::new(std::fs::File::from(messages)))
    }
    #[cfg(not(unix))]
    {
        Ok(Box::new(std::io::stdin()))
    }
}

pub(super) fn read_stdin(input: MessagesIn, lines: mpsc::Sender<std::io::Result<Vec<u8>>>) {
    let mut stdin = std::io::BufReader::new(input);
    loop {
        let mut line = Vec::new();
        match stdin.read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) => {
                if lines.blocking_send(Ok(line)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = lines.blocking_send(Err(e));
                return;
            }
        }
    }
}

/// Writes each line (already ending in `\n`) whole, flushing when nothing more is queued.
pub(super) fn write_stdout(mut lines: mpsc::UnboundedReceiver<Vec<u8>>) {
    let stdout = std::io::stdout();
    let mut stdout = std::io::BufWriter::new(stdout.lock());
    while let Some(line) = lines.blocking_recv() {
        let mut result = stdout.write_all(&line);
        while let (Ok(()), Ok(more)) = (&result, lines.try_recv()) {
            result = stdout.write_all(&more);
        }
        if let Err(e) = result.and_then(|()| stdout.flush()) {
            error!("cannot write stdout: {e}");
            return;
        }
    }
}

/// A JSON value as one stdout line.
pub(super) fn line_of(message: &Value) -> Vec<u8> {
    let mut line = message.to_string().into_bytes();
    line.push(b'\n');
    line
}
