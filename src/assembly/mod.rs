//! The assembly: every synthesized artifact by relative path, plus `manifest.json` listing each
//! stack's stages in deployment order. Written to a temporary directory and renamed into place,
//! so a failed or interrupted run leaves the previous output as it was. The manifest's types are
//! in [`manifest`].

pub mod fill;
pub mod fleet;
pub mod inventory;
pub mod manifest;
pub mod plan;

use crate::diagnostics::Diagnostics;
use manifest::Manifest;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The synthesized output of an app.
#[derive(Clone, Debug)]
pub struct Assembly {
    files: BTreeMap<String, Vec<u8>>,
    manifest: Manifest,
    warnings: Diagnostics,
}

/// Why writing an assembly failed. The previous output directory is left as it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AssemblyError {
    /// A filesystem operation failed.
    #[error("cannot {action} `{path}`: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An artifact's path is absolute or leaves the output directory; nothing was written.
    #[error("refusing to write `{path}`: artifact paths must stay inside the output directory")]
    OutsideOutput {
        /// The artifact's path, as the assembly names it.
        path: String,
    },
    /// The output path holds something that is not an assembly hyperforge wrote (no
    /// `manifest.json` of hyperforge's, and not empty), which replacing it would delete;
    /// nothing was touched.
    #[error("refusing to replace `{path}`: it is not empty and holds no assembly hyperforge wrote (no manifest.json of hyperforge's); choose a new or empty directory, or remove it yourself")]
    NotAnAssembly {
        /// The output path.
        path: PathBuf,
    },
}

/// The most of an existing `manifest.json` read to tell whether hyperforge wrote it.
const MANIFEST_PROBE_BYTES: u64 = 4 << 20;

/// Whether `dir` may be replaced by an assembly: it does not exist, or it is a directory (not a
/// symbolic link) that is empty or holds a `manifest.json` (an assembly) or `fleet.json` (a
/// fleet's output) whose `generator` is hyperforge.
pub fn replaceable(dir: &Path) -> bool {
    let Ok(meta) = fs::symlink_metadata(dir) else {
        return !dir.exists();
    };
    if !meta.is_dir() {
        return false;
    }
    let empty = fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none());
    if empty {
        return true;
    }
    let manifest = dir.join("manifest.json");
    let ours = |file: &Path| {
        fs::symlink_metadata(file).is_ok_and(|m| m.is_file() && m.len() <= MANIFEST_PROBE_BYTES)
            && fs::read(file)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
                .and_then(|v| v.get("generator")?.as_str().map(str::to_owned))
                .is_some_and(|g| g == "hyperforge" || g.starts_with("hyperforge "))
    };
    // An assembly has manifest.json; a fleet's output, fleet.json.
    ours(&manifest) || ours(&dir.join("fleet.json"))
}

