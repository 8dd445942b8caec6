//! Reading a saved report back ([`SavedReport::load`]) into the types that
//! wrote it, with one clear line for a file that is not a volley report.

use super::{SCHEMA, SavedReport};

/// Why a saved report could not be read: one line naming the file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read '{path}': {reason}")]
    Unreadable { path: String, reason: String },
    #[error("'{path}' is not a volley JSON report: {reason}")]
    NotAReport { path: String, reason: String },
    #[error("'{path}' is not a {SCHEMA} report: it has no \"schema\" field")]
    Unmarked { path: String },
    #[error("'{path}' is a '{found}' report; this volley reads {SCHEMA}")]
    OtherSchema { path: String, found: String },
}

impl SavedReport {
    /// Reads a saved report back into the types that wrote it.
    pub fn load(path: &std::path::Path) -> Result<SavedReport, LoadError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| LoadError::Unreadable {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
        Self::parse(&shown, &text)
    }

    /// Parses a report's text; `path` only names it in errors.
    pub fn parse(path: &str, text: &str) -> Result<SavedReport, LoadError> {
        let not_a_report = |reason: String| LoadError::NotAReport {
            path: path.to_string(),
            reason,
        };
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| not_a_report(e.to_string()))?;
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA) => {}
            Some(other) => {
                return Err(LoadError::OtherSchema {
                    path: path.to_string(),
                    found: other.to_string(),
                });
            }
            None => {
                return Err(LoadError::Unmarked {
                    path: path.to_string(),
                });
            }
        }
        serde_json::from_value(value).map_err(|e| not_a_report(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    /// An interval's end as the collector computes it (7 x 0.2 s) is one
    /// unit in the last place above 1.4 and is written so; reading it back
    /// must give that figure, not 1.4, or a report rendered again from its
    /// file differs from the run's own (why Cargo.toml turns on
    /// serde_json's `float_roundtrip`; the integration suite checks it
    /// does, as the test builds get the feature from a dev-dependency).
    #[test]
    fn figures_read_back_to_the_last_bit() {
        let written = 7.0 * 0.2;
        assert_ne!(written, 1.4);
        let text = serde_json::to_string(&written).unwrap();
        assert_eq!(text, "1.4000000000000001");
        let read: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(read.as_f64(), Some(written));
    }
}
