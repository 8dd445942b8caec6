//! Splits shell command lines into words the way bash does, for the
//! command lines `volley import curl` reads: browsers' "Copy as cURL"
//! writes them for bash, with `'...'`, `"..."` and ANSI-C `$'...'` quoting,
//! `\` line continuations, and ` ;` between commands ("Copy all as cURL").
//!
//! Written by hand: the shell-word crates split POSIX `sh` words, and none
//! reads bash's `$'...'`, which Chromium writes for any text with a quote,
//! a control character or a `!`. Anything that would need the shell to run
//! something (`$VAR`, `$(...)`, backquotes, pipes, redirections) is an
//! error naming the line: the import cannot know what it would give.

use super::Problem;

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
        Problem::at(format!("line {}", self.line), message)
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
                    Some(n) if n.is_alphanumeric() || "_{(@*#?$!-".contains(n) => {
                        return Err(self.fail(format!(
                            "'${n}...' asks the shell for a value; write the value itself"
                        )));
                    }
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
                None => return Err(Problem::at(format!("line {line}"), "a ' quote is never closed")),
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
                    return Err(
                        self.fail("'$' in double quotes asks the shell for a value; write the value itself")
                    );
                }
                Some('`') => {
                    return Err(self.fail("a `command` substitution asks the shell to run something"));
                }
                Some(c) => self.push(c),
                None => break,
            }
        }
        Err(Problem::at(format!("line {line}"), "a \" quote is never closed"))
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
                return Err(Problem::at(format!("line {line}"), "a $' quote is never closed"));
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
    fn what_needs_a_shell_is_refused_with_its_line() {
        for (text, line) in [
            ("curl $URL", 1),
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
