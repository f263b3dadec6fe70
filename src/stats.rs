//! Histograms and empirical entropies of word streams, shared by the literal codecs, the
//! synthesizer's size estimates and the TUI's "why this size" view.

use crate::tensor::{WordBuf, Words};
use std::collections::HashMap;

/// Counts of each distinct word, sorted by word value ascending.
///
/// Returns `None` when the stream has more than `max_distinct` distinct words (the
/// counting stops early, so a wide stream with many values costs little).
pub fn histogram(words: &Words, max_distinct: usize) -> Option<Vec<(u64, u64)>> {
    fn dense<T: Copy + Into<u64>>(v: &[T], size: usize, max_distinct: usize) -> Option<Vec<(u64, u64)>>
    where
        usize: From<T>,
    {
        let mut counts = vec![0u64; size];
        for &x in v {
            counts[usize::from(x)] += 1;
        }
        let out: Vec<(u64, u64)> = counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(s, &c)| (s as u64, c))
            .collect();
        (out.len() <= max_distinct).then_some(out)
    }
    match words.buf() {
        WordBuf::U8(v) => dense(v, 256, max_distinct),
        WordBuf::U16(v) => dense(v, 65_536, max_distinct),
        WordBuf::U32(v) => sparse(v.iter().map(|&x| x as u64), max_distinct),
        WordBuf::U64(v) => sparse(v.iter().copied(), max_distinct),
    }
}

fn sparse(it: impl Iterator<Item = u64>, max_distinct: usize) -> Option<Vec<(u64, u64)>> {
    let mut map: HashMap<u64, u64> = HashMap::new();
    for x in it {
        *map.entry(x).or_insert(0) += 1;
        if map.len() > max_distinct {
            return None;
        }
    }
    let mut out: Vec<(u64, u64)> = map.into_iter().collect();
    out.sort_unstable();
    Some(out)
}

/// Order-0 empirical entropy in bits per word of a histogram (0 for an empty one).
pub fn entropy_bits(counts: impl IntoIterator<Item = u64> + Clone) -> f64 {
    let total: u64 = counts.clone().into_iter().sum();
    if total == 0 {
        return 0.0;
    }
    let t = total as f64;
    let mut h = 0.0;
    for c in counts {
        if c > 0 {
            let p = c as f64 / t;
            h -= p * p.log2();
        }
    }
    h
}

/// Order-0 empirical entropy of a stream in bits per word, or `None` if it has more than
/// `max_distinct` distinct words.
pub fn stream_entropy_bits(words: &Words, max_distinct: usize) -> Option<f64> {
    histogram(words, max_distinct).map(|h| entropy_bits(h.iter().map(|&(_, c)| c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_and_entropy_exact() {
        let w = Words::from_u64s(16, &[3, 1, 3, 3, 1, 2, 3, 3]);
        assert_eq!(histogram(&w, 10).unwrap(), vec![(1, 2), (2, 1), (3, 5)]);
        assert!(histogram(&w, 2).is_none());
        let two = Words::from_u64s(1, &[0, 1, 0, 1]);
        assert_eq!(stream_entropy_bits(&two, 10), Some(1.0));
        let w32 = Words::from_u64s(32, &[7, 7, 9]);
        assert_eq!(histogram(&w32, 2).unwrap(), vec![(7, 2), (9, 1)]);
        assert_eq!(entropy_bits([4u64]), 0.0);
    }
}
