//! Issue 30's fine-tune pairs made from real weights, and the comparison with BitX.
//!
//! For a base `.safetensors` file, one fine-tune per construction of
//! `tests/support/finetune.rs` (a merged low-rank adapter, a few optimizer steps, a
//! retrained head, a tied copy):
//!
//! ```text
//! cargo run --release --example finetunes -- BASE.safetensors OUT_DIR            # write them
//! cargo run --release --example finetunes -- --compare BASE.safetensors OUT_DIR  # and compare
//! ```
//!
//! writes `OUT_DIR/KIND.safetensors` for each kind; with `--compare` it also prints one
//! Markdown row per pair: the fine-tune's bytes, BitX's (ZipLLM's XOR with the base, two
//! byte planes for BF16, zstd level 3 per plane), Brevis alone and Brevis `--base`, each
//! restored and checked byte for byte.

#[path = "../tests/support/finetune.rs"]
mod finetune;
#[path = "../tests/support/safetensors.rs"]
mod support;

use brevis::archive::base::BaseSet;
use brevis::archive::writer::{write_archive, Links};
use brevis::archive::{no_progress, Archive, CompressOptions};
use std::path::Path;
use std::sync::Arc;

fn archive_of(bytes: &[u8], opts: &CompressOptions) -> Vec<u8> {
    let src = brevis::archive::safetensors::parse(bytes).expect("a valid file");
    let mut out = Vec::new();
    write_archive(&src, &mut out, opts, &no_progress, Path::new("ft")).expect("compress");
    out
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let compare = args.first().is_some_and(|a| a == "--compare");
    if compare {
        args.remove(0);
    }
    let [base, out] = args.as_slice() else {
        eprintln!("usage: finetunes [--compare] BASE.safetensors OUT_DIR");
        std::process::exit(2);
    };
    let bytes = std::fs::read(base).unwrap_or_else(|e| {
        eprintln!("error: {base}: {e}");
        std::process::exit(1)
    });
    let tensors = finetune::tensors_of(&bytes);
    std::fs::create_dir_all(out).expect("create the output folder");
    let set = Arc::new(BaseSet::open(Path::new(base)).expect("open the base"));
    let with_base = CompressOptions {
        links: Some(Arc::new(Links {
            base: Some(set.clone()),
            ..Links::default()
        })),
        ..CompressOptions::default()
    };
    let name = Path::new(base).file_name().unwrap().to_string_lossy();
    if compare {
        println!("| base | fine-tune | bytes | BitX | Brevis alone | Brevis --base | vs BitX |");
        println!("| --- | --- | ---: | ---: | ---: | ---: | ---: |");
    }
    for kind in finetune::KINDS {
        let ft = finetune::make(kind, &tensors);
        let list: Vec<(&str, &str, Vec<u64>, Vec<u8>)> = ft
            .iter()
            .map(|(n, d, s, b)| (n.as_str(), d.as_str(), s.clone(), b.clone()))
            .collect();
        let file = support::safetensors_bytes(&list);
        let path = Path::new(out).join(format!("{kind}.safetensors"));
        std::fs::write(&path, &file).expect("write");
        if !compare {
            println!("{}", path.display());
            continue;
        }
        let bitx = finetune::bitx_bytes(&ft, &tensors);
        let alone = archive_of(&file, &CompressOptions::default()).len();
        let ours = archive_of(&file, &with_base);
        let a = Archive::from_bytes(ours.clone(), "ft.brv").expect("open");
        a.attach_base(&set).expect("attach");
        let mut back = Vec::new();
        a.write_original(&mut back, None, &no_progress, Path::new("out"))
            .expect("restore");
        assert!(back == file, "{kind}: restored bytes differ");
        let commas = |n: u64| {
            let s = n.to_string();
            let mut out = String::new();
            for (i, c) in s.chars().enumerate() {
                if i > 0 && (s.len() - i).is_multiple_of(3) {
                    out.push(',');
                }
                out.push(c);
            }
            out
        };
        println!(
            "| {name} | {kind} | {} | {} | {} | {} | {:+.1}% |",
            commas(file.len() as u64),
            commas(bitx),
            commas(alone as u64),
            commas(ours.len() as u64),
            100.0 * (ours.len() as f64 / bitx as f64 - 1.0)
        );
    }
}
