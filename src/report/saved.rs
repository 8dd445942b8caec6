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
