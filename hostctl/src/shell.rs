//! Commands as a shell would read them: for rows, logs and errors.

use std::process::Command;

/// Single-quotes a word for sh.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// A command as a shell would take it (program and arguments, each quoted), for rows and
/// errors.
pub fn command_line(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|s| shell_quote(&s.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}
