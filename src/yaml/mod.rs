//! YAML text of a JSON value: the Kubernetes stages, the Helm values files and the alert
//! manager definitions are written with it.
//!
//! The text is byte for byte what `serde_norway::to_string` (libyaml's emitter, as
//! serde_norway configures it: UTF-8, unicode allowed, no line width, two-space indentation)
//! writes for the same value, over three times faster: the emitter walks the value itself
//! rather than a stream of events, and decides each scalar's style with the same rules.
//!
//! - A string is written plain unless it would read back as something else (null, `~`, a
//!   boolean, an integer in any base, a float, or digits with a leading zero: single-quoted,
//!   as serde_norway asks), or libyaml's analysis forbids plain style (indicators, leading or
//!   trailing spaces, line breaks: single-quoted; characters single quotes cannot hold, such
//!   as a tab, a control character or a space next to a line break: double-quoted with escapes).
//! - A string holding `\n` is a literal block (`|`, `|-` or `|+`, with an indentation indicator
//!   when it starts with a space or a break), or double-quoted where a block cannot hold it.
//! - Mappings and sequences are block style (a sequence that is a mapping's value is not
//!   indented further); empty ones are `{}` and `[]`. A key longer than 128 bytes or holding a
//!   line break is written as a complex key (`? key` then `: value`).
//! - The document has neither `---` nor `...`.
//!
//! `tests/it/yaml.rs` compares it with serde_norway on generated values.

use serde_json::Value;

/// The YAML text of `value`, as `serde_norway::to_string` writes it.
pub fn to_string(value: &Value) -> String {
    let mut out = String::with_capacity(1024);
    push(&mut out, value);
    out
}

/// Appends the YAML text of `value` (as [`to_string`]) to `out`.
pub fn push(out: &mut String, value: &Value) {
    let mut emitter = Emitter {
        out,
        column: 0,
        indent: -1,
        indents: Vec::with_capacity(16),
        whitespace: true,
        indention: true,
    };
    emitter.node(value, false, false);
    // The document's implicit end. (serde_norway's `to_string` ends no stream, so libyaml
    // never writes the `...` a kept trailing break would call for.)
    emitter.write_indent();
}

/// The style serde_norway asks for, or the one libyaml settles on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Style {
    /// serde_norway's "any": plain when libyaml allows it.
    Any,
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
}

/// libyaml's analysis of a scalar (`yaml_emitter_analyze_scalar`), the parts the emitter of a
/// block-style document reads.
struct Analysis {
    multiline: bool,
    block_plain_allowed: bool,
    single_quoted_allowed: bool,
    block_allowed: bool,
    /// Every character is ASCII (so the column advances by its length in bytes).
    ascii: bool,
}

/// A line break as libyaml reads one.
fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// libyaml's `IS_PRINTABLE` (on a whole character of valid UTF-8).
fn is_printable(c: char) -> bool {
    matches!(c, '\n' | ' '..='~' | '\u{A0}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
        && c != '\u{FEFF}'
}

/// The character starting at byte `at` of `value` is blank, a break, NUL, or the end.
fn blankz_at(value: &str, at: usize) -> bool {
    match value.as_bytes().get(at) {
        None => true,
        Some(b' ' | b'\t' | b'\0' | b'\r' | b'\n') => true,
        Some(b) if *b < 0x80 => false,
        Some(_) => value[at..].chars().next().is_some_and(is_break),
    }
}

/// Bytes that change nothing in [`analyze`] but the previous-character state, past the
/// first: printable ASCII other than the space, `:` and `#`.
const ORDINARY: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0x21;
    while b < 0x7F {
        table[b] = b != b':' as usize && b != b'#' as usize;
        b += 1;
    }
    table
};

