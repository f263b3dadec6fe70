//! Scratch: decode an archive in memory several ways and compare with the original.
use brevis::archive::{no_progress, Archive};
use std::path::Path;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (arc, orig) = (&args[1], &args[2]);
    let original = std::fs::read(orig).unwrap();
    let bytes = if arc.ends_with(".safetensors") {
        let src = brevis::archive::safetensors::parse(&original).unwrap();
        let opts = brevis::archive::CompressOptions {
            verify: false,
            jobs: Some(1),
            ..Default::default()
        };
        let mut out = Vec::new();
        brevis::archive::writer::write_archive(&src, &mut out, &opts, &no_progress, Path::new("x"))
            .unwrap();
        std::fs::write("/tmp/bench-made.brv", &out).unwrap();
        out
    } else {
        std::fs::read(arc).unwrap()
    };
    let a = Archive::from_bytes(bytes, Path::new(arc)).unwrap();
    for jobs in [1, 2, 1, 2] {
        let mut out = Vec::new();
        match a.write_original(&mut out, Some(jobs), &no_progress, Path::new("x")) {
            Ok(_) => println!("jobs {jobs}: ok, same {}", out == original),
            Err(e) => println!("jobs {jobs}: {e}"),
        }
    }
    for (i, t) in a.tensors().iter().enumerate() {
        let d = a.decode_tensor(i).unwrap();
        let hlen = u64::from_le_bytes(original[..8].try_into().unwrap()) as usize;
        let want = &original[8 + hlen + t.begin as usize..8 + hlen + t.end as usize];
        if d != want {
            println!(
                "tensor {} differs ({} {:?} root {})",
                t.name, t.dtype, t.shape, t.root_op
            );
        }
    }
}

#[allow(dead_code)]
fn unused() {}
