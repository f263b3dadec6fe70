//! The literal codecs on a real BF16 checkpoint: rANS must come within 0.5% of the order-0
//! entropy bound of the exponent-carrying high byte, and every codec must round-trip.
//! Run with `--nocapture` to see the sizes.

use brevis::codec::{self, all_sizes, encode_best, select, CodecId, ALL_CODECS};
use brevis::stats::stream_entropy_bits;
use brevis::Words;

const FILE: &str = "../shared/corpus/minilm-l6-v2-bf16-layer0.safetensors";

/// The words of every BF16 tensor of a safetensors file, largest first.
fn bf16_tensors(path: &str) -> Option<Vec<(String, Words)>> {
    let bytes = std::fs::read(path).ok()?;
    let hlen = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?) as usize;
    let header: serde_json::Value = serde_json::from_slice(bytes.get(8..8 + hlen)?).ok()?;
    let data = bytes.get(8 + hlen..)?;
    let mut out = Vec::new();
    for (name, t) in header.as_object()? {
        if t.get("dtype").and_then(|d| d.as_str()) != Some("BF16") {
            continue;
        }
        let off = t.get("data_offsets")?.as_array()?;
        let (a, b) = (off[0].as_u64()? as usize, off[1].as_u64()? as usize);
        out.push((name.clone(), Words::from_le_bytes(16, data.get(a..b)?)?));
    }
    out.sort_by_key(|(_, w)| std::cmp::Reverse(w.len()));
    Some(out)
}

#[test]
fn rans_is_near_entropy_on_bf16_high_bytes() {
    let Some(tensors) = bf16_tensors(FILE) else {
        panic!("corpus file {FILE} missing or unreadable");
    };
    let (name, words) = &tensors[0];
    println!("{name}: {} BF16 words", words.len());
    let high = words.map_to(8, |w| w >> 8);
    let low = words.map_to(8, |w| w & 0xFF);
    for (label, w) in [
        ("high byte", &high),
        ("low byte", &low),
        ("bf16 word", words),
    ] {
        let n = w.len() as f64;
        let h = stream_entropy_bits(w, codec::MAX_TABLE_SYMBOLS).unwrap();
        let bound = h * n / 8.0;
        let sizes = all_sizes(w);
        // The rANS coder written at this length (`rans8` where the wide layout is for,
        // `rans` below), by its place in `ALL_CODECS` (the order of `sizes`).
        let written = match codec::rans::Layout::for_len(w.len()) {
            codec::rans::Layout::Wide => CodecId::Rans8,
            codec::rans::Layout::Classic => CodecId::Rans,
        };
        let rans_at = ALL_CODECS.iter().position(|&c| c == written).unwrap();
        let best = encode_best(w);
        println!(
            "{label:>9}: entropy {h:.4} bits/word, bound {bound:.0} B; raw {:?} bitpack {:?} \
             huffman {:?} rans {:?} ({:+.3}% vs bound); best {}",
            sizes[0].unwrap(),
            sizes[1].unwrap(),
            sizes[2],
            sizes[rans_at],
            (sizes[rans_at].unwrap() as f64 / bound - 1.0) * 100.0,
            best.codec.name(),
        );
        let rans = sizes[rans_at].unwrap() as f64;
        assert!(
            rans <= bound * 1.005,
            "{label}: rans {rans} vs bound {bound}"
        );
        assert!(rans >= bound, "{label}: below the entropy bound?");
        for (i, c) in ALL_CODECS.into_iter().enumerate() {
            let Some(e) = select::encode_with(c, w) else {
                assert_eq!(sizes[i], None, "{c:?}");
                continue;
            };
            match sizes[i] {
                Some(size) => assert_eq!(e.body.len() as u64, size, "{c:?}"),
                // A rANS coder not written at this length still encodes.
                None => assert!(
                    (c.rans_layout().is_some() || c == CodecId::Rans8) && i != rans_at,
                    "{c:?}"
                ),
            }
            assert_eq!(&codec::decode(c, &e.body, w.width(), w.len()).unwrap(), w);
        }
    }
    // Every BF16 tensor of the file round-trips through its best codec.
    for (name, w) in &tensors {
        for part in [
            w.map_to(8, |x| x >> 8),
            w.map_to(8, |x| x & 0xFF),
            w.clone(),
        ] {
            let e = encode_best(&part);
            let back = codec::decode(e.codec, &e.body, part.width(), part.len()).unwrap();
            assert_eq!(back, part, "{name}");
        }
    }
}