/// libyaml's `yaml_emitter_analyze_scalar`, over bytes: ASCII characters are read as bytes,
/// others decoded (none of them is an indicator).
fn analyze(value: &str) -> Analysis {
    let bytes = value.as_bytes();
    if bytes.is_empty() {
        return Analysis {
            multiline: false,
            block_plain_allowed: true,
            single_quoted_allowed: true,
            block_allowed: false,
            ascii: true,
        };
    }
    let mut block_indicators = value.starts_with("---") || value.starts_with("...");
    let mut line_breaks = false;
    let mut special_characters = false;
    let mut leading_space = false;
    let mut leading_break = false;
    let mut trailing_space = false;
    let mut trailing_break = false;
    let mut break_space = false;
    let mut space_break = false;
    let mut previous_space = false;
    let mut previous_break = false;
    let mut preceded_by_whitespace = true;
    let mut ascii = true;
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        if at > 0 && ORDINARY[usize::from(byte)] {
            // Printable ASCII, not blank, no indicator past the first character.
            previous_space = false;
            previous_break = false;
            preceded_by_whitespace = false;
            at += 1;
            continue;
        }
        let (width, space, brk, blankz, printable) = if byte < 0x80 {
            let brk = byte == b'\n' || byte == b'\r';
            let space = byte == b' ';
            (
                1,
                space,
                brk,
                space || brk || byte == b'\t' || byte == 0,
                byte == b'\n' || (0x20..0x7F).contains(&byte),
            )
        } else {
            ascii = false;
            let c = value[at..].chars().next().unwrap_or('\0');
            let brk = is_break(c);
            (c.len_utf8(), false, brk, brk, is_printable(c))
        };
        let first = at == 0;
        let next = at + width;
        let last = next == bytes.len();
        if byte < 0x80 {
            if first {
                match byte {
                    b'#' | b',' | b'[' | b']' | b'{' | b'}' | b'&' | b'*' | b'!' | b'|' | b'>'
                    | b'\'' | b'"' | b'%' | b'@' | b'`' => block_indicators = true,
                    b'?' | b':' | b'-' if blankz_at(value, next) => block_indicators = true,
                    _ => {}
                }
            } else if (byte == b':' && blankz_at(value, next))
                || (byte == b'#' && preceded_by_whitespace)
            {
                block_indicators = true;
            }
        }
        if !printable {
            special_characters = true;
        }
        if space {
            leading_space |= first;
            trailing_space |= last;
            break_space |= previous_break;
            previous_space = true;
            previous_break = false;
        } else if brk {
            line_breaks = true;
            leading_break |= first;
            trailing_break |= last;
            space_break |= previous_space;
            previous_space = false;
            previous_break = true;
        } else {
            previous_space = false;
            previous_break = false;
        }
        preceded_by_whitespace = blankz;
        at = next;
    }
    let mut analysis = Analysis {
        multiline: line_breaks,
        block_plain_allowed: true,
        single_quoted_allowed: true,
        block_allowed: true,
        ascii,
    };
    if leading_space || leading_break || trailing_space || trailing_break {
        analysis.block_plain_allowed = false;
    }
    if trailing_space {
        analysis.block_allowed = false;
    }
    if break_space {
        analysis.block_plain_allowed = false;
        analysis.single_quoted_allowed = false;
    }
    if space_break || special_characters {
        analysis.block_plain_allowed = false;
        analysis.single_quoted_allowed = false;
        analysis.block_allowed = false;
    }
    if line_breaks || block_indicators {
        analysis.block_plain_allowed = false;
    }
    analysis
}

/// The style serde_norway asks libyaml for when it serializes the string `value`: a literal
/// block for text with `\n`, single quotes for what would read back as another type, else any.
fn requested_style(value: &str) -> Style {
    if value.contains('\n') {
        Style::Literal
    } else if reads_as_other_type(value) {
        Style::SingleQuoted
    } else {
        Style::Any
    }
}

/// serde_norway's reading of an untagged plain scalar (`visit_untagged_scalar`) gives
/// something other than a string: null, a boolean, an integer, a float; or digits with a
/// leading zero, which it quotes too.
fn reads_as_other_type(v: &str) -> bool {
    let Some(&first) = v.as_bytes().first() else {
        return true;
    };
    // Every null, boolean and number spelling starts with one of these (`inf` and `nan`
    // parse as floats but are not finite, so they do not count).
    if !(first.is_ascii_digit() || b"+-.~nNtTfF".contains(&first)) {
        return false;
    }
    matches!(v, "null" | "Null" | "NULL" | "~")
        || matches!(v, "true" | "True" | "TRUE" | "false" | "False" | "FALSE")
        || parse_unsigned_int(v, u128::from_str_radix).is_some()
        || parse_negative_int(v, i128::from_str_radix).is_some()
        || digits_but_not_number(v)
        || parse_f64(v).is_some()
}

