//! Errors as users read them: one line, an error and its chain of causes
//! joined with ": ". The typed errors of each module keep their causes as
//! `source`s rather than folding them into a message, so that whoever
//! shows the error decides how much of the chain to show.

use std::error::Error;

/// An error of another module kept whole, where the kind of failure
/// matters to the caller (its exit code) but not which module failed.
pub type Cause = Box<dyn Error + Send + Sync>;

/// An error and its causes, joined with ": ".
pub fn line(error: &(dyn Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        line.push_str(": ");
        line.push_str(&next.to_string());
        cause = next.source();
    }
    line
}

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("cannot read 'x'")]
    struct Read(#[source] std::io::Error);

    #[test]
    fn the_line_is_the_chain_joined() {
        let err = Read(std::io::Error::other("gone"));
        assert_eq!(super::line(&err), "cannot read 'x': gone");
    }
}
