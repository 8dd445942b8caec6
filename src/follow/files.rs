//! `volley merge --follow A.jsonl B.jsonl ...`: the shards' `--stream`
//! files, read as they are written (on this machine, or copied or mounted
//! from others), into a live merge.
//!
//! One thread looks at every file a few times a second and reads what was
//! appended: a shard writes one line per interval, so this is a handful of
//! small reads per second, with no watcher to set up and nothing that
//! differs between file systems.

use super::{Follow, FollowError, Options};
use crate::report::stream::{Line, STREAM};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often the files are looked at.
const POLL: Duration = Duration::from_millis(100);

/// The longest line a stream may have (an end line carries the report:
/// megabytes for a long run, never this).
const MAX_LINE: usize = 512 << 20;

/// A file being written by someone else, read as it grows.
pub struct Tail {
    path: PathBuf,
    file: Option<std::fs::File>,
    offset: u64,
    /// Bytes after the last complete line.
    partial: Vec<u8>,
    /// Whether a complete line was read yet.
    seen_line: bool,
}

impl Tail {
    pub fn new(path: &Path) -> Tail {
        Tail {
            path: path.to_path_buf(),
            file: None,
            offset: 0,
            partial: Vec::new(),
            seen_line: false,
        }
    }

    fn shown(&self) -> String {
        format!("'{}'", self.path.display())
    }

    /// The stream lines completed since the last call (none while the file
    /// does not exist yet).
    pub fn read_lines(&mut self, lines: &mut Vec<Line>) -> Result<(), TailError> {
        if self.file.is_none() {
            match std::fs::File::open(&self.path) {
                Ok(file) => self.file = Some(file),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(TailError::Read(self.shown(), e)),
            }
        }
        let shown = self.shown();
        let file = self.file.as_mut().expect("opened above");
        let len = file
            .metadata()
            .map_err(|e| TailError::Read(shown.clone(), e))?
            .len();
        if len < self.offset {
            return Err(TailError::Truncated(shown));
        }
        if len == self.offset {
            return Ok(());
        }
        file.seek(SeekFrom::Start(self.offset))
            .map_err(|e| TailError::Read(shown.clone(), e))?;
        let start = self.partial.len();
        let read = file
            .take(len - self.offset)
            .read_to_end(&mut self.partial)
            .map_err(|e| TailError::Read(shown.clone(), e))?;
        self.offset += read as u64;
        let Some(last_newline) = self.partial[start..].iter().rposition(|b| *b == b'\n') else {
            if self.partial.len() > MAX_LINE {
                return Err(TailError::LongLine { shown });
            }
            return Ok(());
        };
        let complete: Vec<u8> = self.partial.drain(..=start + last_newline).collect();
        for text in complete.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let text = String::from_utf8_lossy(text);
            match Line::parse(&text) {
                Some(Ok(line)) => lines.push(line),
                Some(Err(e)) => return Err(TailError::Line(shown, e)),
                // Written by `--stream FILE`, a stream file holds nothing else.
                None if !self.seen_line => {
                    return Err(TailError::NotAStream(shown));
                }
                None => {}
            }
            self.seen_line = true;
        }
        Ok(())
    }
}

/// Why a stream file cannot be followed; the file is named as shown.
#[derive(Debug, thiserror::Error)]
pub enum TailError {
    #[error("cannot read {0}")]
    Read(String, #[source] std::io::Error),
    #[error(
        "{0} was truncated while it was followed (a shard started again into it?): give each run's shards fresh stream files"
    )]
    Truncated(String),
    #[error("{shown} has a line longer than {mib} MiB: not a volley stream", mib = MAX_LINE >> 20)]
    LongLine { shown: String },
    /// The stream line parser's message.
    #[error("{0}: {1}")]
    Line(String, crate::report::stream::LineError),
    #[error(
        "{0} is not a volley stream: its first line is not a {STREAM} line (give the files of `volley run --stream FILE`)"
    )]
    NotAStream(String),
}

/// `volley merge --follow`: follows `paths` until every shard has ended
/// (or is gone), then ends as `volley merge` does on their reports.
/// Returns whether a threshold failed.
pub fn follow(paths: &[PathBuf], options: &Options, stop: &AtomicBool) -> Result<bool, FollowError> {
    let names = paths.iter().map(|p| format!("'{}'", p.display())).collect();
    let mut follow = Follow::start(names, options).map_err(FollowError::input)?;
    let mut tails: Vec<Tail> = paths.iter().map(|p| Tail::new(p)).collect();
    let mut lines = Vec::new();
    let result = loop {
        let mut read = || -> Result<(), FollowError> {
            for (slot, tail) in tails.iter_mut().enumerate() {
                tail.read_lines(&mut lines).map_err(FollowError::input)?;
                for line in lines.drain(..) {
                    follow.line(slot, line).map_err(FollowError::input)?;
                }
            }
            follow.update().map_err(FollowError::input)
        };
        if let Err(e) = read() {
            break Err(e);
        }
        if follow.over() {
            break follow.streamed_reports(options.partial);
        }
        if stop.load(Ordering::Relaxed) {
            break Err(FollowError::Interrupted);
        }
        std::thread::sleep(POLL);
    };
    follow.conclude(result, options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn lines_are_read_whole_as_the_file_grows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut tail = Tail::new(&path);
        let mut lines = Vec::new();
        tail.read_lines(&mut lines).unwrap();
        assert!(lines.is_empty(), "not written yet");
        let end = Line::End(crate::report::stream::End {
            state: crate::report::stream::EndState::Failed,
            dropped: 0,
            report: None,
        });
        let text = end.encode();
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&text[..10]).unwrap();
        tail.read_lines(&mut lines).unwrap();
        assert!(lines.is_empty(), "half a line waits");
        file.write_all(&text[10..]).unwrap();
        file.write_all(b"\n").unwrap();
        file.write_all(&text).unwrap();
        file.write_all(b"\n").unwrap();
        tail.read_lines(&mut lines).unwrap();
        assert_eq!(lines, vec![end.clone(), end]);
        file.set_len(5).unwrap();
        let err = tail.read_lines(&mut lines).unwrap_err().to_string();
        assert!(err.contains("was truncated"), "{err}");
    }

    #[test]
    fn a_file_that_is_not_a_stream_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        std::fs::write(&path, "{\n  \"schema\": \"volley.report/1\"\n}\n").unwrap();
        let err = Tail::new(&path)
            .read_lines(&mut Vec::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a volley stream"), "{err}");
    }
}
