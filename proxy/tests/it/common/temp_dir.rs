//! A scratch directory of a test's own, with a token command that counts its runs. The
//! proxy's unit tests (`tokens.rs`) take it from here too.

use std::path::PathBuf;

/// A directory of its own under the temp dir, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "agentcore-mcp-proxy-test-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// A token command: a script that counts its runs in the file `runs` and prints
    /// `tokens[run - 1]` (the last one for every later run).
    pub fn token_command(&self, tokens: &[&str]) -> String {
        let script = self.0.join("token.sh");
        let runs = self.0.join("runs");
        let mut text = format!(
            "n=$(cat '{runs}' 2>/dev/null || echo 0)\nn=$((n + 1))\necho $n > '{runs}'\ncase $n in\n",
            runs = runs.display()
        );
        for (i, token) in tokens.iter().enumerate() {
            let pattern = if i + 1 == tokens.len() {
                "*".to_owned()
            } else {
                (i + 1).to_string()
            };
            text.push_str(&format!("  {pattern}) echo '{token}' ;;\n"));
        }
        text.push_str("esac\n");
        std::fs::write(&script, text).unwrap();
        format!("sh '{}'", script.display())
    }

    /// Writes `text` to the file `name` in it: its path.
    pub fn write(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    }

    pub fn runs(&self) -> u32 {
        std::fs::read_to_string(self.0.join("runs"))
            .map(|s| s.trim().parse().unwrap())
            .unwrap_or(0)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
