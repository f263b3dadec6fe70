//! Text formatting shared by the commands: percentages, shapes, column widths.

pub use brevis::job::{mb_per_s, percent_smaller, plural};

/// Width of a column: its widest cell, at least `min` (the header's width).
pub fn col_width(cells: impl Iterator<Item = usize>, min: usize) -> usize {
    cells.max().unwrap_or(0).max(min)
}

/// "34.1%"; a small growth that one decimal would show as "-0.0%" gets two ("-0.02%").
pub fn fmt_percent(p: Option<f64>) -> String {
    match p {
        Some(p) if p < 0.0 && p > -0.05 => format!("{p:.2}%"),
        Some(p) => format!("{p:.1}%"),
        None => "-".to_string(),
    }
}

/// The REDUCTION column of `ls`: [`fmt_percent`] of how much smaller the record is than
/// the tensor; a record larger than its tensor shows how many bytes larger (`+5 B`): a
/// 2-byte scalar in a 7-byte record is the record's fixed cost (its framing and checksum),
/// which a percentage of 2 bytes (-250.0%) overstates.
pub fn fmt_reduction(original: u64, archive: u64) -> String {
    if archive > original {
        return format!("+{} B", archive - original);
    }
    fmt_percent(percent_smaller(original, archive))
}

/// "34.1% smaller", or "30.9% larger" when the archive grew ("-" for an empty input).
pub fn fmt_change(p: Option<f64>) -> String {
    match p {
        Some(p) if p < 0.0 => format!("{:.1}% larger", -p),
        Some(p) => format!("{p:.1}% smaller"),
        None => "-".to_string(),
    }
}

/// `[2,3]`.
pub fn fmt_shape(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(","))
}
