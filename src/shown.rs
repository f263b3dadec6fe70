//! How names and paths are shown on a terminal: control and bidirectional characters
//! escaped, so a tensor or file name cannot recolour the terminal or fake a line.

use std::borrow::Cow;

/// A tensor name made safe to print on a terminal: control characters (C0, DEL, C1) and
/// backslashes are escaped (`\n`, `\x1b`, `\u{9b}`, `\\`), and so are the bidirectional
/// formatting characters that reorder the text after them (`\u{202e}`, ...); everything
/// else is kept.
pub fn escape_name(name: &str) -> Cow<'_, str> {
    if !name
        .chars()
        .any(|c| c.is_control() || c == '\\' || is_bidi(c))
    {
        return Cow::Borrowed(name);
    }
    let mut s = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            '\0' => s.push_str("\\0"),
            c if (c as u32) < 0x80 && c.is_control() => {
                s.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() || is_bidi(c) => s.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => s.push(c),
        }
    }
    Cow::Owned(s)
}

/// A path made safe to print on a terminal, as [`escape_name`] makes a tensor name (its
/// text lossy where it is not UTF-8): a file name holding an escape sequence, a bell or
/// a line break cannot recolour the terminal or fake a line of output.
pub fn shown_path(path: &std::path::Path) -> String {
    escape_name(&path.to_string_lossy()).into_owned()
}

/// Bidirectional formatting characters (marks, embeddings, overrides, isolates).
pub fn is_bidi(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_name_neutralises_terminal_controls() {
        assert_eq!(escape_name("a.weight"), "a.weight");
        assert_eq!(
            escape_name("x\u{1b}]0;t\u{7}\u{9b}2J\0\\"),
            "x\\x1b]0;t\\x07\\u{9b}2J\\0\\\\"
        );
        assert_eq!(escape_name("a\u{202e}b\u{2066}"), "a\\u{202e}b\\u{2066}");
    }
}
