//! Policy as code, in-process (feature `policy`): AWS CloudFormation Guard rules evaluated
//! over every CloudFormation template of an [`Assembly`] with the `cfn-guard` crate.
//!
//! Rules come in packs: the vendored ones (`policy/`, from the AWS Guard Rules Registry, see
//! `policy/README.md`), listed in [`PolicyPack::BUILTIN`], or the user's own `.guard` files
//! ([`PolicyPack::from_path`]). Every failed rule becomes a [`Code::PolicyViolation`]
//! diagnostic at the construct path of the resource it names (the template's
//! `Metadata.hyperforge:path`), carrying the rule name and the rule's fix text.
//!
//! Acknowledged findings never reach the report: a resource's acknowledgements are written
//! into its `Metadata.guard.SuppressedRules` (and the other tools' native forms), which the
//! registry's rules read themselves.

mod vendored;

use crate::assembly::manifest::ArtifactFormat;
use crate::assembly::Assembly;
use crate::diagnostics::{Code, Diagnostic, Diagnostics};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

/// One Guard rule file: where it came from and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleFile {
    /// The registry path of a vendored file, or the file's path as given.
    pub origin: String,
    /// The Guard rules.
    pub text: String,
}

/// A named set of Guard rule files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyPack {
    /// The pack's name (a vendored pack's, or the path it was read from).
    pub name: String,
    /// Its rule files, in order.
    pub rules: Vec<RuleFile>,
}

/// A pack that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The argument is neither a vendored pack nor a readable file or directory.
    #[error("`{0}` is not a vendored policy pack ({list}) nor a .guard file or directory", list = PolicyPack::BUILTIN.join(", "))]
    Unknown(String),
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A directory without `.guard` files.
    #[error("{0} holds no .guard files")]
    Empty(String),
    /// Not a regular file (a FIFO, a device, a directory inside the rules directory).
    #[error("{0} is not a regular file")]
    NotAFile(String),
    /// A rule file, or a directory of them, larger than rules need.
    #[error("{path} is over {limit} bytes of rules")]
    TooLarge {
        /// The file or directory.
        path: String,
        /// The limit.
        limit: u64,
    },
}

/// The most rule text read from one `--policy` argument: the vendored packs together are a
/// small fraction of it.
pub const MAX_RULE_BYTES: u64 = 4 * 1024 * 1024;

/// The longest line a rule file may have, in characters: Guard's parser measures a position's
/// column from its line's start, so a file of a few very long lines takes time quadratic in
/// their length (seconds for one of 600 KB); the vendored rules' lines are under 200.
pub const MAX_RULE_LINE: usize = 8192;

/// The most lines of rules (neither blank nor comments) Guard evaluates in one pack: Guard
/// keeps every clause's report in memory, so a file repeating one failing clause 25,000 times
/// took 2.7 s and 386 MiB; the vendored packs together hold about 1,000.
pub const MAX_RULE_LINES: usize = 5_000;

/// The lines of Guard rule text that are neither blank nor comments.
pub fn rule_lines(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            let l = l.trim_start();
            !l.is_empty() && !l.starts_with('#')
        })
        .count()
}

/// The deepest nesting of brackets (`[`, `{`, `(`) a rule file may have. Guard's parser
/// recurses once per level, so a small file of thousands of nested lists would overflow the
/// stack; the vendored rules nest at most a handful of levels.
pub const MAX_RULE_NESTING: usize = 64;

