//! `shoal send` argument lists as options: what an arm changes from the base.

/// Arguments split into leading positionals and `--name [value]` options, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Args {
    pub positionals: Vec<String>,
    pub options: Vec<(String, Option<String>)>,
}

impl Args {
    /// Reads `--name value`, `--name=value` and bare `--name`; a token that follows an option
    /// and does not start with `--` is its value; other tokens are positionals (rendered
    /// first).
    pub fn parse(tokens: &[String]) -> Args {
        let mut args = Args::default();
        let mut i = 0;
        while i < tokens.len() {
            let t = &tokens[i];
            if let Some(body) = t.strip_prefix("--") {
                if let Some((name, value)) = body.split_once('=') {
                    args.options
                        .push((name.to_string(), Some(value.to_string())));
                } else if tokens.get(i + 1).is_some_and(|v| !v.starts_with("--")) {
                    args.options
                        .push((body.to_string(), Some(tokens[i + 1].clone())));
                    i += 1;
                } else {
                    args.options.push((body.to_string(), None));
                }
            } else {
                args.positionals.push(t.clone());
            }
            i += 1;
        }
        args
    }

    fn get(&self, name: &str) -> Option<&Option<String>> {
        self.options.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// The options of `self` that `base` does not have with the same value.
    pub fn changes_from(&self, base: &Args) -> Args {
        Args {
            positionals: Vec::new(),
            options: self
                .options
                .iter()
                .filter(|(n, v)| base.get(n) != Some(v))
                .cloned()
                .collect(),
        }
    }

    /// Whether it names this option.
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Back to one string, shell words separated by spaces (quoted where a shell needs it).
    pub fn render(&self) -> String {
        let mut out: Vec<String> = self.positionals.iter().map(|p| quote(p)).collect();
        for (name, value) in &self.options {
            match value {
                Some(v) => {
                    out.push(format!("--{name}"));
                    out.push(quote(v));
                }
                None => out.push(format!("--{name}")),
            }
        }
        out.join(" ")
    }
}

/// A word as a POSIX shell reads it back: as is when it is plain, else in single quotes.
fn quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn an_arms_change_from_the_base() {
        let base = Args::parse(&toks("198.18.0.2:7474 --src /d --cc cubic --connections 1"));
        let arm = Args::parse(&toks("198.18.0.2:7474 --src /d --cc=bbr --connections 1"));
        assert_eq!(arm.changes_from(&base).render(), "--cc bbr");
        assert_eq!(
            arm.render(),
            "198.18.0.2:7474 --src /d --cc bbr --connections 1"
        );
    }

    #[test]
    fn words_a_shell_would_split_are_quoted() {
        let a = Args::parse(&["host:1".into(), "--src".into(), "/my data/it's".into()]);
        assert_eq!(a.render(), r"host:1 --src '/my data/it'\''s'");
    }
}
