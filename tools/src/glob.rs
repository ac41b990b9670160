//! Glob patterns over `/`-separated relative paths, matched in linear time: the patterns
//! compile once into one automaton (`globset`), so a pathological pattern such as
//! `*a*a*a*a*b` cannot make a match backtrack. `**` is any number of directories, `*` and
//! `?` stay within one name, `{a,b}` and `[abc]` work as in a shell.

/// A set of patterns; a path matches when any of them does.
#[derive(Clone, Debug)]
pub struct Globs(globset::GlobSet);

impl Globs {
    /// Compiles `patterns`; the error names the pattern that is not a glob.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, String> {
        let mut set = globset::GlobSetBuilder::new();
        for pattern in patterns {
            let pattern = pattern.as_ref();
            let glob = globset::GlobBuilder::new(pattern)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| format!("`{pattern}` is not a glob: {}", e.kind()))?;
            set.add(glob);
        }
        set.build()
            .map(Self)
            .map_err(|e| format!("the globs do not compile: {e}"))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, path: &str) -> bool {
        self.0.is_match(path)
    }
}

#[cfg(test)]
mod tests {
    use super::Globs;

    #[test]
    fn glob_table() {
        let table = [
            ("*.rs", "main.rs", true),
            ("*.rs", "src/main.rs", false),
            ("**/*.rs", "src/main.rs", true),
            ("**/*.rs", "main.rs", true),
            ("src/**", "src/a/b/c.txt", true),
            ("src/*/c.txt", "src/a/c.txt", true),
            ("src/*/c.txt", "src/a/b/c.txt", false),
            ("?.md", "a.md", true),
            ("?.md", "ab.md", false),
            ("docs/**/index.html", "docs/index.html", true),
            ("*.{md,txt}", "notes.txt", true),
            ("[ab].md", "c.md", false),
        ];
        for (pattern, path, expected) in table {
            let globs = Globs::new(&[pattern]).unwrap();
            assert_eq!(globs.matches(path), expected, "{pattern} vs {path}");
        }
    }

    #[test]
    fn a_broken_pattern_is_named() {
        let err = Globs::new(&["ok/*", "[unclosed"]).unwrap_err();
        assert!(err.contains("`[unclosed`"), "{err}");
    }

    /// The pattern that makes a backtracking matcher take exponential time: here one pass
    /// over the path. (A count of steps, not a timing: the automaton cannot backtrack.)
    #[test]
    fn a_pathological_pattern_matches_like_any_other() {
        let pattern = "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
        let globs = Globs::new(&[pattern]).unwrap();
        let path = "a".repeat(5000);
        assert!(!globs.matches(&path));
        assert!(globs.matches(&format!("{path}b")));
    }
}