/// A `let` variable of Guard rule text whose value refers to itself, directly or through other
/// variables (`let a = Resources.*[ %a.Type == 'X' ]`): Guard resolves such a variable by
/// recursing without end, so the file is refused before Guard sees it. Returns the cycle
/// (`a -> b -> a`). Comments and strings are skipped; a variable's value runs from its `=` to
/// the end of the line on which its brackets close.
pub fn variable_cycle(text: &str) -> Option<String> {
    use std::collections::{BTreeMap, BTreeSet};
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let chars: Vec<char> = text.chars().collect();
    let mut refs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // The variables whose values are being read: (name, bracket depth at its `=`, whether a
    // token of the value was seen).
    let mut open: Vec<(String, usize, bool)> = Vec::new();
    let (mut i, mut depth) = (0usize, 0usize);
    let word_at = |i: usize| -> String { chars[i..].iter().take_while(|c| ident(**c)).collect() };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '"' | '\'' => {
                i += 1;
                while i < chars.len() && chars[i] != c {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            '[' | '{' | '(' => depth += 1,
            ']' | '}' | ')' => depth = depth.saturating_sub(1),
            '\n' => {
                open.retain(|(_, at, seen)| !(*seen && depth <= *at));
            }
            '%' => {
                let name = word_at(i + 1);
                for (variable, _, seen) in &mut open {
                    refs.entry(variable.clone())
                        .or_default()
                        .insert(name.clone());
                    *seen = true;
                }
                i += 1 + name.len();
                continue;
            }
            c if ident(c) && (i == 0 || !ident(chars[i - 1])) => {
                let word = word_at(i);
                i += word.len();
                if word == "let" {
                    let mut j = i;
                    while j < chars.len() && chars[j] == ' ' {
                        j += 1;
                    }
                    let name = word_at(j);
                    let mut k = j + name.len();
                    while k < chars.len() && chars[k] == ' ' {
                        k += 1;
                    }
                    if !name.is_empty() && chars.get(k) == Some(&'=') {
                        refs.entry(name.clone()).or_default();
                        open.push((name, depth, false));
                        i = k + 1;
                        continue;
                    }
                }
                for v in &mut open {
                    v.2 = true;
                }
                continue;
            }
            _ => {}
        }
        if !c.is_whitespace() && c != '=' {
            for v in &mut open {
                v.2 = true;
            }
        }
        i += 1;
    }
    // A cycle among the variables, by depth-first search.
    fn visit(
        name: &str,
        refs: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<String> {
        if let Some(at) = path.iter().position(|p| p == name) {
            let mut cycle = path[at..].to_vec();
            cycle.push(name.to_owned());
            return Some(cycle.join(" -> "));
        }
        if done.contains(name) {
            return None;
        }
        path.push(name.to_owned());
        for next in refs.get(name).into_iter().flatten() {
            if refs.contains_key(next) {
                if let Some(cycle) = visit(next, refs, path, done) {
                    return Some(cycle);
                }
            }
        }
        path.pop();
        done.insert(name.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    refs.keys()
        .find_map(|name| visit(name, &refs, &mut Vec::new(), &mut done))
}

/// The most a regular expression of a rule file may cost to compile, in the units of
/// [`regex_cost`] (about 0.5 µs each, measured with Guard's engine): Guard compiles a rule's
/// expression again for every value it compares, so an expression such as `/[\w\-]{1,451}/`
/// (350,000 units, 150 ms a compile) is paid once per resource. The vendored rules' costliest,
/// an ACM certificate ARN with `[\w\-]{1,64}`, costs 52,000 (26 ms).
pub const MAX_REGEX_COST: u64 = 60_000;

/// The most the regular expressions of one pack may cost together (about 1 s of compiling,
/// once each; Guard's parser may compile one several times). The vendored packs' cost about
/// 106,000 together.
pub const MAX_PACK_REGEX_COST: u64 = 2_000_000;

/// What compiling the regular expression `pattern` costs, in states of its automaton: each
/// literal byte and each range of a class is one, a counted repetition repeats its operand's
/// cost (Unicode classes such as `\w` hold hundreds of ranges, so `\w{50}` costs about
/// 38,000). Look-arounds and atomic groups, which only Guard's engine reads, are costed as
/// plain groups and back-references as nothing. `None` when the `regex` syntax does not parse
/// it even so: then [`repetition_cost`] bounds it.
pub fn regex_cost(pattern: &str) -> Option<u64> {
    use regex_syntax::hir::{Class, HirKind};
    fn cost(hir: &regex_syntax::hir::Hir) -> u64 {
        match hir.kind() {
            HirKind::Empty | HirKind::Look(_) => 1,
            HirKind::Literal(l) => l.0.len() as u64,
            HirKind::Class(Class::Unicode(c)) => c.ranges().len() as u64,
            HirKind::Class(Class::Bytes(c)) => c.ranges().len() as u64,
            HirKind::Repetition(r) => {
                let copies = r.max.unwrap_or(r.min.saturating_add(1)).max(1);
                cost(&r.sub).saturating_mul(u64::from(copies))
            }
            HirKind::Capture(c) => cost(&c.sub),
            HirKind::Concat(all) | HirKind::Alternation(all) => {
                all.iter().map(cost).fold(0u64, u64::saturating_add)
            }
        }
    }
    let parse = |p: &str| {
        regex_syntax::ParserBuilder::new()
            .nest_limit(MAX_RULE_NESTING as u32)
            .build()
            .parse(p)
            .ok()
    };
    let hir = parse(pattern).or_else(|| {
        let mut plain = pattern.to_owned();
        for group in ["(?<=", "(?<!", "(?=", "(?!", "(?>"] {
            plain = plain.replace(group, "(?:");
        }
        for n in 1..=9 {
            plain = plain.replace(&format!("\\{n}"), "");
        }
        parse(&plain)
    })?;
    Some(cost(&hir))
}

/// A bound on the cost of a pattern the `regex` syntax does not parse: the product of its
/// counted repetitions' counts (`{n}`, `{n,m}`: the larger), times the pattern's length, times
/// 1,000 (about the ranges of a Unicode class such as `\w`), as if every repetition applied to
/// the whole pattern and every character were such a class.
pub fn repetition_cost(pattern: &str) -> u64 {
    let bytes = pattern.as_bytes();
    let mut product = 1u64;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'{' {
            let counts: String = bytes[i + 1..]
                .iter()
                .take_while(|b| b.is_ascii_digit() || **b == b',')
                .map(|b| char::from(*b))
                .collect();
            let largest = counts
                .split(',')
                .filter_map(|n| n.parse::<u64>().ok())
                .max()
                .unwrap_or(1);
            product = product.saturating_mul(largest.max(1));
        }
        i += 1;
    }
    product
        .saturating_mul(pattern.len() as u64)
        .saturating_mul(1_000)
}

/// Skips the comment or string `c` opens in Guard rule text (`#` to the end of the line,
/// `'...'` or `"..."` with backslash escapes); whether it opened one.
fn skip_comment_or_string(c: char, chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> bool {
    match c {
        '#' => {
            for c in chars.by_ref() {
                if c == '\n' {
                    break;
                }
            }
            true
        }
        '"' | '\'' => {
            while let Some(next) = chars.next() {
                if next == '\\' {
                    chars.next();
                } else if next == c {
                    break;
                }
            }
            true
        }
        _ => false,
    }
}

/// The regular expressions of Guard rule text (`/.../`, a `\/` inside being a slash), outside
/// strings, comments and custom messages (`<< ... >>`), as Guard's parser reads them.
pub fn rule_regexes(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '<' if chars.peek() == Some(&'<') => {
                let mut previous = '\0';
                for c in chars.by_ref() {
                    if previous == '>' && c == '>' {
                        break;
                    }
                    previous = c;
                }
            }
            _ if skip_comment_or_string(c, &mut chars) => {}
            '/' => {
                let mut pattern = String::new();
                let mut closed = false;
                while let Some(c) = chars.next() {
                    if c == '\\' && chars.peek() == Some(&'/') {
                        chars.next();
                        pattern.push('/');
                    } else if c == '/' {
                        closed = true;
                        break;
                    } else {
                        pattern.push(c);
                    }
                }
                if closed {
                    found.push(pattern);
                }
            }
            _ => {}
        }
    }
    found
}

/// The costs of the regular expressions of Guard rule text ([`regex_cost`], else
/// [`repetition_cost`]).
pub fn regex_costs(text: &str) -> Vec<(String, u64)> {
    rule_regexes(text)
        .into_iter()
        .map(|p| {
            let cost = regex_cost(&p).unwrap_or_else(|| repetition_cost(&p));
            (p, cost)
        })
        .collect()
}

/// Why one of the regular expressions `costs` (from [`regex_costs`]) costs too much to compile,
/// when one passes [`MAX_REGEX_COST`].
pub fn costly_regex(costs: &[(String, u64)]) -> Option<String> {
    let (pattern, cost) = costs
        .iter()
        .filter(|(_, cost)| *cost > MAX_REGEX_COST)
        .max_by_key(|(_, cost)| *cost)?;
    let shown: String = pattern.chars().take(60).collect();
    let more = if shown.len() < pattern.len() {
        "..."
    } else {
        ""
    };
    Some(format!(
        "its regular expression `/{shown}{more}/` costs about {cost} automaton states to compile, and Guard compiles it again for every value it compares; at most {MAX_REGEX_COST} are accepted"
    ))
}

/// The deepest bracket nesting of Guard rule text, outside strings and comments (a bracket in
/// a regular expression counts: that overestimates, never underestimates).
pub fn rule_nesting(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            _ if skip_comment_or_string(c, &mut chars) => {}
            '[' | '{' | '(' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ']' | '}' | ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

impl PolicyPack {
    /// The names of the vendored packs.
    pub const BUILTIN: &'static [&'static str] = &["wa-security-pillar", "eks-kms"];

    /// A vendored pack by name.
    pub fn builtin(name: &str) -> Option<PolicyPack> {
        vendored::PACKS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(n, files)| PolicyPack {
                name: (*n).to_owned(),
                rules: files
                    .iter()
                    .map(|(origin, text)| RuleFile {
                        origin: (*origin).to_owned(),
                        text: (*text).to_owned(),
                    })
                    .collect(),
            })
    }

    /// The user's own rules: one `.guard` file, or every `.guard` file of a directory (in name
    /// order, not recursive).
    pub fn from_path(path: &Path) -> Result<PolicyPack, PolicyError> {
        let read_error = |p: &Path, source| PolicyError::Read {
            path: p.display().to_string(),
            source,
        };
        // Regular files only (a FIFO would block for ever), and a bounded amount of text, checked
        // before reading and while reading.
        let mut budget = MAX_RULE_BYTES;
        let mut read = |p: &Path| -> Result<String, PolicyError> {
            use std::io::Read;
            let meta = std::fs::metadata(p).map_err(|e| read_error(p, e))?;
            if !meta.is_file() {
                return Err(PolicyError::NotAFile(p.display().to_string()));
            }
            let too_large = || PolicyError::TooLarge {
                path: p.display().to_string(),
                limit: MAX_RULE_BYTES,
            };
            if meta.len() > budget {
                return Err(too_large());
            }
            let mut text = String::new();
            std::fs::File::open(p)
                .and_then(|f| f.take(budget + 1).read_to_string(&mut text))
                .map_err(|e| read_error(p, e))?;
            budget = budget
                .checked_sub(text.len() as u64)
                .ok_or_else(too_large)?;
            Ok(text)
        };
        let name = path.display().to_string();
        let files = if path.is_dir() {
            let mut files: Vec<_> = std::fs::read_dir(path)
                .map_err(|source| PolicyError::Read {
                    path: name.clone(),
                    source,
                })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "guard"))
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(PolicyError::Empty(name));
            }
            files
        } else {
            vec![path.to_owned()]
        };
        let rules = files
            .iter()
            .map(|p| {
                Ok(RuleFile {
                    origin: p.display().to_string(),
                    text: read(p)?,
                })
            })
            .collect::<Result<_, PolicyError>>()?;
        Ok(PolicyPack { name, rules })
    }

    /// A vendored pack by name, else a `.guard` file or directory at that path.
    pub fn load(name_or_path: &str) -> Result<PolicyPack, PolicyError> {
        if let Some(pack) = PolicyPack::builtin(name_or_path) {
            return Ok(pack);
        }
        let path = Path::new(name_or_path);
        if !path.exists() {
            return Err(PolicyError::Unknown(name_or_path.to_owned()));
        }
        PolicyPack::from_path(path)
    }

    /// The rules of every vendored pack.
    pub fn all_builtin() -> PolicyPack {
        PolicyPack {
            name: PolicyPack::BUILTIN.join("+"),
            rules: PolicyPack::BUILTIN
                .iter()
                .filter_map(|n| PolicyPack::builtin(n))
                .flat_map(|p| p.rules)
                .collect(),
        }
    }
}