// serde_norway's scalar readings (src/de.rs), kept to the letter: integers in the widest types
// it tries (a string reading as a `u64` reads as a `u128` too), so the same strings are quoted.

fn parse_unsigned_int<T>(
    scalar: &str,
    from_str_radix: fn(&str, u32) -> Result<T, std::num::ParseIntError>,
) -> Option<T> {
    let unpositive = scalar.strip_prefix('+').unwrap_or(scalar);
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(rest) = unpositive.strip_prefix(prefix) {
            if rest.starts_with(['+', '-']) {
                return None;
            }
            if let Ok(int) = from_str_radix(rest, radix) {
                return Some(int);
            }
        }
    }
    if unpositive.starts_with(['+', '-']) {
        return None;
    }
    if digits_but_not_number(scalar) {
        return None;
    }
    from_str_radix(unpositive, 10).ok()
}

fn parse_negative_int<T>(
    scalar: &str,
    from_str_radix: fn(&str, u32) -> Result<T, std::num::ParseIntError>,
) -> Option<T> {
    for (prefix, radix) in [("-0x", 16), ("-0o", 8), ("-0b", 2)] {
        if let Some(rest) = scalar.strip_prefix(prefix) {
            let negative = format!("-{rest}");
            if let Ok(int) = from_str_radix(&negative, radix) {
                return Some(int);
            }
        }
    }
    if digits_but_not_number(scalar) {
        return None;
    }
    from_str_radix(scalar, 10).ok()
}

fn parse_f64(scalar: &str) -> Option<f64> {
    let unpositive = if let Some(unpositive) = scalar.strip_prefix('+') {
        if unpositive.starts_with(['+', '-']) {
            return None;
        }
        unpositive
    } else {
        scalar
    };
    if let ".inf" | ".Inf" | ".INF" = unpositive {
        return Some(f64::INFINITY);
    }
    if let "-.inf" | "-.Inf" | "-.INF" = scalar {
        return Some(f64::NEG_INFINITY);
    }
    if let ".nan" | ".NaN" | ".NAN" = scalar {
        return Some(f64::NAN);
    }
    match unpositive.parse::<f64>() {
        Ok(float) if float.is_finite() => Some(float),
        _ => None,
    }
}

fn digits_but_not_number(scalar: &str) -> bool {
    let scalar = scalar.strip_prefix(['-', '+']).unwrap_or(scalar);
    scalar.len() > 1 && scalar.starts_with('0') && scalar[1..].bytes().all(|b| b.is_ascii_digit())
}

/// libyaml's emitter state for one block-style document (`yaml_emitter_t`, the fields the
/// output depends on). The column counts characters, as libyaml's does.
struct Emitter<'o> {
    out: &'o mut String,
    column: i64,
    indent: i64,
    indents: Vec<i64>,
    whitespace: bool,
    indention: bool,
}

/// The number of characters of `value`.
fn char_count(value: &str, a: &Analysis) -> usize {
    if a.ascii {
        value.len()
    } else {
        value.chars().count()
    }
}

const SPACES: &str = "                                                                ";