/// Whether `rel` names a file inside the output directory: relative, made of normal segments
/// only (no `..`, no root, no prefix, no empty or `.` segment), no NUL.
pub fn is_contained(rel: &str) -> bool {
    use std::path::Component;
    !rel.is_empty()
        && !rel.contains('\0')
        && !rel.contains('\\')
        && rel
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
        && Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> AssemblyError + use<> {
    let path = path.to_path_buf();
    move |source| AssemblyError::Io {
        action,
        path,
        source,
    }
}

impl Assembly {
    pub(crate) fn new(
        files: BTreeMap<String, Vec<u8>>,
        manifest: Manifest,
        warnings: Diagnostics,
    ) -> Self {
        let mut files = files;
        files.insert("manifest.json".to_owned(), manifest.to_json().into_bytes());
        Assembly {
            files,
            manifest,
            warnings,
        }
    }

    /// Every file by path relative to the assembly root (`manifest.json` included), sorted.
    pub fn files(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.files
    }

    /// One file's contents.
    pub fn file(&self, path: &str) -> Option<&[u8]> {
        self.files.get(path).map(Vec::as_slice)
    }

    /// One file as text.
    pub fn text(&self, path: &str) -> Option<&str> {
        self.file(path).and_then(|b| std::str::from_utf8(b).ok())
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The text of `manifest.json` ([`Manifest::to_json`]).
    pub fn manifest_json(&self) -> &str {
        self.text("manifest.json").unwrap_or_default()
    }

    /// Warnings found during synthesis (errors stop synthesis).
    pub fn warnings(&self) -> &Diagnostics {
        &self.warnings
    }

    /// Writes the assembly to `dir`, replacing what was there only once everything is written.
    /// `dir` must be new, empty, or an assembly hyperforge wrote ([`replaceable`]): anything
    /// else is refused before anything is touched ([`AssemblyError::NotAnAssembly`]), so a
    /// mistyped output path never deletes a directory of other files.
    pub fn write_to(&self, dir: &Path) -> Result<(), AssemblyError> {
        if !replaceable(dir) {
            return Err(AssemblyError::NotAnAssembly {
                path: dir.to_path_buf(),
            });
        }
        self.write_to_replacing(dir)
    }

    /// Writes the assembly to `dir` as [`Assembly::write_to`] does, replacing whatever `dir`
    /// holds (a directory of other files included): the explicit choice to overwrite.
    pub fn write_to_replacing(&self, dir: &Path) -> Result<(), AssemblyError> {
        // Defense in depth: names are validated where they are declared, and no artifact may
        // leave the output directory whatever produced it. Checked before anything is touched.
        if let Some(rel) = self.files.keys().find(|rel| !is_contained(rel)) {
            return Err(AssemblyError::OutsideOutput { path: rel.clone() });
        }
        let staged = StagedDir::begin(dir)?;
        for (rel, bytes) in &self.files {
            staged.write(rel, bytes)?;
        }
        staged.commit()
    }
}

/// An output directory being written: files go to a staging directory beside it, which
/// replaces it only on [`StagedDir::commit`]; dropped uncommitted, the staging directory is
/// removed and the previous output is as it was. Files may be written from several threads.
#[derive(Debug)]
pub struct StagedDir {
    dir: PathBuf,
    staging: PathBuf,
    previous: PathBuf,
    committed: bool,
}

impl StagedDir {
    /// Starts writing `dir` (which is replaced whatever it holds; check [`replaceable`]
    /// first when that is not what was asked for).
    pub fn begin(dir: &Path) -> Result<StagedDir, AssemblyError> {
        let parent = match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        fs::create_dir_all(&parent).map_err(io("create", &parent))?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "hyperforge.out".to_owned());
        let pid = std::process::id();
        let staging = parent.join(format!(".{name}.tmp-{pid}"));
        let previous = parent.join(format!(".{name}.old-{pid}"));
        if staging.exists() {
            fs::remove_dir_all(&staging).map_err(io("remove", &staging))?;
        }
        fs::create_dir_all(&staging).map_err(io("create", &staging))?;
        Ok(StagedDir {
            dir: dir.to_path_buf(),
            staging,
            previous,
            committed: false,
        })
    }

    /// Writes one file at `rel` (refused unless it stays inside the directory); scripts
    /// (`.sh`) are made executable.
    pub fn write(&self, rel: &str, bytes: &[u8]) -> Result<(), AssemblyError> {
        if !is_contained(rel) {
            return Err(AssemblyError::OutsideOutput {
                path: rel.to_owned(),
            });
        }
        let path = self.staging.join(rel);
        if let Some(p) = path.parent() {
            if !p.is_dir() {
                fs::create_dir_all(p).map_err(io("create", p))?;
            }
        }
        fs::write(&path, bytes).map_err(io("write", &path))?;
        #[cfg(unix)]
        if rel.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755))
                .map_err(io("set permissions of", &path))?;
        }
        Ok(())
    }

    /// Puts the written directory in place of the previous one.
    pub fn commit(mut self) -> Result<(), AssemblyError> {
        let result = swap_in(&self.staging, &self.dir, &self.previous);
        self.committed = result.is_ok();
        result
    }
}

impl Drop for StagedDir {
    fn drop(&mut self) {
        if !self.committed && self.staging.exists() {
            // Best effort: the staging directory is ours; the previous output is untouched.
            let _ = fs::remove_dir_all(&self.staging);
        }
    }
}

