//! Tensors stored twice (issue 30), on real weights from `../shared/corpus`
//! (`minilm-l6-v2-bf16-layer0`): a tensor held twice under two names costs next to
//! nothing more than once; two checkpoints that differ in one tensor give archives whose
//! other records are the same bytes; and a copy in a second shard of a checkpoint folder
//! is stored once too.

#[path = "support/finetune.rs"]
mod finetune;
mod support;

use brevis::archive::folder::compress_folder;
use brevis::archive::{compress_file, no_progress, Archive, CompressOptions};
use finetune::Tensor;
use serde_json::{json, Map};
use std::path::Path;
use support::safetensors_bytes;
use support::CORPUS;

/// The tensors of the corpus file `name`, in data-offset order.
fn corpus_tensors(name: &str) -> Vec<Tensor> {
    let bytes = std::fs::read(Path::new(CORPUS).join(name))
        .unwrap_or_else(|e| panic!("read ../shared/corpus/{name}: {e}"));
    finetune::tensors_of(&bytes)
}

/// The largest tensor of the layer-0 checkpoint (1,179,648 bytes of BF16) and three
/// smaller ones, in that order.
fn base_tensors() -> Vec<Tensor> {
    let all = corpus_tensors("minilm-l6-v2-bf16-layer0.safetensors");
    let largest = all
        .iter()
        .find(|t| t.0 == "encoder.layer.0.intermediate.dense.weight")
        .unwrap()
        .clone();
    assert_eq!(largest.3.len(), 1_179_648);
    assert!(all.iter().all(|t| t.3.len() <= largest.3.len()));
    let mut out = vec![largest];
    for name in [
        "encoder.layer.0.attention.self.query.weight",
        "encoder.layer.0.attention.output.LayerNorm.weight",
        "encoder.layer.0.attention.output.LayerNorm.bias",
    ] {
        out.push(all.iter().find(|t| t.0 == name).expect(name).clone());
    }
    out
}

fn write(path: &Path, tensors: &[Tensor]) -> Vec<u8> {
    let list: Vec<(&str, &str, Vec<u64>, Vec<u8>)> = tensors
        .iter()
        .map(|(n, d, s, b)| (n.as_str(), d.as_str(), s.clone(), b.clone()))
        .collect();
    let bytes = safetensors_bytes(&list);
    std::fs::write(path, &bytes).unwrap();
    bytes
}

/// Compresses `input` at the default settings into `output`; returns the opened archive.
fn compress(input: &Path, output: &Path) -> Archive {
    compress_file(input, output, &CompressOptions::default(), &no_progress)
        .unwrap_or_else(|e| panic!("compress {}: {e}", input.display()));
    Archive::open(output).expect("open the archive")
}

fn restored(a: &Archive) -> Vec<u8> {
    let mut out = Vec::new();
    a.write_original(&mut out, Some(2), &no_progress, Path::new("out"))
        .expect("restore");
    out
}

/// (a) One real tensor held twice under two names costs at most 1% + 4,096 bytes more
/// than the file without the copy, is stored as a copy of the first, and restores byte
/// for byte.
#[test]
fn a_tensor_held_twice_costs_almost_nothing_more() {
    let dir = tempfile::tempdir().unwrap();
    let base = base_tensors();
    let mut twice = base.clone();
    let mut copy = base[0].clone();
    copy.0 = "copy.of.intermediate.dense.weight".into();
    twice.push(copy);
    let once_src = write(&dir.path().join("once.safetensors"), &base);
    let twice_src = write(&dir.path().join("twice.safetensors"), &twice);
    let once = compress(
        &dir.path().join("once.safetensors"),
        &dir.path().join("once.brv"),
    );
    let both = compress(
        &dir.path().join("twice.safetensors"),
        &dir.path().join("twice.brv"),
    );
    let (a, b) = (once.archive_len(), both.archive_len());
    eprintln!(
        "once: {} -> {a} bytes; twice: {} -> {b} bytes (+{})",
        once_src.len(),
        twice_src.len(),
        b - a
    );
    assert!(
        b <= a + a / 100 + 4096,
        "the copy costs {} bytes over {a}",
        b - a
    );
    let i = both.find("copy.of.intermediate.dense.weight").unwrap();
    let first = both
        .find("encoder.layer.0.intermediate.dense.weight")
        .unwrap();
    assert_eq!(both.tensors()[i].copy_of, Some(first));
    assert!(restored(&once) == once_src, "once: restored bytes differ");
    assert!(restored(&both) == twice_src, "twice: restored bytes differ");
    assert_eq!(both.decode_tensor(i).unwrap(), base[0].3);
}

