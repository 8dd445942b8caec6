//! Where an import's plans go: standard output, or `-o PLAN.yml` with the
//! body files in `PLAN.bodies/` beside it (and, with `--include-origin`,
//! `PLAN.ORIGIN.yml` for each more origin).
//!
//! Everything is rendered and read back first; then each file is written
//! under a temporary name in its final folder and renamed into place once
//! all are written, so an error leaves no partial plan and no plan naming
//! body files that are not there.

use super::plan::{self, Bodies, Plan, Rendered};
use super::{ImportError, Summary};
use std::path::{Path, PathBuf};

/// A plan file to write, with its body files.
struct Planned {
    path: PathBuf,
    rendered: Rendered,
    requests: usize,
    notes: usize,
}

/// Why the imported plans could not be written; nothing is left half
/// written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("cannot write the plan to standard output")]
    Stdout(#[source] std::io::Error),
    #[error("cannot write '{0}'")]
    File(String, #[source] std::io::Error),
    #[error("the plan written would not read back as imported (a bug in volley import, please report it)")]
    ReadsBack(#[source] plan::ReadBackError),
}

impl From<WriteError> for ImportError {
    fn from(e: WriteError) -> ImportError {
        ImportError::Write(e)
    }
}

/// Renders `plans`, checks each reads back, and writes them to `output`
/// (or the one plan to `stdout`).
pub fn write(
    plans: &[Plan],
    output: Option<&Path>,
    stdout: &mut dyn std::io::Write,
) -> Result<Summary, ImportError> {
    let Some(output) = output else {
        let plan = &plans[0];
        let rendered = plan::render(plan, &Bodies::Inline);
        plan::check_reads_back(plan, &rendered, Path::new("plan.yml")).map_err(WriteError::ReadsBack)?;
        stdout
            .write_all(rendered.yaml.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(WriteError::Stdout)?;
        return Ok(Summary {
            plans: vec![(None, plan.requests())],
            body_files: 0,
            notes: plan.header.len(),
            variables: Vec::new(),
        });
    };
    let mut planned = Vec::new();
    for plan in plans {
        let path = match &plan.suffix {
            None => output.to_path_buf(),
            Some(suffix) => with_suffix(output, suffix),
        };
        let folder = format!("{}.bodies", stem(&path));
        let rendered = plan::render(plan, &Bodies::Beside(folder));
        plan::check_reads_back(plan, &rendered, &path).map_err(WriteError::ReadsBack)?;
        planned.push(Planned {
            path,
            rendered,
            requests: plan.requests(),
            notes: plan.header.len(),
        });
    }
    let mut written = Vec::new();
    let result = stage(&planned, &mut written).and_then(|()| commit(&written));
    if result.is_err() {
        for (temp, _) in &written {
            let _ = std::fs::remove_file(temp).or_else(|_| std::fs::remove_dir_all(temp));
        }
    }
    result?;
    Ok(Summary {
        plans: planned
            .iter()
            .map(|p| (Some(p.path.clone()), p.requests))
            .collect(),
        body_files: planned.iter().map(|p| p.rendered.files.len()).sum(),
        notes: planned.iter().map(|p| p.notes).sum(),
        variables: Vec::new(),
    })
}

/// `plan.yml` with suffix `cdn.test` is `plan.cdn.test.yml`.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let extension = path.extension().map(|e| e.to_string_lossy().into_owned());
    let name = match extension {
        Some(ext) => format!("{}.{suffix}.{ext}", stem(path)),
        None => format!("{}.{suffix}", stem(path)),
    };
    path.with_file_name(name)
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "plan".into())
}

/// A temporary name beside `path`, in the same folder (so a rename moves it).
fn temporary(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.volley-import-{}", std::process::id()))
}

/// Writes every file under a temporary name: `written` collects
/// (temporary, final) pairs, body folders first.
fn stage(planned: &[Planned], written: &mut Vec<(PathBuf, PathBuf)>) -> Result<(), WriteError> {
    let fail = |path: &Path, e: std::io::Error| WriteError::File(path.display().to_string(), e);
    for plan in planned {
        let folder = plan.path.parent().unwrap_or(Path::new(""));
        if let Some((first, _)) = plan.rendered.files.first() {
            let bodies = folder.join(first.split('/').next().unwrap_or_default());
            let temp = temporary(&bodies);
            std::fs::create_dir(&temp).map_err(|e| fail(&bodies, e))?;
            written.push((temp.clone(), bodies.clone()));
            for (name, bytes) in &plan.rendered.files {
                let file_name = name.split('/').nth(1).unwrap_or(name);
                std::fs::write(temp.join(file_name), bytes).map_err(|e| fail(&folder.join(name), e))?;
            }
        }
        let temp = temporary(&plan.path);
        std::fs::write(&temp, &plan.rendered.yaml).map_err(|e| fail(&plan.path, e))?;
        written.push((temp, plan.path.clone()));
    }
    Ok(())
}

/// Renames each temporary into place; a body folder from an earlier
/// import of the same plan is replaced whole.
fn commit(written: &[(PathBuf, PathBuf)]) -> Result<(), WriteError> {
    for (temp, path) in written {
        let old = temp.with_extension("old");
        let replaced = path.is_dir() && std::fs::rename(path, &old).is_ok();
        std::fs::rename(temp, path).map_err(|e| WriteError::File(path.display().to_string(), e))?;
        if replaced {
            let _ = std::fs::remove_dir_all(&old);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::plan::{Body, Item, Request, Step};

    fn plan(body: &[u8], suffix: Option<&str>) -> Plan {
        Plan {
            header: vec!["test".into()],
            base: "http://127.0.0.1:1".into(),
            items: vec![Item {
                name: "POST /x".into(),
                tags: vec![],
                step: Step::Request(Request {
                    method: "POST".into(),
                    url: "/x".into(),
                    headers: vec![],
                    body: Some(Body::Bytes(body.to_vec())),
                }),
                comment: None,
            }],
            suffix: suffix.map(str::to_string),
        }
    }

    #[test]
    fn plans_and_bodies_land_together() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("p.yml");
        let summary = write(
            &[plan(&[0, 1], None), plan(b"x", Some("cdn.test"))],
            Some(&out),
            &mut Vec::new(),
        )
        .unwrap();
        assert_eq!(summary.body_files, 1);
        assert_eq!(
            std::fs::read(dir.path().join("p.bodies/001-post-x.bin")).unwrap(),
            [0, 1]
        );
        assert!(dir.path().join("p.cdn.test.yml").exists());
        // Again: the body folder is replaced, and no temporary is left.
        write(&[plan(&[2], None)], Some(&out), &mut Vec::new()).unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("p.bodies/001-post-x.bin")).unwrap(),
            [2]
        );
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
    }

    #[test]
    fn a_failed_write_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("missing-folder/p.yml");
        assert!(write(&[plan(&[0], None)], Some(&out), &mut Vec::new()).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
