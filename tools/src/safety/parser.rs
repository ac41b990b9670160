//! From tokens to the simple commands a script would run, flattened: control flow (`if`,
//! `for`, `while`, `&&`, subshells, brace groups) is walked through, not evaluated — for
//! safety every command that could run counts. Pipelines are kept (a download piped into a
//! shell is only visible as a pipeline), and so are function definitions (fork bombs).

use super::lexer::{LexError, Token, Word, lex};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimpleCommand {
    /// `NAME=value` words before the command name.
    pub assignments: Vec<Word>,
    pub argv: Vec<Word>,
    /// (operator, target); here-documents have an empty target.
    pub redirects: Vec<(String, Word)>,
    /// Commands of one pipeline share this number.
    pub pipeline: usize,
    /// Position within the pipeline (0 = first).
    pub position: usize,
    /// The function whose body this command is in, if any.
    pub in_function: Option<String>,
    /// Ended by `&`: runs in the background.
    pub background: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Script {
    pub commands: Vec<SimpleCommand>,
    /// Command substitutions anywhere in the script, still to be analysed.
    pub substitutions: Vec<String>,
}

const SKIPPED_KEYWORDS: [&str; 12] = [
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}",
];

pub fn parse(source: &str) -> Result<Script, LexError> {
    let mut tokens = lex(source)?.into_iter().peekable();
    let mut walk = Walk::default();
    while let Some(token) = tokens.next() {
        match token {
            Token::Word(word) => walk.word(word, &mut tokens)?,
            Token::Redirect(op) => {
                let target = if op.ends_with("<<") || op.ends_with("<<-") {
                    Word::default()
                } else {
                    match tokens.next() {
                        Some(Token::Word(word)) => {
                            walk.script
                                .substitutions
                                .extend(word.substitutions.iter().cloned());
                            word
                        }
                        _ => return Err(LexError(format!("`{op}` needs a target"))),
                    }
                };
                walk.current.redirects.push((op, target));
            }
            Token::HereDoc(substitutions) => walk.script.substitutions.extend(substitutions),
            Token::Op(op) => {
                walk.current.background = op == "&";
                walk.finish();
                walk.current.background = false;
                match op {
                    "|" | "|&" => walk.position += 1,
                    "(" | ")" => {}
                    _ => {
                        walk.pipeline += 1;
                        walk.position = 0;
                    }
                }
            }
        }
    }
    walk.finish();
    Ok(walk.script)
}

type Tokens = std::iter::Peekable<std::vec::IntoIter<Token>>;

/// Where [`parse`] is in the token stream: the script so far and the command being read.
#[derive(Default)]
struct Walk {
    script: Script,
    current: SimpleCommand,
    pipeline: usize,
    position: usize,
    /// (function name, brace depth at which its body closes)
    functions: Vec<(String, usize)>,
    depth: usize,
}

impl Walk {
    /// Ends the command being read, if it has anything.
    fn finish(&mut self) {
        let current = &mut self.current;
        if !current.argv.is_empty()
            || !current.redirects.is_empty()
            || !current.assignments.is_empty()
        {
            let mut done = std::mem::take(current);
            done.pipeline = self.pipeline;
            done.position = self.position;
            done.in_function = self.functions.last().map(|(name, _)| name.clone());
            self.script.commands.push(done);
        }
    }

    /// A word: a keyword or brace at a command's start, a function definition, an
    /// assignment, or an argument.
    fn word(&mut self, word: Word, tokens: &mut Tokens) -> Result<(), LexError> {
        self.script
            .substitutions
            .extend(word.substitutions.iter().cloned());
        let at_start = self.current.argv.is_empty();
        if at_start
            && self.current.assignments.is_empty()
            && !word.dynamic
            && self.structure(&word, tokens)?
        {
            return Ok(());
        }
        if at_start && is_assignment(&word) {
            self.current.assignments.push(word);
        } else {
            self.current.argv.push(word);
        }
        Ok(())
    }

    /// Handles a word at a command's start that is structure, not a command; whether it was.
    fn structure(&mut self, word: &Word, tokens: &mut Tokens) -> Result<bool, LexError> {
        match word.text.as_str() {
            "{" => self.depth += 1,
            "}" => {
                if self.functions.last().is_some_and(|(_, d)| *d == self.depth) {
                    self.functions.pop();
                }
                self.depth = self.depth.saturating_sub(1);
            }
            text if SKIPPED_KEYWORDS.contains(&text) => {}
            "case" => return Err(LexError("`case` is not supported".into())),
            "for" | "select" => {
                // `for NAME [in WORDS…]` up to the separator; the words may hold
                // substitutions.
                while let Some(Token::Word(w)) = tokens.peek() {
                    self.script
                        .substitutions
                        .extend(w.substitutions.iter().cloned());
                    tokens.next();
                }
            }
            // `name() { …; }` — a function definition.
            _ if tokens.peek() == Some(&Token::Op("(")) => {
                tokens.next();
                if tokens.next() != Some(Token::Op(")")) {
                    return Err(LexError(format!("unexpected `(` after `{}`", word.text)));
                }
                while tokens.peek() == Some(&Token::Op("\n")) {
                    tokens.next();
                }
                self.functions.push((word.text.clone(), self.depth + 1));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

fn is_assignment(word: &Word) -> bool {
    match word.text.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argvs(source: &str) -> Vec<Vec<String>> {
        parse(source)
            .unwrap()
            .commands
            .into_iter()
            .map(|c| c.argv.into_iter().map(|w| w.text).collect())
            .collect()
    }

    #[test]
    fn quoting_is_removed_as_the_shell_would() {
        assert_eq!(argvs(r#"r''m -"rf" \/"#), [["rm", "-rf", "/"]]);
        assert_eq!(argvs("'/bin/rm' $'-rf' x"), [["/bin/rm", "-rf", "x"]]);
        assert_eq!(argvs("echo \"a b\" 'c d'"), [["echo", "a b", "c d"]]);
    }

    #[test]
    fn separators_and_structure_are_walked_through() {
        let got = argvs(
            "a; b && c || d | e & f\ng\nif h; then i; fi; for x in 1 2; do j $x; done; (k); { l; }",
        );
        let names: Vec<&str> = got.iter().map(|a| a[0].as_str()).collect();
        assert_eq!(
            names,
            ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"]
        );
    }

    #[test]
    fn substitutions_and_heredocs_are_collected() {
        let script = parse("echo $(rm -rf /) `id` <(curl x)\ncat <<EOF\n$(whoami)\nEOF\ncat <<'EOF'\n$(not run)\nEOF\n").unwrap();
        assert_eq!(script.substitutions, ["rm -rf /", "id", "curl x", "whoami"]);
    }

    #[test]
    fn pipelines_and_functions_are_kept() {
        let script = parse(":(){ :|:& };:").unwrap();
        let inside: Vec<_> = script
            .commands
            .iter()
            .filter(|c| c.in_function.as_deref() == Some(":"))
            .collect();
        assert_eq!(inside.len(), 2);
        assert_eq!(inside[0].pipeline, inside[1].pipeline);
        assert_eq!(inside[1].position, 1);
    }

    #[test]
    fn malformed_input_is_an_error() {
        for bad in [
            "echo 'x",
            "echo \"x",
            "echo $(x",
            "echo `x",
            "cat <<EOF\nno end",
            "echo >",
            "case x in a) y;; esac",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