/// How long one stack's templates took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackTiming {
    /// The stack's name.
    pub stack: String,
    /// Its CloudFormation templates.
    pub templates: usize,
    /// Time spent evaluating them.
    pub elapsed: Duration,
}

/// The result of [`Assembly::check_policies`].
#[derive(Clone, Debug, Default)]
pub struct PolicyReport {
    /// One [`Code::PolicyViolation`] per failed rule and resource, and one
    /// [`Code::PolicyRuleInvalid`] per rule file Guard could not parse or run.
    pub diagnostics: Diagnostics,
    /// Rule files evaluated against each template.
    pub rule_files: usize,
    /// Each stack's evaluation time.
    pub stacks: Vec<StackTiming>,
}

impl PolicyReport {
    /// CloudFormation templates evaluated.
    pub fn templates(&self) -> usize {
        self.stacks.iter().map(|s| s.templates).sum()
    }
}

impl Assembly {
    /// Evaluates `pack` over every CloudFormation template of the assembly: one Guard run per
    /// stack (its rules parsed once), every rule file over every template of the stack.
    pub fn check_policies(&self, pack: &PolicyPack) -> PolicyReport {
        let mut report = PolicyReport {
            rule_files: pack.rules.len(),
            ..PolicyReport::default()
        };
        let mut seen = BTreeSet::new();
        for stack in &self.manifest().stacks {
            let start = Instant::now();
            let templates: Vec<(&str, &str)> = stack
                .stages
                .iter()
                .flat_map(|s| s.artifacts())
                .filter(|a| a.format == ArtifactFormat::CloudFormation)
                .filter_map(|a| Some((a.path.as_str(), self.text(&a.path)?)))
                .collect();
            for d in check_templates(&templates, pack).iter() {
                // A rule file that does not parse is reported once, not once per stack.
                if d.code != Code::PolicyRuleInvalid || seen.insert(d.path.clone()) {
                    report.diagnostics.push(d.clone());
                }
            }
            report.stacks.push(StackTiming {
                stack: stack.name.clone(),
                templates: templates.len(),
                elapsed: start.elapsed(),
            });
        }
        report
    }
}

