//! Terminal output: color decisions, unified diffs of an assembly against a directory, tables.

use super::ColorChoice;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::Path;

/// Whether to emit ANSI colors on stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Color(bool);

impl Color {
    /// `--color`, `NO_COLOR` (any non-empty value disables color) and whether stdout is a
    /// terminal.
    pub fn resolve(choice: ColorChoice) -> Color {
        match choice {
            ColorChoice::Always => Color(true),
            ColorChoice::Never => Color(false),
            ColorChoice::Auto => {
                let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
                Color(!no_color && std::io::stdout().is_terminal())
            }
        }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
}

/// How the assembly in memory differs from a directory on disk.
#[derive(Debug, Default)]
pub struct DirDiff {
    /// Unified diff text of every difference.
    pub text: String,
    /// Files only in the assembly.
    pub missing: usize,
    /// Files only on disk.
    pub extra: usize,
    /// Files whose contents differ.
    pub changed: usize,
}

impl DirDiff {
    /// Whether anything differs.
    pub fn is_empty(&self) -> bool {
        self.missing + self.extra + self.changed == 0
    }

    /// `2 changed, 1 missing, 0 extra`.
    pub fn summary(&self) -> String {
        format!(
            "{} changed, {} missing, {} extra file(s)",
            self.changed, self.missing, self.extra
        )
    }
}

/// Every regular file under `root`, by `/`-separated relative path. A missing root is empty.
pub fn read_tree(root: &Path) -> std::io::Result<BTreeMap<String, Vec<u8>>> {
    let mut files = BTreeMap::new();
    if !root.exists() {
        return Ok(files);
    }
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() {
                let rel = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                files.insert(rel, std::fs::read(&path)?);
            }
        }
    }
    Ok(files)
}

/// The differences between `on_disk` (old) and `generated` (new), as a unified diff.
pub fn diff_trees(
    on_disk: &BTreeMap<String, Vec<u8>>,
    generated: &BTreeMap<String, Vec<u8>>,
    color: Color,
) -> DirDiff {
    let mut out = DirDiff::default();
    let paths: std::collections::BTreeSet<&String> =
        on_disk.keys().chain(generated.keys()).collect();
    for path in paths {
        let old = on_disk.get(path);
        let new = generated.get(path);
        if old == new {
            continue;
        }
        match (old, new) {
            (None, Some(_)) => out.missing += 1,
            (Some(_), None) => out.extra += 1,
            _ => out.changed += 1,
        }
        let old_text = old.map(|b| String::from_utf8_lossy(b).into_owned());
        let new_text = new.map(|b| String::from_utf8_lossy(b).into_owned());
        let old_name = if old.is_some() {
            format!("a/{path}")
        } else {
            "/dev/null".to_owned()
        };
        let new_name = if new.is_some() {
            format!("b/{path}")
        } else {
            "/dev/null".to_owned()
        };
        let old_text = old_text.unwrap_or_default();
        let new_text = new_text.unwrap_or_default();
        let diff = similar::TextDiff::from_lines(&old_text, &new_text);
        let unified = diff
            .unified_diff()
            .context_radius(3)
            .header(&old_name, &new_name)
            .to_string();
        for line in unified.lines() {
            let painted = if line.starts_with("+++") || line.starts_with("---") {
                color.paint("1", line)
            } else if line.starts_with('+') {
                color.paint("32", line)
            } else if line.starts_with('-') {
                color.paint("31", line)
            } else if line.starts_with("@@") {
                color.paint("36", line)
            } else {
                line.to_owned()
            };
            out.text.push_str(&painted);
            out.text.push('\n');
        }
    }
    out
}

/// Left-aligned text columns, right-aligned where `right[i]` is set.
pub fn table(header: &[&str], rows: &[Vec<String>], right: &[bool]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let width = widths.get(i).copied().unwrap_or(0);
            let pad = width.saturating_sub(cell.chars().count());
            if i > 0 {
                text.push_str("  ");
            }
            if right.get(i).copied().unwrap_or(false) {
                text.push_str(&" ".repeat(pad));
                text.push_str(cell);
            } else {
                text.push_str(cell);
                text.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}