/// A tensor that differs from an earlier one of the same length in one byte no sample
/// of the workers' duplicate key reads (the middle of a stride between its 64-byte
/// pieces) is claimed as a copy by its worker and left unencoded; the sink, which hashes
/// the whole record, sees it is not one and encodes it: it is not a copy, and the file
/// restores byte for byte, at both levels and with one or two workers.
#[test]
fn a_near_twin_the_sample_does_not_tell_apart_is_encoded_not_copied() {
    let dir = tempfile::tempdir().unwrap();
    let base = base_tensors();
    let mut twin = base[0].clone();
    twin.0 = "near.twin.of.intermediate.dense.weight".into();
    let n = twin.3.len();
    // The sample: 4 KiB at each end and 64 pieces of 64 bytes from 4 KiB on, `stride`
    // apart; this byte lies halfway between two pieces.
    let stride = (n - 2 * 4096 - 64) / 64;
    let at = 4096 + 10 * stride + stride / 2;
    twin.3[at] ^= 0x5a;
    let mut tensors = base.clone();
    tensors.push(twin.clone());
    let src = write(&dir.path().join("twins.safetensors"), &tensors);
    for (level, jobs) in [
        (brevis::synth::Level::Default, 1),
        (brevis::synth::Level::Fast, 1),
        (brevis::synth::Level::Fast, 2),
    ] {
        let mut opts = CompressOptions {
            jobs: Some(jobs),
            ..CompressOptions::default()
        };
        opts.search.level = level;
        opts.search.budget = level.budget();
        let out = dir
            .path()
            .join(format!("twins-{}-{jobs}.brv", level.name()));
        compress_file(
            &dir.path().join("twins.safetensors"),
            &out,
            &opts,
            &no_progress,
        )
        .unwrap_or_else(|e| panic!("compress: {e}"));
        let a = Archive::open(&out).unwrap();
        let i = a.find("near.twin.of.intermediate.dense.weight").unwrap();
        assert_eq!(a.tensors()[i].copy_of, None, "{level:?}, {jobs} jobs");
        assert_eq!(
            a.decode_tensor(i).unwrap(),
            twin.3,
            "{level:?}, {jobs} jobs"
        );
        assert!(
            restored(&a) == src,
            "{level:?}, {jobs} jobs: restored bytes differ"
        );
    }
}

/// (b) Two checkpoints that differ in exactly one tensor (every word of it with its low
/// bit flipped): every other tensor's record, found through the index, is the same bytes
/// in both archives, and the changed one's differs.
#[test]
fn one_changed_tensor_leaves_every_other_record_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let base = corpus_tensors("minilm-l6-v2-bf16-layer0.safetensors");
    let changed = "encoder.layer.0.attention.self.key.weight";
    let mut other = base.clone();
    let t = other.iter_mut().find(|t| t.0 == changed).unwrap();
    for w in t.3.chunks_mut(2) {
        w[0] ^= 1;
    }
    let src_a = write(&dir.path().join("a.safetensors"), &base);
    let src_b = write(&dir.path().join("b.safetensors"), &other);
    let a = compress(&dir.path().join("a.safetensors"), &dir.path().join("a.brv"));
    let b = compress(&dir.path().join("b.safetensors"), &dir.path().join("b.brv"));
    let bytes_a = std::fs::read(dir.path().join("a.brv")).unwrap();
    let bytes_b = std::fs::read(dir.path().join("b.brv")).unwrap();
    assert_eq!(a.tensors().len(), base.len());
    assert_eq!(b.tensors().len(), base.len());
    let mut same = 0;
    for (ta, tb) in a.tensors().iter().zip(b.tensors()) {
        assert_eq!(ta.name, tb.name);
        let equal = bytes_a[ta.record.clone()] == bytes_b[tb.record.clone()];
        if ta.name == changed {
            assert!(!equal, "{changed}: its record is the same");
            assert!(!ta.record.is_empty());
        } else {
            assert!(equal, "{}: its record differs", ta.name);
            same += 1;
        }
    }
    assert_eq!(same, base.len() - 1);
    eprintln!(
        "{} tensors; archives {} and {} bytes ({} and {} original), {same} records the same",
        base.len(),
        a.archive_len(),
        b.archive_len(),
        src_a.len(),
        src_b.len()
    );
    assert!(restored(&a) == src_a);
    assert!(restored(&b) == src_b);
}