/// Evaluates `pack` over CloudFormation templates given as (path, JSON text), in one Guard run.
/// Findings are located at each resource's `Metadata.hyperforge:path` (else at
/// `path#LogicalId`).
pub fn check_templates(templates: &[(&str, &str)], pack: &PolicyPack) -> Diagnostics {
    let mut out = Diagnostics::new();
    if templates.is_empty() {
        return out;
    }
    let texts: Vec<&str> = templates.iter().map(|(_, t)| *t).collect();
    // Nesting is bounded before Guard's recursive parser sees a file.
    // So are line lengths (Guard's columns cost the line's length each), and every variable's
    // value must be free of itself (Guard would recurse without end on one).
    let mut rules = Vec::new();
    let (mut lines, mut compiling) = (0usize, 0u64);
    for rule in &pack.rules {
        let depth = rule_nesting(&rule.text);
        // Only the files evaluated count towards the pack's lines and compiling.
        let with_it = lines.saturating_add(rule_lines(&rule.text));
        let costs = regex_costs(&rule.text);
        let compiling_with_it = costs
            .iter()
            .fold(compiling, |total, (_, cost)| total.saturating_add(*cost));
        let longest = rule
            .text
            .lines()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0);
        // Why the file is refused, and what to do about it.
        let refused: Option<(String, String)> = if with_it > MAX_RULE_LINES {
            Some((
                format!("with it the pack holds {with_it} lines of rules; at most {MAX_RULE_LINES} are evaluated at once"),
                "split the rules over several --policy arguments".to_owned(),
            ))
        } else if longest > MAX_RULE_LINE {
            Some((
                format!(
                    "a line of it is {longest} characters long; at most {MAX_RULE_LINE} are read"
                ),
                "break the long line; Guard reads rules across lines".to_owned(),
            ))
        } else if depth > MAX_RULE_NESTING {
            Some((
                format!(
                    "its brackets nest {depth} levels deep; at most {MAX_RULE_NESTING} are read"
                ),
                "flatten the nesting, or split the rule into several".to_owned(),
            ))
        } else if let Some(why) = costly_regex(&costs) {
            Some((
                why,
                "write the expression without large counted repetitions of Unicode classes (`[0-9A-Za-z_-]{1,64}` rather than `[\\w\\-]{1,451}`)".to_owned(),
            ))
        } else if compiling_with_it > MAX_PACK_REGEX_COST {
            Some((
                format!("with it the pack's regular expressions cost about {compiling_with_it} automaton states to compile; at most {MAX_PACK_REGEX_COST} are compiled at once"),
                "split the rules over several --policy arguments, or use fewer or cheaper regular expressions".to_owned(),
            ))
        } else {
            variable_cycle(&rule.text).map(|cycle| {
                (
                    format!("its variables refer to themselves ({cycle}), which Guard cannot resolve"),
                    "define each variable from the template or from variables defined before it, never from itself".to_owned(),
                )
            })
        };
        match refused {
            Some((why, help)) => {
                let mut d = invalid_rule(&rule.origin, &why);
                d.help = help;
                out.push(d);
            }
            None => {
                lines = with_it;
                compiling = compiling_with_it;
                rules.push(rule.clone());
            }
        }
    }
    if rules.is_empty() {
        return out;
    }
    let pack = &PolicyPack {
        name: pack.name.clone(),
        rules,
    };
    // A user's rule file is input: should the engine panic on one, that is a diagnostic too.
    let evaluation =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| evaluate(&texts, pack)))
            .unwrap_or_else(|_| Err("the Guard engine panicked".to_owned()));
    match evaluation {
        Ok((files, errors)) => {
            for ((path, text), failures) in templates.iter().zip(files) {
                let template: Value = serde_json::from_str(text).unwrap_or(Value::Null);
                for f in failures {
                    for d in violations(&template, path, pack, f) {
                        out.push(d);
                    }
                }
            }
            for (origin, error) in errors {
                out.push(invalid_rule(&origin, &error));
            }
        }
        Err(e) => out.push(invalid_rule(&pack.name, &e)),
    }
    out
}

