//! Splits shell command lines into words the way bash does, for the
//! command lines `volley import curl` reads: browsers' "Copy as cURL"
//! writes them for bash, with `'...'`, `"..."` and ANSI-C `$'...'` quoting,
//! `\` line continuations, and ` ;` between commands ("Copy all as cURL").
//!
//! Written by hand: the shell-word crates split POSIX `sh` words, and none
//! reads bash's `$'...'`, which Chromium writes for any text with a quote,
//! a control character or a `!`. A shell variable (`$API_KEY`,
//! `${API_KEY}`, bare or in double quotes, as API documentation writes
//! keys) is kept as a [`VAR_OPEN`]`NAME`[`VAR_CLOSE`] mark, which the
//! importer turns into a reference to the environment variable. Anything
//! else that would need the shell to run something (`$(...)`, `$1`,
//! `${X:-y}`, backquotes, pipes, redirections) is an error naming the line:
//! the import cannot know what it would give.

use super::Problem;

/// Where a shell variable's name starts in a word (a private-use
/// character, which no command line holds).
pub const VAR_OPEN: char = '\u{e000}';
/// Where it ends.
pub const VAR_CLOSE: char = '\u{e001}';

/// One command: its words as bytes (`$'\xff'` is a byte, not a character)
/// and the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub words: Vec<Vec<u8>>,
    pub line: usize,
}

/// The commands of `text`, in order.
pub fn split(text: &str) -> Result<Vec<Command>, Problem> {
    Splitter {
        chars: text.chars().collect(),
        at: 0,
        line: 1,
        commands: Vec::new(),
        words: Vec::new(),
        word: None,
        start: 1,
    }
    .run()
}

/// Whether `text` is written for Windows' cmd.exe, as Chromium's "Copy as
/// cURL (cmd)" writes it: words in `^"...^"`, lines continued by ` ^`.
pub fn is_cmd(text: &str) -> bool {
    text.contains("^\"") || text.lines().any(|l| l.trim_end().ends_with(" ^"))
}

/// The commands of `text` written for cmd.exe, split in two steps as
/// Windows does: cmd.exe's own (`^` escapes the next character, a `^` at
/// a line's end continues it, `&` and new lines end a command), then the C
/// runtime's rules for one command's arguments (`"` quotes, backslashes
/// escape a `"` only, `""` within quotes is one `"`).
pub fn split_cmd(text: &str) -> Result<Vec<Command>, Problem> {
    let mut commands = Vec::new();
    // One command after cmd.exe's step: its characters, each marked when
    // it was escaped (a `^"` is still a quote to the C runtime).
    let mut command: Vec<char> = Vec::new();
    let mut start = 1;
    let mut line = 1;
    let mut in_quotes = false;
    let mut chars = text.chars().peekable();
    fn finish(command: &mut Vec<char>, start: usize, commands: &mut Vec<Command>) {
        let words = crt_arguments(command);
        command.clear();
        if !words.is_empty() {
            commands.push(Command { words, line: start });
        }
    }
    while let Some(c) = chars.next() {
        match c {
            '^' if !in_quotes => match chars.next() {
                Some('\r') if chars.peek() == Some(&'\n') => {
                    chars.next();
                    line += 1;
                }
                Some('\n') => line += 1,
                Some(c) => command.push(c),
                None => {}
            },
            '"' => {
                in_quotes = !in_quotes;
                command.push(c);
            }
            '\r' => {}
            '\n' if !in_quotes => {
                line += 1;
                finish(&mut command, start, &mut commands);
                start = line;
            }
            '&' if !in_quotes => {
                finish(&mut command, start, &mut commands);
                start = line;
            }
            '|' | '<' | '>' if !in_quotes => {
                return Err(Problem::on_line(
                    line,
                    format!(
                        "'{c}' sends the command's input or output elsewhere: import the curl command alone"
                    ),
                ));
            }
            c => {
                if c == '\n' {
                    line += 1;
                }
                command.push(c);
            }
        }
        if command.is_empty() && !in_quotes {
            start = line;
        }
    }
    finish(&mut command, start, &mut commands);
    Ok(commands)
}

