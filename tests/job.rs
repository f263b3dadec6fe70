//! `brevis::job`: one call for a file and for a checkpoint folder, progress and warnings
//! through the observer, reports that serialize to what `--json` prints.

use brevis::archive::{DecompressOptions, ProgressEvent};
use brevis::job::{self, CompressDetail, ListReport, Observer, Silent, VerifyReport};
use brevis::synth::{PriorChoice, SearchOptions};
use brevis::CompressOptions;
use std::path::Path;
use std::sync::Mutex;

/// Every event, as text, in the order reported.
#[derive(Default)]
struct Record(Mutex<Vec<String>>);

impl Observer for Record {
    fn progress(&self, shard: &str, event: ProgressEvent<'_>) {
        let line = match event {
            ProgressEvent::Begin { items, bytes } => format!("begin {shard} {items} {bytes}"),
            ProgressEvent::Item { label, bytes } => format!("item {shard} {label} {bytes}"),
            ProgressEvent::End => format!("end {shard}"),
        };
        self.0.lock().unwrap().push(line);
    }

    fn warning(&self, text: &str) {
        self.0.lock().unwrap().push(format!("warning {text}"));
    }
}

/// A `.safetensors` file of two F32 tensors (`a`: [2], `b`: [1]), `trailing` bytes after
/// the data that no tensor owns.
fn write_source(path: &Path, trailing: &[u8]) {
    let header = br#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}"#;
    // Padded with spaces to a multiple of 8 bytes, as writers align the data.
    let mut text = header.to_vec();
    text.resize(header.len().next_multiple_of(8), b' ');
    let mut bytes = (text.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(&text);
    for v in [1.0f32, -0.0, 2.5] {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    bytes.extend_from_slice(trailing);
    std::fs::write(path, bytes).unwrap();
}

fn options() -> CompressOptions {
    CompressOptions {
        search: SearchOptions {
            budget: 0,
            ..SearchOptions::default()
        },
        prior: PriorChoice::Uniform,
        ..CompressOptions::default()
    }
}

#[test]
fn a_file_goes_through_compress_list_verify_and_decompress() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.safetensors");
    write_source(&src, &[]);
    let original = std::fs::read(&src).unwrap();
    let seen = Record::default();
    let r = job::compress(&src, None, &options(), &seen).unwrap();
    assert_eq!(r.output, dir.path().join("m.brv"));
    assert_eq!(r.original_bytes, original.len() as u64);
    assert_eq!(r.tensor_count(), 2);
    let events = seen.0.into_inner().unwrap();
    assert_eq!(
        events.first().unwrap(),
        &format!("begin  3 {}", original.len())
    );
    assert_eq!(events.last().unwrap(), "end ");
    assert!(events.contains(&"item  a 8".to_string()), "{events:?}");
    assert!(events.contains(&"item  b 4".to_string()), "{events:?}");

    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["tensors"][0]["name"], "a");
    assert_eq!(v["tensors"][1]["shape"], serde_json::json!([1]));
    assert_eq!(
        v["archive_bytes"],
        std::fs::metadata(&r.output).unwrap().len()
    );

    let ListReport::File(l) = job::list(&r.output, None, &Silent).unwrap() else {
        panic!("a file lists as a file");
    };
    assert!(l.ok);
    let names: Vec<&str> = l.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);

    let VerifyReport::File(v) = job::verify(&r.output, Some(&src), Some(1), None, &Silent).unwrap()
    else {
        panic!("a file verifies as a file");
    };
    assert!(v.ok && v.against.unwrap().identical);

    let out = dir.path().join("back.safetensors");
    let d = job::decompress(
        &r.output,
        Some(&out),
        &DecompressOptions::default(),
        &Silent,
    )
    .unwrap();
    assert_eq!(d.original_bytes, original.len() as u64);
    assert_eq!(std::fs::read(&out).unwrap(), original);
}

#[test]
fn a_folder_goes_through_the_same_calls() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("ckpt");
    std::fs::create_dir(&src).unwrap();
    write_source(&src.join("one.safetensors"), &[]);
    write_source(&src.join("two.safetensors"), &[7, 7]);
    std::fs::write(src.join("config.json"), b"{}\n").unwrap();
    let seen = Record::default();
    let r = job::compress(&src, None, &options(), &seen).unwrap();
    assert_eq!(r.output, dir.path().join("ckpt.brv"));
    let CompressDetail::Folder { shards, copied, .. } = &r.detail else {
        panic!("a folder compresses as a folder");
    };
    assert_eq!(shards.len(), 2);
    assert_eq!(copied, &["config.json".to_string()]);
    // The trailing bytes of `two` are kept, and said once, naming the shard.
    let warnings: Vec<String> = seen
        .0
        .into_inner()
        .unwrap()
        .into_iter()
        .filter(|e| e.starts_with("warning "))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("two.safetensors"), "{warnings:?}");
    assert_eq!(r.warnings.len(), 1);

    let VerifyReport::Folder(v) = job::verify(&r.output, Some(&src), None, None, &Silent).unwrap()
    else {
        panic!("a folder verifies as a folder");
    };
    assert!(v.ok);
    assert_eq!(v.files.len(), 3);

    let out = dir.path().join("restored");
    job::decompress(
        &r.output,
        Some(&out),
        &DecompressOptions::default(),
        &Silent,
    )
    .unwrap();
    for name in ["one.safetensors", "two.safetensors", "config.json"] {
        assert_eq!(
            std::fs::read(out.join(name)).unwrap(),
            std::fs::read(src.join(name)).unwrap()
        );
    }
}

#[test]
fn show_of_a_missing_tensor_is_a_refusal_with_its_kind() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.safetensors");
    write_source(&src, &[]);
    let r = job::compress(&src, None, &options(), &Silent).unwrap();
    let e = job::show(&r.output, "nope", None, &Silent).unwrap_err();
    assert_eq!(e.kind(), "no_such_tensor");
    let shown = job::show(&r.output, "b", None, &Silent).unwrap().unwrap();
    assert_eq!((shown.name.as_str(), shown.original_bytes), ("b", 4));
    assert_eq!(shown.nodes[0].depth, 0);
}
