//! Reading the small programs ordinary tools take on the command line — `awk '…'` and
//! `sed '…'` — for what would make them act beyond reading: running a command, writing a
//! file. Strings and regular expressions are skipped, so `awk '/a|b/'` and
//! `awk '{print "system"}'` read as the harmless programs they are.

/// Why `name OPTIONS PROGRAM FILES…` (an awk) does more than read; `None` when it reads.
pub fn awk(name: &str, texts: &[&str]) -> Option<String> {
    let mut program = None;
    let mut at = 0;
    while let Some(text) = texts.get(at) {
        match *text {
            "-f" | "--file" | "-E" | "--exec" | "-i" | "--include" | "-l" | "--load" => {
                return Some(format!(
                    "`{name} {text}` runs a program that is not in the command"
                ));
            }
            "-F" | "-v" | "--assign" | "--field-separator" => at += 2,
            "--" => {
                program = texts.get(at + 1).copied();
                break;
            }
            t if t.starts_with("-f") || t.starts_with("-i") || t.starts_with("-E") => {
                return Some(format!(
                    "`{name} {t}` runs a program that is not in the command"
                ));
            }
            t if t.starts_with('-') && t.len() > 1 => at += 1,
            t => {
                program = Some(t);
                break;
            }
        }
    }
    let program = program?;
    awk_program(program).map(|what| format!("the {name} program {what}"))
}

/// What an awk program does beyond reading, if anything.
fn awk_program(program: &str) -> Option<&'static str> {
    let chars: Vec<char> = program.chars().collect();
    let mut i = 0;
    let mut in_print = false;
    let mut depth = 0usize;
    // Whether a `/` here starts a regular expression (no operand before it).
    let mut regex_may_start = true;
    while let Some(&c) = chars.get(i) {
        match c {
            '"' => {
                i = skip_quoted(&chars, i, '"');
                regex_may_start = false;
                continue;
            }
            '/' if regex_may_start => {
                i = skip_quoted(&chars, i, '/');
                regex_may_start = false;
                continue;
            }
            '#' => {
                while chars.get(i).is_some_and(|c| *c != '\n') {
                    i += 1;
                }
                continue;
            }
            '|' if chars.get(i + 1) == Some(&'|') => {
                i += 2;
                regex_may_start = true;
                continue;
            }
            '|' => return Some("runs a command through a pipe"),
            '>' if in_print && depth == 0 => return Some("writes a file"),
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ';' | '\n' | '{' | '}' => {
                in_print = false;
                depth = 0;
            }
            '@' => return Some("loads an extension"),
            _ => {}
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|c| c.is_alphanumeric() || *c == '_')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let called = chars[i..]
                .iter()
                .find(|c| !c.is_whitespace())
                .is_some_and(|c| *c == '(');
            match word.as_str() {
                "system" if called => return Some("runs a command (system)"),
                "print" | "printf" => in_print = true,
                _ => {}
            }
            regex_may_start = matches!(word.as_str(), "print" | "printf" | "return" | "in");
            continue;
        }
        if !c.is_whitespace() {
            regex_may_start = !(c.is_alphanumeric() || matches!(c, ')' | ']' | '$' | '.'));
        }
        i += 1;
    }
    None
}

/// The index after a quoted run that starts at `start` (backslash escapes honoured).
fn skip_quoted(chars: &[char], start: usize, quote: char) -> usize {
    let mut i = start + 1;
    while let Some(&c) = chars.get(i) {
        if c == '\\' {
            i += 2;
            continue;
        }
        i += 1;
        if c == quote {
            break;
        }
    }
    i
}

/// Why a `sed` command line does more than print; `None` when it only reads.
pub fn sed(name: &str, texts: &[&str]) -> Option<String> {
    let mut scripts = Vec::new();
    let mut at = 0;
    let mut explicit = false;
    while let Some(text) = texts.get(at) {
        match *text {
            t if t.starts_with("-i") || t.starts_with("--in-place") => {
                return Some(format!("`{name} -i` edits files in place"));
            }
            "-f" | "--file" => {
                return Some(format!(
                    "`{name} -f` runs a script that is not in the command"
                ));
            }
            "-e" | "--expression" => {
                explicit = true;
                if let Some(script) = texts.get(at + 1) {
                    scripts.push(*script);
                }
                at += 2;
                continue;
            }
            "-s" | "--sandbox" => {}
            t if t.starts_with("--expression=") => {
                explicit = true;
                scripts.push(&t["--expression=".len()..]);
            }
            t if t.starts_with("-E") || t.starts_with("-n") || t.starts_with("-r") => {
                if t.contains('i') {
                    return Some(format!("`{name} {t}` edits files in place"));
                }
            }
            t if t.starts_with('-') && t.len() > 1 => {}
            t => {
                if !explicit {
                    scripts.push(t);
                    explicit = true;
                }
            }
        }
        at += 1;
    }
    scripts
        .iter()
        .find_map(|script| sed_script(script))
        .map(|what| format!("the {name} script {what}"))
}

