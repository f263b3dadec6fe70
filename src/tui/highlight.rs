//! Syntax highlighting of the program text form with syntect, using the syntax
//! definition and theme shipped in `assets/` (embedded in the binary, so nothing is read
//! from disk at run time).

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use std::sync::OnceLock;
use syntect::easy::HighlightLines;
use syntect::highlighting::{FontStyle, Theme, ThemeSet};
use syntect::parsing::{SyntaxDefinition, SyntaxSet, SyntaxSetBuilder};
use syntect::util::LinesWithEndings;

/// The syntax definition of the text form.
pub const SYNTAX: &str = include_str!("../../assets/brevis.sublime-syntax");
/// The theme.
pub const THEME: &str = include_str!("../../assets/brevis.tmTheme");

struct Assets {
    syntaxes: SyntaxSet,
    theme: Theme,
}

fn assets() -> Option<&'static Assets> {
    static ASSETS: OnceLock<Option<Assets>> = OnceLock::new();
    ASSETS
        .get_or_init(|| {
            let def = SyntaxDefinition::load_from_str(SYNTAX, true, None).ok()?;
            let mut b = SyntaxSetBuilder::new();
            b.add(def);
            let theme = ThemeSet::load_from_reader(&mut std::io::Cursor::new(THEME)).ok()?;
            Some(Assets {
                syntaxes: b.build(),
                theme,
            })
        })
        .as_ref()
}

/// Whether the embedded syntax and theme load (they always should; a test checks).
pub fn available() -> bool {
    assets().is_some()
}

/// Highlights program text, one [`Line`] per line. Falls back to plain text if the
/// assets did not load or a line fails to parse.
pub fn highlight(text: &str) -> Vec<Line<'static>> {
    let Some(a) = assets() else {
        return text.lines().map(|l| Line::raw(l.to_string())).collect();
    };
    let Some(syntax) = a.syntaxes.syntaxes().first() else {
        return text.lines().map(|l| Line::raw(l.to_string())).collect();
    };
    let mut h = HighlightLines::new(syntax, &a.theme);
    let mut out = Vec::new();
    for line in LinesWithEndings::from(text) {
        let plain = line.trim_end_matches(['\n', '\r']).to_string();
        match h.highlight_line(line, &a.syntaxes) {
            Ok(regions) => {
                let spans: Vec<Span<'static>> = regions
                    .into_iter()
                    .map(|(st, s)| {
                        let s = s.trim_end_matches(['\n', '\r']).to_string();
                        let mut style = Style::default().fg(Color::Rgb(
                            st.foreground.r,
                            st.foreground.g,
                            st.foreground.b,
                        ));
                        if st.font_style.contains(FontStyle::BOLD) {
                            style = style.add_modifier(Modifier::BOLD);
                        }
                        Span::styled(s, style)
                    })
                    .filter(|s| !s.content.is_empty())
                    .collect();
                out.push(Line::from(spans));
            }
            Err(_) => out.push(Line::raw(plain)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_load_and_color_operators() {
        assert!(available());
        let lines = highlight("merge fields[1,8,7] : u16[6]\n  lit raw : u1[2] = [0, 1]\n");
        assert_eq!(lines.len(), 2);
        let text: String = lines[0].spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(text, "merge fields[1,8,7] : u16[6]");
        let op = &lines[0].spans[0];
        assert_eq!(op.content, "merge");
        assert_eq!(op.style.fg, Some(Color::Rgb(0xFF, 0x8A, 0x65)));
        let codec = lines[1].spans.iter().find(|s| s.content == "raw").unwrap();
        assert_eq!(codec.style.fg, Some(Color::Rgb(0xBA, 0x68, 0xC8)));
    }
}