fn invalid_rule(origin: &str, error: &str) -> Diagnostic {
    Diagnostic::new(
        Code::PolicyRuleInvalid,
        origin,
        format!("Guard could not evaluate {origin}: {error}"),
        "Check the rule file with `cfn-guard parse-tree --rules FILE`.",
    )
}

/// A failed rule: its name, the template resources it names, its custom messages.
struct Failure {
    rule: String,
    resources: BTreeSet<String>,
    messages: Vec<String>,
}

/// The failed rules per template (in the order given), and the rule files Guard could not
/// parse (origin, Guard's error).
type Evaluation = (Vec<Vec<Failure>>, Vec<(String, String)>);

/// Runs every rule file of `pack` over `templates` in one Guard run (rules and data passed as
/// a payload, structured JSON out, all in memory).
fn evaluate(templates: &[&str], pack: &PolicyPack) -> Result<Evaluation, String> {
    use cfn_guard::commands::validate::OutputFormatType;
    use cfn_guard::commands::validate::ShowSummaryType;
    use cfn_guard::commands::Executable;
    use cfn_guard::utils::reader::{ReadBuffer, Reader};
    use cfn_guard::utils::writer::{WriteBuffer, Writer};
    use cfn_guard::CommandBuilder;

    let run = |rules: Vec<&str>, data: &[&str]| -> Result<Writer, String> {
        let payload = serde_json::json!({"rules": rules, "data": data});
        let command = cfn_guard::ValidateBuilder::default()
            .payload(true)
            .structured(true)
            .output_format(OutputFormatType::JSON)
            .show_summary(vec![ShowSummaryType::None])
            .try_build()
            .map_err(|e| e.to_string())?;
        let mut reader = Reader::new(ReadBuffer::Cursor(std::io::Cursor::new(
            payload.to_string().into_bytes(),
        )));
        let mut writer =
            Writer::new_with_err(WriteBuffer::Vec(Vec::new()), WriteBuffer::Vec(Vec::new()))
                .map_err(|e| e.to_string())?;
        command
            .execute(&mut writer, &mut reader)
            .map_err(|e| e.to_string())?;
        Ok(writer)
    };
    let rules = pack.rules.iter().map(|r| r.text.as_str()).collect();
    let out = run(rules, templates)?
        .into_string()
        .map_err(|e| e.to_string())?;
    let reports: Vec<Value> = serde_json::from_str(&out).map_err(|e| e.to_string())?;
    let files = reports
        .iter()
        .map(|report| {
            report["not_compliant"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("Rule"))
                .map(|r| {
                    let mut resources = BTreeSet::new();
                    let mut messages = Vec::new();
                    collect(r, &mut resources, &mut messages);
                    Failure {
                        rule: r["name"].as_str().unwrap_or_default().to_owned(),
                        resources,
                        messages,
                    }
                })
                .collect()
        })
        .collect();
    // Guard skips a rule file it cannot parse (and says so on its error stream): a file none
    // of whose rules appears in any report is run alone to read Guard's error.
    let seen: BTreeSet<&str> = reports
        .iter()
        .flat_map(|r| {
            let names = |key: &str| {
                r[key]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
            };
            let failed = r["not_compliant"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["Rule"]["name"].as_str());
            names("compliant")
                .into_iter()
                .chain(names("not_applicable"))
                .chain(failed)
                .collect::<Vec<_>>()
        })
        .collect();
    let mut errors = Vec::new();
    for rule in &pack.rules {
        let names = rule_names(&rule.text);
        if templates.is_empty() || names.iter().any(|n| seen.contains(n)) {
            continue;
        }
        let error = run(vec![rule.text.as_str()], &["{}"])?
            .err_to_stripped()
            .map_err(|e| e.to_string())?;
        let error = error.trim().trim_end_matches("---").trim();
        if !error.is_empty() {
            errors.push((
                rule.origin.clone(),
                error.lines().collect::<Vec<_>>().join(" "),
            ));
        }
    }
    Ok((files, errors))
}