/// A command line's arguments by the C runtime's rules.
fn crt_arguments(command: &[char]) -> Vec<Vec<u8>> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quoted = false;
    let mut i = 0;
    while i < command.len() {
        let c = command[i];
        if c == '\\' {
            let run = command[i..].iter().take_while(|c| **c == '\\').count();
            let word = word.get_or_insert_with(String::new);
            if command.get(i + run) == Some(&'"') {
                // 2n backslashes and a quote: n backslashes, then the quote
                // opens or closes; 2n+1: n backslashes and a quote.
                word.extend(std::iter::repeat_n('\\', run / 2));
                if run % 2 == 1 {
                    word.push('"');
                    i += run + 1;
                } else {
                    i += run;
                }
            } else {
                word.extend(std::iter::repeat_n('\\', run));
                i += run;
            }
            continue;
        }
        match c {
            '"' if quoted && command.get(i + 1) == Some(&'"') => {
                word.get_or_insert_with(String::new).push('"');
                i += 1;
            }
            '"' => {
                quoted = !quoted;
                word.get_or_insert_with(String::new);
            }
            ' ' | '\t' | '\n' if !quoted => {
                if let Some(w) = word.take() {
                    words.push(w.into_bytes());
                }
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
        i += 1;
    }
    if let Some(w) = word {
        words.push(w.into_bytes());
    }
    words
}

struct Splitter {
    chars: Vec<char>,
    at: usize,
    line: usize,
    commands: Vec<Command>,
    words: Vec<Vec<u8>>,
    /// The word being read, if one has started (`''` starts an empty one).
    word: Option<Vec<u8>>,
    /// The line the current command started on.
    start: usize,
}

impl Splitter {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.chars.get(self.at).copied();
        self.at += 1;
        if c == Some('\n') {
            self.line += 1;
        }
        c
    }

    fn fail(&self, message: impl Into<String>) -> Problem {
        Problem::on_line(self.line, message)
    }

    fn push(&mut self, c: char) {
        let mut buf = [0; 4];
        self.word
            .get_or_insert_with(Vec::new)
            .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }

    fn end_word(&mut self) {
        if let Some(word) = self.word.take() {
            if self.words.is_empty() {
                self.start = self.line;
            }
            self.words.push(word);
        }
    }

    fn end_command(&mut self) {
        self.end_word();
        if !self.words.is_empty() {
            self.commands.push(Command {
                words: std::mem::take(&mut self.words),
                line: self.start,
            });
        }
    }

    fn run(mut self) -> Result<Vec<Command>, Problem> {
        while let Some(c) = self.next() {
            match c {
                ' ' | '\t' | '\r' => self.end_word(),
                '\n' => self.end_command(),
                '\\' => match self.next() {
                    Some('\n') => {}
                    // `\` before CR LF continues the line too (a file saved on Windows).
                    Some('\r') if self.peek() == Some('\n') => {
                        self.next();
                    }
                    Some(c) => self.push(c),
                    None => self.push('\\'),
                },
                '\'' => self.single_quoted()?,
                '"' => self.double_quoted()?,
                '$' => match self.peek() {
                    Some('\'') => {
                        self.next();
                        self.ansi_c_quoted()?;
                    }
                    Some('"') => {
                        self.next();
                        self.double_quoted()?;
                    }
                    Some(n) if n.is_alphanumeric() || "_{(@*#?$!-".contains(n) => self.variable()?,
                    _ => self.push('$'),
                },
                '`' => return Err(self.fail("a `command` substitution asks the shell to run something")),
                '#' if self.word.is_none() => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.next();
                    }
                }
                ';' => self.end_command(),
                '&' | '|' if self.peek() == Some(c) => {
                    self.next();
                    self.end_command();
                }
                // Windows' "Copy all as cURL (cmd)" joins with ` &`; a lone
                // `&` in bash runs the command in the background. Either way
                // the next command follows.
                '&' => self.end_command(),
                '|' => {
                    return Err(
                        self.fail("a pipe ('|') sends the output elsewhere: import the curl command alone")
                    );
                }
                '<' | '>' => {
                    return Err(self.fail(format!("a redirection ('{c}') is not part of a request: drop it")));
                }
                '(' | ')' => {
                    return Err(self.fail(format!(
                        "'{c}' (a subshell or function) is not a curl command line"
                    )));
                }
                c => self.push(c),
            }
        }
        self.end_command();
        Ok(self.commands)
    }

    fn single_quoted(&mut self) -> Result<(), Problem> {
        self.word.get_or_insert_with(Vec::new);
        let line = self.line;
        loop {
            match self.next() {
                Some('\'') => return Ok(()),
                Some(c) => self.push(c),
                None => return Err(Problem::on_line(line, "a ' quote is never closed")),
            }
        }
    }

    fn double_quoted(&mut self) -> Result<(), Problem> {
        self.word.get_or_insert_with(Vec::new);
        let line = self.line;
        loop {
            match self.next() {
                Some('"') => return Ok(()),
                Some('\\') => match self.next() {
                    Some('\n') => {}
                    Some(c @ ('$' | '`' | '"' | '\\')) => self.push(c),
                    Some(c) => {
                        self.push('\\');
                        self.push(c);
                    }
                    None => break,
                },
                Some('$')
                    if self
                        .peek()
                        .is_some_and(|n| n.is_alphanumeric() || "_{(@*#?$!".contains(n)) =>
                {
                    self.variable()?
                }
                Some('`') => {
                    return Err(self.fail("a `command` substitution asks the shell to run something"));
                }
                Some(c) => self.push(c),
                None => break,
            }
        }
        Err(Problem::on_line(line, "a \" quote is never closed"))
    }

    /// After a `$`: a variable's name (`NAME` or `{NAME}`), kept as a mark;
    /// any other expansion is refused.
    fn variable(&mut self) -> Result<(), Problem> {
        let braced = self.peek() == Some('{');
        if braced {
            self.next();
        }
        let mut name = String::new();
        while let Some(c) = self.peek().filter(|c| c.is_ascii_alphanumeric() || *c == '_') {
            if name.is_empty() && c.is_ascii_digit() {
                break;
            }
            name.push(c);
            self.next();
        }
        if name.is_empty() || (braced && self.next() != Some('}')) {
            return Err(self.fail(format!(
                "'${}{name}...' asks the shell to work out a value; write the value itself or a plain $NAME",
                if braced { "{" } else { "" }
            )));
        }
        self.push(VAR_OPEN);
        for c in name.chars() {
            self.push(c);
        }
        self.push(VAR_CLOSE);
        Ok(())
    }

    /// Reads up to `most` digits of `radix`.
    fn digits(&mut self, radix: u32, most: usize) -> Option<u32> {
        let mut value = None;
        for _ in 0..most {
            match self.peek().and_then(|c| c.to_digit(radix)) {
                Some(d) => {
                    self.next();
                    value = Some(value.unwrap_or(0) * radix + d);
                }
                None => break,
            }
        }
        value
    }

    fn ansi_c_quoted(&mut self) -> Result<(), Problem> {
        self.word.get_or_insert_with(Vec::new);
        let line = self.line;
        loop {
            let Some(c) = self.next() else {
                return Err(Problem::on_line(line, "a $' quote is never closed"));
            };
            if c == '\'' {
                return Ok(());
            }
            if c != '\\' {
                self.push(c);
                continue;
            }
            let Some(escape) = self.next() else { continue };
            let byte = |b: u8| Some(Err::<char, u8>(b));
            let decoded: Option<Result<char, u8>> = match escape {
                'a' => byte(7),
                'b' => byte(8),
                'e' | 'E' => byte(0x1b),
                'f' => byte(0x0c),
                'n' => byte(b'\n'),
                'r' => byte(b'\r'),
                't' => byte(b'\t'),
                'v' => byte(0x0b),
                '\\' | '\'' | '"' | '?' => Some(Ok(escape)),
                'x' => self.digits(16, 2).map(|v| Err(v as u8)),
                'u' => self.digits(16, 4).map(|v| char::from_u32(v).ok_or(b'?')),
                'U' => self.digits(16, 8).map(|v| char::from_u32(v).ok_or(b'?')),
                'c' => self.next().map(|c| Err((c as u8) & 0x1f)),
                '0'..='7' => {
                    self.at -= 1;
                    self.digits(8, 3).map(|v| Err(v as u8))
                }
                _ => None,
            };
            match decoded {
                Some(Ok(c)) => self.push(c),
                Some(Err(b)) => self.word.get_or_insert_with(Vec::new).push(b),
                None => {
                    self.push('\\');
                    self.push(escape);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<Vec<String>> {
        split(text)
            .unwrap()
            .into_iter()
            .map(|c| {
                c.words
                    .into_iter()
                    .map(|w| String::from_utf8(w).unwrap())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn quoting_as_bash_reads_it() {
        assert_eq!(
            words("curl 'http://a/x' \\\n  -H $'it\\'s \\u0021 \\x41\\n' \"d\\\"q\\$x\" plain\\ word ''"),
            [[
                "curl",
                "http://a/x",
                "-H",
                "it's ! A\n",
                "d\"q$x",
                "plain word",
                ""
            ]]
        );
        assert_eq!(
            words("a 'b\nc' # comment\nd e"),
            [vec!["a", "b\nc"], vec!["d", "e"]]
        );
        assert_eq!(words("a ;\nb && c || d & e"), [["a"], ["b"], ["c"], ["d"], ["e"]]);
        assert_eq!(words("a$ b'$x'"), [["a$", "b$x"]]);
        assert_eq!(
            words("x $'\\101\\cA\\e' \"a\\b\""),
            [["x", "A\u{1}\u{1b}", "a\\b"]]
        );
        let commands = split("\n\ncurl a \\\n b\ncurl c").unwrap();
        assert_eq!((commands[0].line, commands[1].line), (3, 5));
        assert_eq!(split("x $'\\xff'").unwrap()[0].words[1], [0xff]);
    }

    #[test]
    fn windows_cmd_as_chromium_writes_it() {
        // What "Copy as cURL (cmd)" gives for a JSON POST and a GET.
        let text = "curl ^\"http://h.test/a?x=1^&y=2^\" ^\r\n  -H ^\"content-type: application/json^\" ^\r\n  --data-raw ^\"^{^\\^\"name^\\^\":^\\^\"O'Brien ^%^PATH^%^\\^\"^}^\" &\r\ncurl ^\"http://h.test/b^\"";
        assert!(is_cmd(text));
        let commands = split_cmd(text).unwrap();
        let words: Vec<Vec<String>> = commands
            .iter()
            .map(|c| {
                c.words
                    .iter()
                    .map(|w| String::from_utf8(w.clone()).unwrap())
                    .collect()
            })
            .collect();
        assert_eq!(
            words,
            [
                vec![
                    "curl",
                    "http://h.test/a?x=1&y=2",
                    "-H",
                    "content-type: application/json",
                    "--data-raw",
                    "{\"name\":\"O'Brien %PATH%\"}"
                ],
                vec!["curl", "http://h.test/b"],
            ]
        );
        assert_eq!((commands[0].line, commands[1].line), (1, 4));
        assert!(!is_cmd("curl 'http://h/^x'"));
    }

    #[test]
    fn shell_variables_are_kept_as_marks() {
        let mark = |name: &str| format!("{VAR_OPEN}{name}{VAR_CLOSE}");
        assert_eq!(
            words("curl \"$BASE/a\" -H \"Authorization: Bearer ${API_KEY}\" $T_1x '$NOT'"),
            [[
                "curl".to_string(),
                format!("{}/a", mark("BASE")),
                "-H".into(),
                format!("Authorization: Bearer {}", mark("API_KEY")),
                mark("T_1x"),
                "$NOT".into(),
            ]]
        );
    }

    #[test]
    fn what_needs_a_shell_is_refused_with_its_line() {
        for (text, line) in [
            ("curl $1", 1),
            ("curl \"${URL:-x}\"", 1),
            ("curl a\ncurl \"$(cat x)\"", 2),
            ("curl `x`", 1),
            ("curl a | jq", 1),
            ("curl a > out", 1),
            ("curl 'open", 1),
            ("curl \"open", 1),
        ] {
            let problem = split(text).unwrap_err();
            assert_eq!(problem.place, format!("line {line}"), "{text}: {problem}");
        }
    }
}
