//! Writes issue 30's fine-tune pairs made from real weights: for a base `.safetensors`
//! file, one fine-tune per construction of `tests/support/finetune.rs` (a merged
//! low-rank adapter, a few optimizer steps, a retrained head, a tied copy).
//!
//! ```text
//! cargo run --release --example finetunes -- BASE.safetensors OUT_DIR
//! ```
//!
//! writes `OUT_DIR/KIND.safetensors` for each kind; `scripts/vs_bitx.py` compares them.

#[path = "../tests/support/finetune.rs"]
mod finetune;
#[path = "../tests/support/safetensors.rs"]
mod support;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [base, out] = args.as_slice() else {
        eprintln!("usage: finetunes BASE.safetensors OUT_DIR");
        std::process::exit(2);
    };
    let bytes = std::fs::read(base).unwrap_or_else(|e| {
        eprintln!("error: {base}: {e}");
        std::process::exit(1)
    });
    let tensors = finetune::tensors_of(&bytes);
    std::fs::create_dir_all(out).expect("create the output folder");
    for kind in finetune::KINDS {
        let ft = finetune::make(kind, &tensors);
        let list: Vec<(&str, &str, Vec<u64>, Vec<u8>)> = ft
            .iter()
            .map(|(n, d, s, b)| (n.as_str(), d.as_str(), s.clone(), b.clone()))
            .collect();
        let path = std::path::Path::new(out).join(format!("{kind}.safetensors"));
        std::fs::write(&path, support::safetensors_bytes(&list)).expect("write");
        println!("{}", path.display());
    }
}
