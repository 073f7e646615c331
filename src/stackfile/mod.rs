//! Declarative stack files: the interface the stack-file loader implements.
//!
//! [`load_file`] reads one stack file (`stacks/<name>.yaml`) and returns the [`App`] it
//! describes, or every diagnostic found in it. This version is a stand-in until the YAML loader
//! lands: it recognises the reference stack files by their file stem (`kimi-k3-hyperpod`,
//! `kimi-k3-eks`, `kimi-k3-eks-karpenter`) and returns the matching
//! [`crate::reference`] app, whose output the real files reproduce byte for byte. Any other
//! file is reported as a diagnostic. The file must exist and be readable.

use crate::app::App;
use crate::diagnostics::{Code, Diagnostics};
use std::path::Path;

/// Loads the stack file at `path`.
pub fn load_file(path: &Path) -> Result<App, Diagnostics> {
    let display = path.display().to_string();
    if let Err(e) = std::fs::metadata(path) {
        let mut ds = Diagnostics::new();
        ds.report(
            Code::InvalidStackName,
            &display,
            format!("cannot read stack file `{display}`: {e}"),
            "check the path; stack files are the `*.yaml` files of the stacks directory",
        );
        return Err(ds);
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    match stem.as_str() {
        "kimi-k3-hyperpod" => Ok(crate::reference::kimi_k3_hyperpod()),
        "kimi-k3-eks" => Ok(crate::reference::kimi_k3_eks()),
        "kimi-k3-eks-karpenter" => Ok(crate::reference::kimi_k3_eks_karpenter()),
        _ => {
            let mut ds = Diagnostics::new();
            ds.report(
                Code::InvalidStackName,
                &display,
                format!("`{display}` is not a stack file this loader understands"),
                "known stack files: kimi-k3-hyperpod.yaml, kimi-k3-eks.yaml, kimi-k3-eks-karpenter.yaml",
            );
            Err(ds)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_missing_files_are_diagnostics() {
        let missing = load_file(Path::new("does/not/exist.yaml")).unwrap_err();
        assert!(missing.has_errors());
        let dir = std::env::temp_dir().join(format!("hf-stackfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let other = dir.join("other.yaml");
        std::fs::write(&other, "# other\n").unwrap();
        assert!(load_file(&other).unwrap_err().has_errors());
        let known = dir.join("kimi-k3-eks.yaml");
        std::fs::write(&known, "# eks\n").unwrap();
        assert_eq!(load_file(&known).unwrap().stacks()[0].name(), "kimi-k3-eks");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