/// Gathers the logical ids under `/Resources/` of every `path` and every custom message in a
/// rule's report.
fn collect(v: &Value, resources: &mut BTreeSet<String>, messages: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("path", Value::String(p)) => {
                        if let Some(id) = p
                            .strip_prefix("/Resources/")
                            .and_then(|rest| rest.split('/').next())
                        {
                            resources.insert(id.to_owned());
                        }
                    }
                    ("custom_message", Value::String(s)) => {
                        let s = s.trim().to_owned();
                        if !s.is_empty() && !messages.contains(&s) {
                            messages.push(s);
                        }
                    }
                    _ => collect(v, resources, messages),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect(v, resources, messages)),
        _ => {}
    }
}

/// The diagnostics for one failed rule: one at the construct path of each resource it names
/// (one at the template's path when it names none), with the rule's `Violation:` and `Fix:`
/// text.
fn violations(template: &Value, path: &str, pack: &PolicyPack, f: Failure) -> Vec<Diagnostic> {
    let origin = pack
        .rules
        .iter()
        .find(|r| defines(&r.text, &f.rule))
        .map_or(pack.name.as_str(), |r| r.origin.as_str());
    let (violation, fix) = split_message(&f.messages.join("\n"));
    let what = if violation.is_empty() {
        "the rule failed".to_owned()
    } else {
        violation
    };
    let help = if fix.is_empty() {
        format!("See the rule in {origin}.")
    } else {
        fix
    };
    let mut at: Vec<String> = f
        .resources
        .iter()
        .map(|id| {
            template["Resources"][id]["Metadata"]["hyperforge:path"]
                .as_str()
                .map_or_else(|| format!("{path}#{id}"), str::to_owned)
        })
        .collect();
    if at.is_empty() {
        at.push(path.to_owned());
    }
    at.into_iter()
        .map(|construct| {
            Diagnostic::new(
                Code::PolicyViolation,
                construct,
                format!("{}: {what}", f.rule),
                help.clone(),
            )
            .note(format!("rule {} from {origin}, in {path}", f.rule))
            .note(format!(
                "when it does not apply, acknowledge it on the resource with a reason (Guard \
                 reads it from Metadata.guard.SuppressedRules: {})",
                f.rule
            ))
        })
        .collect()
}

/// Splits a registry message (`Violation: ... Fix: ...`) into its two parts, one line each.
fn split_message(message: &str) -> (String, String) {
    let one_line = |s: &str| {
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        s.trim_matches(|c: char| c == ';' || c.is_whitespace())
            .to_owned()
    };
    match message.split_once("Fix:") {
        Some((v, fix)) => (
            one_line(
                v.trim()
                    .trim_matches(';')
                    .trim()
                    .trim_start_matches("Violation:"),
            ),
            one_line(fix),
        ),
        None => (
            one_line(
                message
                    .trim()
                    .trim_matches(';')
                    .trim()
                    .trim_start_matches("Violation:"),
            ),
            String::new(),
        ),
    }
}

/// The rules a Guard rule file declares (`rule NAME ...`).
fn rule_names(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some("rule")).then(|| words.next())?
        })
        .map(|name| name.trim_end_matches('{'))
        .collect()
}

/// Whether a Guard rule file declares the rule `name`.
fn defines(text: &str, name: &str) -> bool {
    rule_names(text).contains(&name)
}