fn write_folder(dir: &Path, shards: &[Vec<Tensor>]) {
    std::fs::create_dir(dir).unwrap();
    let k = shards.len();
    let mut weight_map = Map::new();
    let mut total = 0;
    for (s, tensors) in shards.iter().enumerate() {
        let file = format!("model-{:05}-of-{k:05}.safetensors", s + 1);
        write(&dir.join(&file), tensors);
        for t in tensors {
            weight_map.insert(t.0.clone(), json!(file));
            total += t.3.len();
        }
    }
    let index = json!({"metadata": {"total_size": total}, "weight_map": weight_map});
    std::fs::write(
        dir.join("model.safetensors.index.json"),
        serde_json::to_vec_pretty(&index).unwrap(),
    )
    .unwrap();
}

/// (c) A checkpoint folder of two shards, the second holding a copy of the first's
/// largest tensor: stored once across shards (a reference record to the first shard's
/// tensor), so the folder costs at most 5% + 16 KiB more than the one shard alone; the
/// folder restores byte for byte, and the second shard opened alone says it needs the
/// folder.
#[test]
fn a_copy_in_another_shard_is_stored_once() {
    use brevis::archive::folder::Folder;
    use brevis::archive::DecompressOptions;
    let dir = tempfile::tempdir().unwrap();
    let base = base_tensors();
    let mut copy = base[0].clone();
    copy.0 = "copy.of.intermediate.dense.weight".into();
    let one = dir.path().join("one");
    let two = dir.path().join("two");
    write_folder(&one, std::slice::from_ref(&base));
    write_folder(&two, &[base.clone(), vec![copy]]);
    let opts = CompressOptions::default();
    let s1 = compress_folder(&one, &dir.path().join("one.brv"), &opts, &|_, _| {}).unwrap();
    let s2 = compress_folder(&two, &dir.path().join("two.brv"), &opts, &|_, _| {}).unwrap();
    assert_eq!(s1.shards.len(), 1);
    assert_eq!(s2.shards.len(), 2);
    let bar = s1.archive_bytes + s1.archive_bytes / 20 + 16384;
    eprintln!(
        "one shard: {} -> {} bytes; two shards: {} -> {} bytes (second shard {}); bar 5% + \
         16 KiB = {bar}",
        s1.original_bytes,
        s1.archive_bytes,
        s2.original_bytes,
        s2.archive_bytes,
        s2.shards[1].archive_bytes,
    );
    assert_eq!(s2.shards[0].archive_bytes, s1.shards[0].archive_bytes);
    assert!(s2.archive_bytes <= bar, "{} > {bar}", s2.archive_bytes);
    // The second shard's tensor is a reference to the first shard's.
    let alone = Archive::open(&s2.shards[1].output).unwrap();
    let r = alone.tensors()[0].reference.expect("a reference record");
    assert_eq!(
        alone.sources()[r.source].name,
        "model-00001-of-00002.safetensors"
    );
    let e = alone.decode_tensor(0).unwrap_err();
    assert_eq!(e.kind(), "base_missing", "{e}");
    assert!(e.to_string().contains("open the folder"), "{e}");
    // Through the folder it decodes, and the folder restores byte for byte.
    let f = Folder::open(&dir.path().join("two.brv")).unwrap();
    let second = f.shards().nth(1).unwrap().clone();
    assert_eq!(
        f.open_shard(&second).unwrap().decode_tensor(0).unwrap(),
        base[0].3
    );
    let out = dir.path().join("restored");
    f.decompress_to(&out, &DecompressOptions::default(), &|_, _| {})
        .unwrap();
    for name in [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
    ] {
        assert!(
            std::fs::read(out.join(name)).unwrap() == std::fs::read(two.join(name)).unwrap(),
            "{name} differs"
        );
    }
}