/// What a sed script does beyond printing: `e` runs commands, `w`/`W` write files (also as
/// flags of `s`).
fn sed_script(script: &str) -> Option<&'static str> {
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        // An address: line numbers, `$`, `/regex/`, `\cregexc`, ranges, `!`.
        loop {
            match chars.get(i) {
                Some(c)
                    if c.is_ascii_digit()
                        || matches!(c, '$' | ',' | '~' | '!' | '+' | ' ' | '\t') =>
                {
                    i += 1
                }
                Some('/') => i = skip_quoted(&chars, i, '/'),
                Some('\\') => match chars.get(i + 1) {
                    Some(&delimiter) => i = skip_quoted(&chars, i + 1, delimiter),
                    None => i += 1,
                },
                _ => break,
            }
        }
        let Some(&command) = chars.get(i) else { break };
        i += 1;
        match command {
            'e' => return Some("runs a command (e)"),
            'w' | 'W' => return Some("writes a file (w)"),
            's' | 'y' => {
                let Some(&delimiter) = chars.get(i) else {
                    break;
                };
                i = skip_quoted(&chars, i, delimiter);
                i = skip_quoted(&chars, i - 1, delimiter);
                if command == 's' {
                    while let Some(&flag) = chars.get(i) {
                        match flag {
                            'e' => return Some("runs the replacement as a command (s///e)"),
                            'w' => return Some("writes a file (s///w)"),
                            c if c.is_ascii_alphanumeric() => i += 1,
                            _ => break,
                        }
                    }
                }
            }
            // Commands that take the rest of the line as text or a label.
            'a' | 'i' | 'c' | 'b' | 't' | 'T' | ':' | 'r' | 'R' | 'q' | 'Q' | 'l' | 'L' => {
                while chars.get(i).is_some_and(|c| *c != '\n' && *c != ';') {
                    i += 1;
                }
            }
            _ => {}
        }
        // To the next command.
        while chars
            .get(i)
            .is_some_and(|c| matches!(c, ';' | '\n' | ' ' | '\t' | '{' | '}'))
        {
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn awk_programs_that_only_read_are_told_from_those_that_act() {
        let table: &[(&str, bool)] = &[
            ("{print $1}", true),
            ("/a|b/ {print}", true),
            ("{print \"system\"}", true),
            ("$1 > 5 {print $2}", true),
            ("{ if ($1 > 5) print $2 }", true),
            ("{a[$1]++} END {for (k in a) print k, a[k]}", true),
            ("NR==1 || NR==3", true),
            ("{print $1 / 2}", true),
            ("{system(\"rm -rf x\")}", false),
            ("BEGIN { system (\"id\") }", false),
            ("{print > \"/etc/x\"}", false),
            ("{print $0 >> \"log\"}", false),
            ("{print | \"sh\"}", false),
            ("BEGIN { \"date\" | getline d }", false),
            ("@load \"filefuncs\"", false),
        ];
        for (program, reads) in table {
            assert_eq!(awk_program(program).is_none(), *reads, "{program}");
        }
        assert!(awk("awk", &["-f", "prog.awk", "data"]).is_some());
        assert!(awk("gawk", &["-i", "inplace", "{print}", "f"]).is_some());
        assert!(awk("awk", &["-F", ":", "{print $1}", "/etc/passwd"]).is_none());
    }

    #[test]
    fn sed_scripts_that_only_print_are_told_from_those_that_act() {
        let table: &[(&[&str], bool)] = &[
            (&["-n", "1,5p", "file"], true),
            (&["s/foo/bar/g", "file"], true),
            (&["-e", "s/a/b/", "-e", "/x/d", "f"], true),
            (&["-E", "s/(a|b)+/x/", "f"], true),
            (&["/start/,/end/p"], true),
            (&["s/x/y/w out.txt", "f"], false),
            (&["s/.*/id/e"], false),
            (&["1e id"], false),
            (&["w /etc/passwd"], false),
            (&["-i", "s/a/b/", "f"], false),
            (&["-Ei", "s/a/b/", "f"], false),
            (&["-f", "script.sed", "f"], false),
            (&["--in-place=.bak", "s/a/b/", "f"], false),
        ];
        for (args, reads) in table {
            assert_eq!(sed("sed", args).is_none(), *reads, "{args:?}");
        }
    }
}
