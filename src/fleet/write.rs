//! A fleet's output: written to a directory as members finish ([`Fleet::write_to`]), or kept
//! in memory ([`Fleet::synth`], for tests and small fleets).

use super::{Fleet, FleetOptions, FleetOutput, FleetSink};
use crate::assembly::{is_contained, replaceable, AssemblyError, StagedDir};
use crate::diagnostics::Diagnostics;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

/// Why writing a fleet's output failed. The previous output is left as it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetWriteError {
    /// Diagnostics stopped synthesis.
    #[error("the fleet has errors")]
    Diagnostics(Diagnostics),
    /// The output directory could not be written.
    #[error(transparent)]
    Assembly(#[from] AssemblyError),
}

struct DirSink<'a> {
    dir: &'a StagedDir,
    error: Mutex<Option<AssemblyError>>,
}

impl FleetSink for DirSink<'_> {
    fn file(&self, path: &str, bytes: &[u8]) -> Result<(), String> {
        self.dir.write(path, bytes).map_err(|e| {
            let text = e.to_string();
            self.error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(e);
            text
        })
    }
}

struct MemorySink {
    files: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl FleetSink for MemorySink {
    fn file(&self, path: &str, bytes: &[u8]) -> Result<(), String> {
        if !is_contained(path) {
            return Err(format!("`{path}` leaves the output"));
        }
        self.files
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(path.to_owned(), bytes.to_vec());
        Ok(())
    }
}

impl Fleet {
    /// Synthesizes the fleet into `dir`, each member's files written as it finishes, replacing
    /// `dir` only when all are written. `dir` must be new, empty, or an earlier output of
    /// hyperforge's ([`replaceable`]); otherwise nothing is touched.
    pub fn write_to(
        &self,
        dir: &Path,
        options: &FleetOptions,
    ) -> Result<FleetOutput, FleetWriteError> {
        if !replaceable(dir) {
            return Err(AssemblyError::NotAnAssembly {
                path: dir.to_path_buf(),
            }
            .into());
        }
        // Matrix errors stop before the output directory is touched.
        let ds = self.validate_matrix();
        if ds.has_errors() {
            return Err(FleetWriteError::Diagnostics(ds));
        }
        let staged = StagedDir::begin(dir)?;
        let sink = DirSink {
            dir: &staged,
            error: Mutex::new(None),
        };
        let result = self.synth_into(options, &sink);
        if let Some(e) = sink.error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e.into());
        }
        let output = result.map_err(FleetWriteError::Diagnostics)?;
        staged.commit()?;
        Ok(output)
    }

    /// Synthesizes the fleet in memory: every file by path, and the output.
    pub fn synth(
        &self,
        options: &FleetOptions,
    ) -> Result<(BTreeMap<String, Vec<u8>>, FleetOutput), Diagnostics> {
        let sink = MemorySink {
            files: Mutex::new(BTreeMap::new()),
        };
        let output = self.synth_into(options, &sink)?;
        Ok((
            sink.files.into_inner().unwrap_or_else(|p| p.into_inner()),
            output,
        ))
    }
}