impl Emitter<'_> {
    fn increase_indent(&mut self, flow: bool, indentless: bool) {
        self.indents.push(self.indent);
        if self.indent < 0 {
            self.indent = if flow { 2 } else { 0 };
        } else if !indentless {
            self.indent += 2;
        }
    }

    fn pop_indent(&mut self) {
        self.indent = self.indents.pop().unwrap_or(-1);
    }

    fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
    }

    /// Text without breaks, `chars` characters long.
    fn put_str(&mut self, text: &str, chars: usize) {
        self.out.push_str(text);
        self.column += chars as i64;
    }

    fn write_break(&mut self, c: char) {
        if c == '\n' {
            self.put_break();
        } else {
            self.out.push(c);
            self.column = 0;
        }
    }

    fn write_indent(&mut self) {
        let indent = self.indent.max(0);
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        while self.column < indent {
            let n = ((indent - self.column) as usize).min(SPACES.len());
            self.put_str(&SPACES[..n], n);
        }
        self.whitespace = true;
        self.indention = true;
    }

    fn write_indicator(
        &mut self,
        indicator: &str,
        need_whitespace: bool,
        is_whitespace: bool,
        is_indention: bool,
    ) {
        if need_whitespace && !self.whitespace {
            self.put(' ');
        }
        self.put_str(indicator, indicator.len());
        self.whitespace = is_whitespace;
        self.indention = self.indention && is_indention;
    }

    /// One node: `mapping` and `simple_key` are libyaml's mapping and simple-key contexts.
    fn node(&mut self, value: &Value, mapping: bool, simple_key: bool) {
        match value {
            Value::Null => self.scalar("null", Style::Plain, simple_key),
            Value::Bool(b) => {
                self.scalar(if *b { "true" } else { "false" }, Style::Plain, simple_key)
            }
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    self.scalar(itoa::Buffer::new().format(u), Style::Plain, simple_key);
                } else if let Some(i) = n.as_i64() {
                    self.scalar(itoa::Buffer::new().format(i), Style::Plain, simple_key);
                } else {
                    let f = n.as_f64().unwrap_or(f64::NAN);
                    let mut buffer = ryu::Buffer::new();
                    let text = if f.is_nan() {
                        ".nan"
                    } else if f.is_infinite() {
                        if f > 0.0 {
                            ".inf"
                        } else {
                            "-.inf"
                        }
                    } else {
                        buffer.format_finite(f)
                    };
                    self.scalar(text, Style::Plain, simple_key);
                }
            }
            Value::String(s) => self.scalar(s, requested_style(s), simple_key),
            Value::Array(items) if items.is_empty() => {
                self.write_indicator("[", true, true, false);
                self.write_indicator("]", false, false, false);
            }
            Value::Array(items) => {
                self.increase_indent(false, mapping && !self.indention);
                for item in items {
                    self.write_indent();
                    self.write_indicator("-", true, false, true);
                    self.node(item, false, false);
                }
                self.pop_indent();
            }
            Value::Object(map) if map.is_empty() => {
                self.write_indicator("{", true, true, false);
                self.write_indicator("}", false, false, false);
            }
            Value::Object(map) => {
                self.increase_indent(false, false);
                for (key, value) in map {
                    self.write_indent();
                    let analysis = analyze(key);
                    if !analysis.multiline && key.len() <= 128 {
                        self.analyzed_scalar(key, &analysis, requested_style(key), true);
                        self.write_indicator(":", false, false, false);
                    } else {
                        self.write_indicator("?", true, false, true);
                        self.analyzed_scalar(key, &analysis, requested_style(key), false);
                        self.write_indent();
                        self.write_indicator(":", true, false, true);
                    }
                    self.node(value, true, false);
                }
                self.pop_indent();
            }
        }
    }

    fn scalar(&mut self, value: &str, requested: Style, simple_key: bool) {
        let analysis = analyze(value);
        self.analyzed_scalar(value, &analysis, requested, simple_key);
    }

    /// libyaml's `yaml_emitter_select_scalar_style` and `yaml_emitter_process_scalar`, in a
    /// block context.
    fn analyzed_scalar(&mut self, value: &str, a: &Analysis, requested: Style, simple_key: bool) {
        let mut style = match requested {
            Style::Any => Style::Plain,
            other => other,
        };
        if simple_key && a.multiline {
            style = Style::DoubleQuoted;
        }
        if style == Style::Plain && (!a.block_plain_allowed || (value.is_empty() && simple_key)) {
            style = Style::SingleQuoted;
        }
        if style == Style::SingleQuoted && !a.single_quoted_allowed {
            style = Style::DoubleQuoted;
        }
        if style == Style::Literal && (!a.block_allowed || simple_key) {
            style = Style::DoubleQuoted;
        }
        self.increase_indent(true, false);
        match style {
            Style::Plain | Style::Any => self.write_plain(value, a),
            Style::SingleQuoted => self.write_single_quoted(value, a),
            Style::DoubleQuoted => self.write_double_quoted(value),
            Style::Literal => self.write_literal(value, a),
        }
        self.pop_indent();
    }

    fn write_plain(&mut self, value: &str, a: &Analysis) {
        if !self.whitespace && !value.is_empty() {
            self.put(' ');
        }
        if a.multiline {
            // Not reached from the styles chosen above (a plain scalar has no breaks); kept
            // as libyaml writes one.
            let mut breaks = false;
            for c in value.chars() {
                if is_break(c) {
                    if !breaks && c == '\n' {
                        self.put_break();
                    }
                    self.write_break(c);
                    self.indention = true;
                    breaks = true;
                } else {
                    if breaks {
                        self.write_indent();
                    }
                    self.put(c);
                    self.indention = false;
                    breaks = false;
                }
            }
        } else {
            self.put_str(value, char_count(value, a));
        }
        self.whitespace = false;
        self.indention = false;
    }

    fn write_single_quoted(&mut self, value: &str, a: &Analysis) {
        self.write_indicator("'", true, false, false);
        if !a.multiline && !value.contains('\'') {
            self.put_str(value, char_count(value, a));
        } else {
            let mut breaks = false;
            for c in value.chars() {
                if is_break(c) {
                    if !breaks && c == '\n' {
                        self.put_break();
                    }
                    self.write_break(c);
                    self.indention = true;
                    breaks = true;
                } else {
                    if breaks {
                        self.write_indent();
                    }
                    if c == '\'' {
                        self.put('\'');
                    }
                    self.put(c);
                    self.indention = false;
                    breaks = false;
                }
            }
            if breaks {
                self.write_indent();
            }
        }
        self.write_indicator("'", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn write_double_quoted(&mut self, value: &str) {
        self.write_indicator("\"", true, false, false);
        for c in value.chars() {
            if !is_printable(c) || is_break(c) || c == '"' || c == '\\' {
                self.put('\\');
                let code = c as u32;
                let short = match code {
                    0x00 => Some('0'),
                    0x07 => Some('a'),
                    0x08 => Some('b'),
                    0x09 => Some('t'),
                    0x0A => Some('n'),
                    0x0B => Some('v'),
                    0x0C => Some('f'),
                    0x0D => Some('r'),
                    0x1B => Some('e'),
                    0x22 => Some('"'),
                    0x5C => Some('\\'),
                    0x85 => Some('N'),
                    0xA0 => Some('_'),
                    0x2028 => Some('L'),
                    0x2029 => Some('P'),
                    _ => None,
                };
                if let Some(short) = short {
                    self.put(short);
                } else {
                    let (letter, width) = if code <= 0xFF {
                        ('x', 2)
                    } else if code <= 0xFFFF {
                        ('u', 4)
                    } else {
                        ('U', 8)
                    };
                    self.put(letter);
                    for k in (0..width).rev() {
                        let digit = (code >> (k * 4)) & 0x0F;
                        self.put(
                            char::from_digit(digit, 16).map_or('0', |d| d.to_ascii_uppercase()),
                        );
                    }
                }
            } else {
                self.put(c);
            }
        }
        self.write_indicator("\"", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn write_literal(&mut self, value: &str, a: &Analysis) {
        self.write_indicator("|", true, false, false);
        // The block scalar's hints: indentation when the text starts with a space or a break,
        // then chomping (strip, clip or keep) from how many breaks end it.
        let mut chars = value.chars();
        if let Some(first) = value.chars().next() {
            if first == ' ' || is_break(first) {
                self.write_indicator("2", false, false, false);
            }
        }
        let keep = match chars.next_back() {
            None => Some(false),
            Some(last) if !is_break(last) => Some(false),
            Some(_) => match chars.next_back() {
                None => Some(true),
                Some(before) if is_break(before) => Some(true),
                Some(_) => None,
            },
        };
        match keep {
            Some(false) => self.write_indicator("-", false, false, false),
            Some(true) => self.write_indicator("+", false, false, false),
            None => {}
        }
        self.put_break();
        self.indention = true;
        self.whitespace = true;
        if a.ascii && !value.contains('\r') {
            // Only `\n` breaks: found with memchr.
            for line in value.split_inclusive('\n') {
                self.literal_line(line, a);
            }
        } else {
            for line in value.split_inclusive(is_break) {
                self.literal_line(line, a);
            }
        }
    }

    /// One line of a literal block, with the break ending it if any.
    fn literal_line(&mut self, line: &str, a: &Analysis) {
        let (text, end) = match line.char_indices().next_back() {
            Some((at, c)) if is_break(c) => (&line[..at], Some(c)),
            _ => (line, None),
        };
        if !text.is_empty() {
            self.write_indent();
            self.put_str(text, char_count(text, a));
            self.indention = false;
        }
        if let Some(c) = end {
            self.write_break(c);
            self.indention = true;
        }
    }
}

#[cfg(test)]
mod conformance;
