//! The engine table: every vendored release contract in `codegen/schemas/engines/<engine>/`
//! (written by `codegen/tools/vllm_contract.py` from the release's source) as one Rust table per
//! engine, releases in version order.

use crate::Error;

/// One release read from its vendored file.
#[derive(Debug, PartialEq, Eq)]
pub struct Release {
    pub version: (u32, u32, u32),
    pub source: String,
    pub flags: Vec<String>,
    pub deprecated: Vec<String>,
    pub env: Vec<String>,
}

/// Parses `<version>.txt`: `# source: ...` and lines `flag <option>`, `deprecated <option>`,
/// `env <NAME>`.
pub fn parse(rel: &str, name: &str, text: &str) -> Result<Release, Error> {
    let bad = |line: usize, why: &str| Error(format!("{rel}:{line}: {why}"));
    let stem = name
        .strip_suffix(".txt")
        .ok_or_else(|| Error(format!("{rel}: not a .txt file")))?;
    let parts: Vec<u32> = stem
        .split('.')
        .map(|p| p.parse::<u32>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            Error(format!(
                "{rel}: the file name is not a version (0.27.0.txt)"
            ))
        })?;
    let [major, minor, patch] = parts[..] else {
        return Err(Error(format!(
            "{rel}: the file name is not a version (0.27.0.txt)"
        )));
    };
    let mut release = Release {
        version: (major, minor, patch),
        source: String::new(),
        flags: Vec::new(),
        deprecated: Vec::new(),
        env: Vec::new(),
    };
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if let Some(source) = line.strip_prefix("# source: ") {
            release.source = source.to_owned();
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (kind, value) = line
            .split_once(' ')
            .ok_or_else(|| bad(n, "expected `<kind> <value>`"))?;
        let list = match kind {
            "flag" => &mut release.flags,
            "deprecated" => &mut release.deprecated,
            "env" => &mut release.env,
            _ => return Err(bad(n, "the kind is `flag`, `deprecated` or `env`")),
        };
        if value.is_empty() || value.contains(char::is_whitespace) || value.contains('"') {
            return Err(bad(n, "a value is one word"));
        }
        list.push(value.to_owned());
    }
    if release.source.is_empty() {
        return Err(Error(format!("{rel}: no `# source:` line")));
    }
    for list in [
        &mut release.flags,
        &mut release.deprecated,
        &mut release.env,
    ] {
        list.sort();
        list.dedup();
    }
    if let Some(d) = release
        .deprecated
        .iter()
        .find(|d| release.flags.binary_search(d).is_err())
    {
        return Err(Error(format!("{rel}: `{d}` is deprecated but not a flag")));
    }
    Ok(release)
}

/// The Rust table of one engine's releases (`const_name`: `VLLM`), sorted by version.
pub fn table(engine: &str, const_name: &str, releases: &mut [Release]) -> String {
    releases.sort_by_key(|r| r.version);
    let list = |items: &[String]| -> String {
        let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
        format!("&[{}]", quoted.join(", "))
    };
    let mut out = format!(
        "/// Every {engine} release hyperforge knows, in version order (`codegen/schemas/engines/`).\n\
         pub const {const_name}: &[EngineRelease] = &[\n"
    );
    for r in releases.iter() {
        let (major, minor, patch) = r.version;
        out.push_str(&format!(
            "EngineRelease {{ version: ({major}, {minor}, {patch}), source: {:?}, flags: {}, deprecated: {}, env: {} }},\n",
            r.source,
            list(&r.flags),
            list(&r.deprecated),
            list(&r.env),
        ));
    }
    out.push_str("];\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_file_parses_sorted_and_refuses_what_it_cannot_read() {
        let text = "# source: PyPI vllm-0.1.2.tar.gz, sha256 ab\nflag --b\nflag --a\ndeprecated --b\nenv VLLM_X\n";
        let r = parse("x/0.1.2.txt", "0.1.2.txt", text).unwrap();
        assert_eq!(r.version, (0, 1, 2));
        assert_eq!(r.flags, ["--a", "--b"]);
        assert_eq!(r.deprecated, ["--b"]);
        assert!(parse("x/latest.txt", "latest.txt", text).is_err());
        assert!(parse("x/0.1.2.txt", "0.1.2.txt", "flag --a\n").is_err());
        assert!(parse("x/0.1.2.txt", "0.1.2.txt", "# source: s\nopt --a\n").is_err());
        assert!(parse("x/0.1.2.txt", "0.1.2.txt", "# source: s\ndeprecated --z\n").is_err());
    }
}
