//! A POSIX-shell lexer, written for safety analysis rather than execution: it removes quotes
//! the way the shell would (so `r''m`, `"rm"` and `\rm` all read `rm`), keeps parameter
//! expansions visible (`$HOME` stays `$HOME` and marks the word dynamic), and hands back the
//! source of every command substitution (`$(…)`, backticks, `<(…)`, `>(…)`, and those inside
//! unquoted here-documents) so the classifier can look inside them too.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Word {
    /// The word after quote removal; expansions are kept as written.
    pub text: String,
    /// Contains a parameter expansion, command substitution or arithmetic: its value is
    /// only known at run time.
    pub dynamic: bool,
    /// Sources of command substitutions inside the word, to be parsed in turn.
    pub substitutions: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Token {
    Word(Word),
    /// `;` `&` `&&` `||` `|` `|&` `(` `)` or a newline (`\n`).
    Op(&'static str),
    /// A redirection operator with its optional fd (`2>`, `>>`, `&>`, `<<<`, …).
    Redirect(String),
    /// A here-document's body, with the substitutions found in it (none when the delimiter
    /// was quoted, since the shell then does not expand it).
    HereDoc(Vec<String>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexError(pub String);

impl fmt::Display for LexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

struct Lexer {
    chars: Vec<char>,
    at: usize,
    tokens: Vec<Token>,
    /// Here-documents whose bodies start after the current line: (delimiter, strip tabs,
    /// expand).
    pending_heredocs: Vec<(String, bool, bool)>,
}

pub fn lex(source: &str) -> Result<Vec<Token>, LexError> {
    let mut lexer = Lexer {
        chars: source.chars().collect(),
        at: 0,
        tokens: Vec::new(),
        pending_heredocs: Vec::new(),
    };
    lexer.run()?;
    Ok(lexer.tokens)
}

impl Lexer {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn run(&mut self) -> Result<(), LexError> {
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' | '\r' => self.at += 1,
                '\\' if self.peek(1) == Some('\n') => self.at += 2,
                '\n' => {
                    self.at += 1;
                    self.tokens.push(Token::Op("\n"));
                    self.read_heredoc_bodies()?;
                }
                '#' => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.at += 1;
                    }
                }
                ';' => {
                    if self.peek(1) == Some(';') {
                        return Err(LexError("`;;` (case arms) is not supported".into()));
                    }
                    self.op(";", 1);
                }
                '&' if self.peek(1) == Some('&') => self.op("&&", 2),
                '&' if self.peek(1) == Some('>') => self.redirect(),
                '&' => self.op("&", 1),
                '|' if self.peek(1) == Some('|') => self.op("||", 2),
                '|' if self.peek(1) == Some('&') => self.op("|&", 2),
                '|' => self.op("|", 1),
                '(' => self.op("(", 1),
                ')' => self.op(")", 1),
                '<' | '>' if !matches!(self.peek(1), Some('(')) => self.redirect(),
                _ => {
                    if c.is_ascii_digit() && self.fd_redirect_ahead() {
                        self.redirect();
                    } else {
                        let word = self.word()?;
                        self.tokens.push(Token::Word(word));
                    }
                }
            }
        }
        if !self.pending_heredocs.is_empty() {
            // A here-document on the last line with no body: the shell would wait for input.
            return Err(LexError("here-document without a body".into()));
        }
        Ok(())
    }

    fn op(&mut self, op: &'static str, len: usize) {
        self.at += len;
        self.tokens.push(Token::Op(op));
    }

    /// Digits immediately followed by `<` or `>`: a redirection's file descriptor.
    fn fd_redirect_ahead(&self) -> bool {
        let mut i = self.at;
        while self.chars.get(i).is_some_and(char::is_ascii_digit) {
            i += 1;
        }
        matches!(self.chars.get(i), Some('<' | '>')) && !matches!(self.chars.get(i + 1), Some('('))
    }

    fn redirect(&mut self) {
        let mut op = String::new();
        while let Some(c) = self.peek(0).filter(char::is_ascii_digit) {
            op.push(c);
            self.at += 1;
        }
        let rest: String = self.chars[self.at..].iter().take(3).collect();
        let symbol = [
            "<<<", "<<-", "&>>", ">>", "<<", "<&", ">&", "&>", ">|", "<>", ">", "<",
        ]
        .into_iter()
        .find(|s| rest.starts_with(s))
        .unwrap_or(">");
        self.at += symbol.chars().count();
        op.push_str(symbol);
        if symbol == "<<" || symbol == "<<-" {
            self.heredoc_delimiter(symbol == "<<-");
        }
        self.tokens.push(Token::Redirect(op));
    }

    /// Reads the delimiter word after `<<`; the body is read at the next newline.
    fn heredoc_delimiter(&mut self, strip_tabs: bool) {
        while matches!(self.peek(0), Some(' ' | '\t')) {
            self.at += 1;
        }
        let mut delimiter = String::new();
        let mut quoted = false;
        while let Some(c) = self.peek(0) {
            if c.is_whitespace() || ";&|<>()".contains(c) {
                break;
            }
            if c == '\'' || c == '"' || c == '\\' {
                quoted = true;
            } else {
                delimiter.push(c);
            }
            self.at += 1;
        }
        self.pending_heredocs.push((delimiter, strip_tabs, !quoted));
    }

    fn read_heredoc_bodies(&mut self) -> Result<(), LexError> {
        for (delimiter, strip_tabs, expand) in std::mem::take(&mut self.pending_heredocs) {
            let mut body = String::new();
            loop {
                if self.at >= self.chars.len() {
                    return Err(LexError(format!(
                        "here-document not ended by `{delimiter}`"
                    )));
                }
                let mut line = String::new();
                while let Some(c) = self.peek(0) {
                    self.at += 1;
                    if c == '\n' {
                        break;
                    }
                    line.push(c);
                }
                let candidate = if strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    &line
                };
                if candidate == delimiter {
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            let substitutions = if expand {
                let mut inner = Lexer {
                    chars: body.chars().collect(),
                    at: 0,
                    tokens: Vec::new(),
                    pending_heredocs: Vec::new(),
                };
                let mut word = Word::default();
                while inner.at < inner.chars.len() {
                    inner.double_quoted_char(&mut word)?;
                }
                word.substitutions
            } else {
                Vec::new()
            };
            self.tokens.push(Token::HereDoc(substitutions));
        }
        Ok(())
    }

    fn word(&mut self) -> Result<Word, LexError> {
        let mut word = Word::default();
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' | '\r' | '\n' | ';' | '&' | '|' | '(' | ')' => break,
                '<' | '>' if self.peek(1) != Some('(') => break,
                '<' | '>' => {
                    // Process substitution: runs a command.
                    self.at += 1;
                    let inner = self.balanced_parens()?;
                    word.text.push_str("/dev/fd/N");
                    word.dynamic = true;
                    word.substitutions.push(inner);
                }
                '\\' => {
                    self.at += 1;
                    match self.peek(0) {
                        Some('\n') => self.at += 1,
                        Some(escaped) => {
                            word.text.push(escaped);
                            self.at += 1;
                        }
                        None => {}
                    }
                }
                '\'' => {
                    self.at += 1;
                    loop {
                        match self.peek(0) {
                            Some('\'') => {
                                self.at += 1;
                                break;
                            }
                            Some(c) => {
                                word.text.push(c);
                                self.at += 1;
                            }
                            None => return Err(LexError("unterminated single quote".into())),
                        }
                    }
                }
                '"' => {
                    self.at += 1;
                    loop {
                        match self.peek(0) {
                            Some('"') => {
                                self.at += 1;
                                break;
                            }
                            Some(_) => self.double_quoted_char(&mut word)?,
                            None => return Err(LexError("unterminated double quote".into())),
                        }
                    }
                }
                '$' if self.peek(1) == Some('\'') => {
                    // ANSI-C quoting: `$'…'` with backslash escapes.
                    self.at += 2;
                    loop {
                        match self.peek(0) {
                            Some('\'') => {
                                self.at += 1;
                                break;
                            }
                            Some('\\') => {
                                self.at += 1;
                                let escaped = self
                                    .peek(0)
                                    .ok_or_else(|| LexError("unterminated $'…'".into()))?;
                                word.text.push(match escaped {
                                    'n' => '\n',
                                    't' => '\t',
                                    other => other,
                                });
                                // Octal and hex escapes can spell any name: treat as unknown.
                                if matches!(escaped, 'x' | '0'..='7' | 'u' | 'U') {
                                    word.dynamic = true;
                                }
                                self.at += 1;
                            }
                            Some(c) => {
                                word.text.push(c);
                                self.at += 1;
                            }
                            None => return Err(LexError("unterminated $'…'".into())),
                        }
                    }
                }
                '$' | '`' => self.expansion(&mut word)?,
                _ => {
                    word.text.push(c);
                    self.at += 1;
                }
            }
        }
        Ok(word)
    }

    /// One character (or escape, or expansion) inside double quotes or a here-document.
    fn double_quoted_char(&mut self, word: &mut Word) -> Result<(), LexError> {
        match self.peek(0) {
            Some('\\') => {
                self.at += 1;
                match self.peek(0) {
                    Some(c @ ('$' | '`' | '"' | '\\')) => {
                        word.text.push(c);
                        self.at += 1;
                    }
                    Some('\n') => self.at += 1,
                    Some(c) => {
                        word.text.push('\\');
                        word.text.push(c);
                        self.at += 1;
                    }
                    None => word.text.push('\\'),
                }
            }
            Some('$' | '`') => self.expansion(word)?,
            Some(c) => {
                word.text.push(c);
                self.at += 1;
            }
            None => {}
        }
        Ok(())
    }

    /// `$NAME`, `${…}`, `$(…)`, `$((…))` or a backtick substitution.
    fn expansion(&mut self, word: &mut Word) -> Result<(), LexError> {
        if self.peek(0) == Some('`') {
            self.at += 1;
            let mut inner = String::new();
            loop {
                match self.peek(0) {
                    Some('`') => {
                        self.at += 1;
                        break;
                    }
                    Some('\\') if matches!(self.peek(1), Some('`' | '\\' | '$')) => {
                        inner.push(self.chars[self.at + 1]);
                        self.at += 2;
                    }
                    Some(c) => {
                        inner.push(c);
                        self.at += 1;
                    }
                    None => return Err(LexError("unterminated backtick".into())),
                }
            }
            word.text.push_str("$(…)");
            word.dynamic = true;
            word.substitutions.push(inner);
            return Ok(());
        }
        // At a `$`.
        match self.peek(1) {
            Some('(') if self.peek(2) == Some('(') => {
                self.at += 1;
                let inner = self.balanced_parens()?;
                word.text.push_str(&format!("$({inner})"));
                word.dynamic = true;
                // Arithmetic can hold substitutions of its own: `$(( $(cmd) ))`.
                if inner.contains("$(") || inner.contains('`') {
                    word.substitutions
                        .push(inner.trim_matches(|c| c == '(' || c == ')').to_owned());
                }
            }
            Some('(') => {
                self.at += 1;
                let inner = self.balanced_parens()?;
                word.text.push_str("$(…)");
                word.dynamic = true;
                word.substitutions.push(inner);
            }
            Some('{') => {
                let start = self.at;
                while self.peek(0).is_some_and(|c| c != '}') {
                    self.at += 1;
                }
                if self.peek(0).is_none() {
                    return Err(LexError("unterminated ${…}".into()));
                }
                self.at += 1;
                let text: String = self.chars[start..self.at].iter().collect();
                if text.contains("$(") || text.contains('`') {
                    return Err(LexError("substitution inside ${…}".into()));
                }
                word.text.push_str(&text);
                word.dynamic = true;
            }
            Some(c) if c.is_ascii_alphanumeric() || "_@*#?$!-".contains(c) => {
                let start = self.at;
                self.at += 1;
                if c.is_ascii_alphabetic() || c == '_' {
                    while self
                        .peek(0)
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        self.at += 1;
                    }
                } else {
                    self.at += 1;
                }
                let text: String = self.chars[start..self.at].iter().collect();
                word.text.push_str(&text);
                word.dynamic = true;
            }
            _ => {
                word.text.push('$');
                self.at += 1;
            }
        }
        Ok(())
    }

    /// At a `(`: returns the text up to the matching `)`, skipping quoted parts.
    fn balanced_parens(&mut self) -> Result<String, LexError> {
        debug_assert_eq!(self.peek(0), Some('('));
        self.at += 1;
        let start = self.at;
        let mut depth = 1;
        while let Some(c) = self.peek(0) {
            match c {
                '\\' => self.at += 1,
                '\'' => {
                    self.at += 1;
                    while self.peek(0).is_some_and(|c| c != '\'') {
                        self.at += 1;
                    }
                }
                '"' => {
                    self.at += 1;
                    while let Some(c) = self.peek(0) {
                        if c == '\\' {
                            self.at += 1;
                        } else if c == '"' {
                            break;
                        }
                        self.at += 1;
                    }
                }
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        let inner: String = self.chars[start..self.at].iter().collect();
                        self.at += 1;
                        return Ok(inner);
                    }
                }
                _ => {}
            }
            self.at += 1;
        }
        Err(LexError("unbalanced parentheses".into()))
    }
}