fn swap_in(staging: &Path, dir: &Path, previous: &Path) -> Result<(), AssemblyError> {
    if dir.exists() {
        if previous.exists() {
            fs::remove_dir_all(previous).map_err(io("remove", previous))?;
        }
        fs::rename(dir, previous).map_err(io("move aside", dir))?;
        if let Err(e) = fs::rename(staging, dir) {
            // Put the previous output back before reporting.
            let _ = fs::rename(previous, dir);
            return Err(io("move into place", staging)(e));
        }
        fs::remove_dir_all(previous).map_err(io("remove", previous))?;
    } else {
        fs::rename(staging, dir).map_err(io("move into place", staging))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_paths_must_stay_inside_the_output_directory() {
        for ok in [
            "a/01-x.template.json",
            "stack/02-scripts/on_create.sh",
            "manifest.json",
        ] {
            assert!(is_contained(ok), "{ok}");
        }
        for bad in [
            "../x",
            "a/../../x",
            "/etc/passwd",
            "a//b",
            "./a",
            "a/./b",
            "",
            "a\0b",
            "a\\..\\b",
        ] {
            assert!(!is_contained(bad), "{bad:?}");
        }
    }

    #[test]
    fn an_escaping_artifact_is_refused_and_nothing_is_written() {
        let dir =
            std::env::temp_dir().join(format!("hyperforge-assembly-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        let out = dir.join("out");
        let mut files = BTreeMap::new();
        files.insert("s/ok.txt".to_owned(), b"ok".to_vec());
        files.insert("s/../../escaped.sh".to_owned(), b"#!/bin/sh".to_vec());
        let assembly = Assembly::new(files, Manifest::new(Vec::new()), Diagnostics::new());
        let err = assembly.write_to(&out).unwrap_err();
        assert!(matches!(err, AssemblyError::OutsideOutput { .. }), "{err}");
        assert!(!out.exists(), "nothing is written");
        assert!(!dir.join("escaped.sh").exists());
        let _ = fs::remove_dir_all(&dir);
    }

    /// A directory that is not an assembly hyperforge wrote is never replaced (a mistyped
    /// `--out` pointing at a project), unless replacing is asked for by name; an empty one, a
    /// new path and an earlier assembly are.
    #[test]
    fn only_an_earlier_assembly_or_an_empty_directory_is_replaced() {
        let dir = std::env::temp_dir().join(format!(
            "hyperforge-assembly-replace-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        let mut files = BTreeMap::new();
        files.insert("s/a.txt".to_owned(), b"a".to_vec());
        files.insert(
            "manifest.json".to_owned(),
            Manifest::new(Vec::new()).to_json().into_bytes(),
        );
        let assembly = Assembly::new(files, Manifest::new(Vec::new()), Diagnostics::new());

        // A project directory: refused, untouched.
        let project = dir.join("project");
        fs::create_dir_all(project.join("src")).unwrap();
        fs::write(project.join("Cargo.toml"), "[package]\n").unwrap();
        let err = assembly.write_to(&project).unwrap_err();
        assert!(matches!(err, AssemblyError::NotAnAssembly { .. }), "{err}");
        assert!(project.join("Cargo.toml").exists() && project.join("src").is_dir());
        assert!(!project.join("s/a.txt").exists());
        // Another tool's manifest.json is not hyperforge's.
        fs::write(project.join("manifest.json"), r#"{"generator": "other"}"#).unwrap();
        assert!(assembly.write_to(&project).is_err());
        // A file where the directory would go.
        let file = dir.join("file");
        fs::write(&file, "x").unwrap();
        assert!(matches!(
            assembly.write_to(&file).unwrap_err(),
            AssemblyError::NotAnAssembly { .. }
        ));
        // New, empty, and an earlier assembly: written, then replaced.
        let out = dir.join("out");
        assembly.write_to(&out).expect("a new path");
        assembly.write_to(&out).expect("its own earlier output");
        let empty = dir.join("empty");
        fs::create_dir_all(&empty).unwrap();
        assembly.write_to(&empty).expect("an empty directory");
        // Asked for by name, anything is replaced.
        assembly.write_to_replacing(&project).expect("forced");
        assert!(!project.join("Cargo.toml").exists() && project.join("s/a.txt").exists());
        let _ = fs::remove_dir_all(&dir);
    }
}
