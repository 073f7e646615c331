//! Identifier conversion and doc comment sanitizing shared by the generators.

/// Splits an identifier-like string into words at non-alphanumeric characters and case
/// boundaries. Acronyms stay one word (`VPCCidrBlock` -> `VPC`, `Cidr`, `Block`); digits stick to
/// the preceding word (`Ipv6CidrBlock` -> `Ipv6`, `Cidr`, `Block`).
pub fn words(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut cur = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if c.is_ascii_uppercase() && !cur.is_empty() {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if prev.is_ascii_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_ascii_uppercase() && next_lower)
            {
                out.push(std::mem::take(&mut cur));
            }
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn capitalize(word: &str) -> String {
    let lower = word.to_ascii_lowercase();
    let mut chars = lower.chars();
    match chars.next() {
        Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
        None => String::new(),
    }
}

/// `VPCCidrBlock` -> `VpcCidrBlock`, `OIDCProvider` -> `OidcProvider`.
pub fn pascal(s: &str) -> String {
    let name: String = words(s).iter().map(|w| capitalize(w)).collect();
    if name.starts_with(|c: char| c.is_ascii_digit()) || name.is_empty() {
        format!("N{name}")
    } else {
        name
    }
}

/// `VPCCidrBlock` -> `vpc_cidr_block`.
pub fn snake(s: &str) -> String {
    let name = words(s)
        .iter()
        .map(|w| w.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join("_");
    if name.starts_with(|c: char| c.is_ascii_digit()) || name.is_empty() {
        format!("n{name}")
    } else {
        name
    }
}

const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "dyn", "else", "enum", "extern", "false",
    "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "static", "struct", "trait", "true", "type", "unsafe", "use", "where",
    "while", "abstract", "become", "box", "do", "final", "macro", "override", "priv", "try",
    "typeof", "unsized", "virtual", "yield",
];

/// A snake_case field identifier, raw (`r#type`) when it is a keyword.
pub fn field_ident(s: &str) -> String {
    let name = snake(s);
    match name.as_str() {
        "self" | "super" | "crate" | "Self" => format!("{name}_"),
        n if KEYWORDS.contains(&n) => format!("r#{name}"),
        _ => name,
    }
}

/// What serde's `rename_all = "camelCase"` makes of a snake_case field identifier.
pub fn serde_camel(ident: &str) -> String {
    let ident = ident.strip_prefix("r#").unwrap_or(ident);
    let mut out = String::new();
    let mut upper = false;
    for c in ident.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The `///` doc lines for a schema description: the first sentence (at most ~200 characters) on
/// one line, with markdown links reduced to their text, brackets and angle brackets escaped and
/// URLs wrapped in `<...>`. Returns `None` for empty descriptions.
pub fn doc(description: Option<&str>) -> Option<String> {
    let text = description?;
    let text: String = text
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .collect();
    let text = text
        .split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let text = strip_markdown_links(&text);
    // First sentence.
    let end = text
        .match_indices(". ")
        .map(|(i, _)| i)
        .find(|&i| {
            let before = &text[..i];
            !["e.g", "i.e", "etc", "vs", "Ex", "ex", "approx", "No"]
                .iter()
                .any(|abbr| before.ends_with(abbr))
        })
        .map_or(text.len(), |i| i + 1);
    let mut sentence: String = text[..end].to_string();
    if sentence.chars().count() > 200 {
        let cut: String = sentence.chars().take(200).collect();
        // Cut at a word boundary.
        let cut = match cut.rfind(' ') {
            Some(i) if i > 100 => cut[..i].to_string(),
            _ => cut,
        };
        sentence = format!("{cut}...");
    }
    if sentence.matches('`').count() % 2 == 1 {
        sentence = sentence.replace('`', "");
    }
    let sentence = sentence
        .trim_start_matches(['#', '+', '-', '*', ' ', '>', '|'])
        .trim()
        .to_string();
    if sentence.is_empty() || !sentence.chars().any(|c| c.is_alphanumeric()) {
        return None;
    }
    let mut out = Vec::new();
    for word in sentence.split(' ') {
        let start = word.find("https://").or_else(|| word.find("http://"));
        if let Some(start) = start {
            let (prefix, url) = word.split_at(start);
            let trimmed = url.trim_end_matches(['.', ',', ';', ')', ':', '\'', '"']);
            let rest = &url[trimmed.len()..];
            let trimmed = trimmed.replace(['<', '>', '`'], "");
            out.push(format!("{}<{trimmed}>{}", escape(prefix), escape(rest)));
        } else {
            out.push(escape(word));
        }
    }
    Some(out.join(" "))
}

fn escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '[' | ']' | '<' | '>' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// `[text](url)` -> `text`.
fn strip_markdown_links(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        match after.find("](") {
            Some(close) if !after[..close].contains('[') => {
                let link_rest = &after[close + 2..];
                match link_rest.find(')') {
                    Some(paren) => {
                        out.push_str(&rest[..open]);
                        out.push_str(&after[..close]);
                        rest = &link_rest[paren + 1..];
                    }
                    None => {
                        out.push_str(&rest[..open + 1]);
                        rest = after;
                    }
                }
            }
            _ => {
                out.push_str(&rest[..open + 1]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        assert_eq!(pascal("VPC"), "Vpc");
        assert_eq!(pascal("VPCCidrBlock"), "VpcCidrBlock");
        assert_eq!(pascal("OIDCProvider"), "OidcProvider");
        assert_eq!(pascal("EIP"), "Eip");
        assert_eq!(pascal("VPCGatewayAttachment"), "VpcGatewayAttachment");
        assert_eq!(snake("VPCCidrBlock"), "vpc_cidr_block");
        assert_eq!(snake("Ipv6CidrBlock"), "ipv6_cidr_block");
        assert_eq!(snake("KMSMasterKeyID"), "kms_master_key_id");
        assert_eq!(snake("commitSHA"), "commit_sha");
        assert_eq!(field_ident("Type"), "r#type");
        assert_eq!(serde_camel("r#type"), "type");
        assert_eq!(serde_camel("initial_replica_count"), "initialReplicaCount");
    }

    #[test]
    fn docs() {
        assert_eq!(
            doc(Some("See [the guide](https://x.y/z). More.")).as_deref(),
            Some("See the guide.")
        );
        assert_eq!(
            doc(Some("More info: https://k8s.io/docs#x")).as_deref(),
            Some("More info: <https://k8s.io/docs#x>")
        );
        assert_eq!(
            doc(Some("A webhook (https://github.com/x/y) inlines it.")).as_deref(),
            Some("A webhook (<https://github.com/x/y>) inlines it.")
        );
        assert_eq!(doc(Some("")), None);
    }
}
