//! The command line: clap's description of every command and its arguments, and how
//! they become the library's options.

use brevis::archive::{self, CompressOptions};
use brevis::job::{Destination, Input};
use brevis::synth::{Level, PriorChoice, SearchOptions};
use clap::{Args, Parser, Subcommand};
use std::path::{Path, PathBuf};

const ABOUT: &str = "Lossless compression of model checkpoints (.safetensors) as program synthesis";

const LONG_ABOUT: &str = "\
Lossless compression of model checkpoints (.safetensors) as program synthesis.

Every tensor becomes a short program in a small language of reversible operators (bit \
fields, deltas, repeats, literals coded by Huffman or rANS); decoding runs the program. \
The archive (.brv) restores the original file byte for byte, header and padding included, \
and stores checksums so a decode can be proved exact without the original.";

/// What `brevis --help` says after the list of commands: exit codes and conventions
/// (before the commands, it hid them under 20 lines of prose).
const AFTER_LONG_HELP: &str = "\
Exit codes: 0 success; 1 error: a file cannot be read or written, is not a valid \
.safetensors file or archive, or holds a program that cannot be decoded (the message \
names the file, the tensor and what is wrong); 2 usage error; 3 verification mismatch: \
decoded bytes differ from the stored checksums (or, with verify --against, from the \
original). verify exits 3 on any damage it finds in an archive it can open, decodable or \
not, and every command exits 3 on a tensor record that cannot be read or does not fit \
(a name that is not UTF-8, an unknown dtype, a shape that does not match its offsets) in \
an archive whose trailer and index are sound; decompress still restores, with a warning \
and exit 0, an archive whose only damage is in readable records when every restored byte \
matches its checksum. An archive too damaged to open (its header or index cut short or \
damaged; a folder's manifest changed, or a shard archive or copied file of it missing) \
is an error, exit 1. ls and show on a folder whose shard archives do not restore \
the files its manifest names warn and exit 3. A run stopped by SIGINT, SIGTERM or SIGHUP \
removes its temporary output and exits 128 + the signal (130, 143, 129); with --json it \
still prints its failure object (kind interrupted). decompress --salvage exits 3 when it \
wrote the file (or folder) with damaged tensors zero-filled (they are listed on stderr), \
and 1 when nothing can be salvaged (the header record is damaged, or, in an archive of \
format 3 or earlier, the index or trailer).

Unix conventions: `-` as compress's input reads the .safetensors file from standard \
input (whole, into memory; -o is then needed), and as the input of decompress, verify \
and ls reads the archive from it the same way (decompress then needs -o too); `-o -` \
writes decompress's, extract's or compress's output to standard output (messages go to \
standard error). A pipe is read as `-`, not by its path (`brevis compress <(cat f)` is \
refused, saying so). \
`-o DIR`, an existing folder, writes DIR/NAME.brv (compress) or DIR/<the original file \
name the archive records> (decompress). A character device such as /dev/null is \
written directly, with no temporary file. `brevis completions SHELL` and `brevis man` \
print shell completions and a man page.";

#[derive(Parser)]
#[command(
    name = "brevis",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_long_help = AFTER_LONG_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Compress a .safetensors file into a .brv archive
    #[command(long_about = "Compress a .safetensors file into a .brv archive.\n\n\
        The archive is written to a temporary file beside the output and renamed into \
        place when complete; an existing output is never replaced without --force, and \
        the input is never written. Bytes of the file that no tensor owns (gaps, trailing \
        bytes) are preserved and reported as warnings. The archive's bytes do not depend \
        on --jobs.")]
    Compress(CompressArgs),
    /// Restore the original .safetensors file (or checkpoint folder) from an archive
    #[command(
        long_about = "Restore the original .safetensors file from a .brv archive, or the \
        original checkpoint folder (every shard and every other file) from a compressed \
        folder.\n\n\
        Every tensor and the whole file are checked against the checksums stored in the \
        archive; nothing is written unless all match. Exit code 3 if decoded bytes \
        differ from a checksum or a tensor record is damaged, 1 if the archive is not \
        one, is cut short, or a program cannot be decoded.\n\n\
        With --salvage, a damaged tensor (or group of small tensors, gap, or 1 Mi-word \
        region of a large tensor) is zero-filled instead and named on stderr, every \
        other byte is written as it verifies, and the exit code is 3 if anything was \
        damaged (0 if nothing was), an archive restored without its index (cut off, \
        damaged or followed by other bytes, so the whole file could not be checked) \
        included. An archive cut short (an interrupted download) \
        restores every tensor whose record precedes the cut and names the others; a \
        folder archive restores every file, each with its damage named. An archive \
        whose header record is damaged cannot be salvaged, nor one of format 3 or \
        earlier whose index or trailer is (exit 1, nothing written).\n\n\
        OUT may be an existing folder (the file is written in it under the original \
        name the archive records), `-` for standard output (checked while written: a \
        damaged archive fails after the bytes before the damage were written; with \
        --salvage nothing unverified is written), or a character device such as \
        /dev/null (written directly)."
    )]
    Decompress(DecompressArgs),
    /// Write a .safetensors file of some tensors of an archive
    #[command(
        long_about = "Write a .safetensors file holding just the named tensors of an \
        archive (or compressed folder), decoded through the index one at a time and each \
        checked against its stored checksum. The original header's __metadata__ is kept, \
        the tensors keep their original order, dtypes and shapes, and their offsets are \
        rewritten. A name may be given as `brevis ls` prints it.\n\n\
        The file is written to a temporary file beside OUT and renamed into place when \
        complete; an existing OUT is never replaced without --force. A name the archive \
        does not hold is an error (exit 1) naming it and the nearest name it holds, and \
        nothing is written. `-o -` writes to standard output."
    )]
    Extract(ExtractArgs),
    /// Check that an archive decodes to exactly what was compressed
    #[command(
        long_about = "Check that an archive decodes to exactly what was compressed.\n\n\
        Decodes every tensor and compares it with the stored per-tensor and whole-file \
        checksums (xxh3-64); with --against, also compares the decoded file byte for \
        byte with ORIGINAL (for a folder archive, ORIGINAL is the original folder and \
        every file is compared). Exit code 3 if anything differs or cannot be decoded, \
        1 if the archive cannot be opened."
    )]
    Verify(VerifyArgs),
    /// List the tensors of an archive
    #[command(
        long_about = "List the tensors of an archive, one per line: dtype, shape, \
        original bytes, archive bytes, reduction and the program's root operator, then \
        the name (control characters escaped). Nothing is decoded."
    )]
    Ls(LsArgs),
    /// Show the program of one tensor and where its bytes go
    #[command(
        long_about = "Show the program of one tensor in the text form, then one row \
        per node: its line, its own bytes (tag, parameters, literal tables and payload), \
        the bytes of its subtree, and its share of the tensor's record. The rows add up \
        to the record exactly."
    )]
    Show(ShowArgs),
    /// Say where an archive's bytes go, or why one tensor costs what it does
    #[command(
        long_about = "Say where an archive's bytes go: every byte given one kind (coded \
        words up to and above each tensor's order-0 reference, codec tables, program \
        structure, record framing, the source header, gaps, the index), the bytes by \
        dtype and by role (embeddings, attention, MLP, norms, by name), the tensors \
        furthest above their references, and the structure the search found (copies, \
        references to a base, back references, dequantization) with what it saved. \
        Every record is decoded once. With TENSOR, the Why view of that tensor: its \
        record's bytes by part, bits per word against the references, and its program \
        node by node. With --json, the kinds (`bytes_by_kind`) add up to `archive_bytes` \
        exactly."
    )]
    Why(WhyArgs),
    /// Measure reduction and throughput on files, in memory
    #[command(
        long_about = "Measure reduction and throughput on .safetensors files, in \
        memory (no archive is written to disk): compress and decompress MB/s (10^6 bytes \
        of the original per second) with one worker thread and with all of them. A \
        checkpoint folder (or its model.safetensors.index.json) is measured shard by \
        shard, one row per .safetensors file in it."
    )]
    Bench(BenchArgs),
    /// Learn a production prior from a checkpoint (JSON a person can read and edit)
    #[command(long_about = "Learn a production prior from a checkpoint: search a \
        stratified sample of its tensors (at most 4, 6 expansions each, at most 1,048,576 \
        elements each) with uniform costs and count the productions of the winning \
        programs per context. The result is the same for any thread count.")]
    Calibrate(CalibrateArgs),
    /// Print shell completions for brevis (bash, zsh, fish, elvish, powershell)
    #[command(
        long_about = "Print a completion script for SHELL on standard output, made \
        from this program's own command-line definitions. Install it where your shell \
        looks, for example:\n\n  \
        brevis completions bash > ~/.local/share/bash-completion/completions/brevis\n  \
        brevis completions zsh > ~/.zfunc/_brevis\n  \
        brevis completions fish > ~/.config/fish/completions/brevis.fish"
    )]
    Completions(CompletionsArgs),
    /// Print the man page of brevis (roff)
    #[command(
        long_about = "Print the man page of brevis (roff, section 1) on standard \
        output, made from this program's own command-line definitions. Install it with, \
        for example: brevis man > ~/.local/share/man/man1/brevis.1"
    )]
    Man,
}

/// `--level`'s values: a name or its number.
fn level_parser(s: &str) -> Result<Level, String> {
    Level::parse(s)
        .ok_or_else(|| format!("unknown level {s:?}: use fast (1), default (2) or max (3)"))
}

#[derive(Args, Clone)]
pub struct SearchArgs {
    /// Compression level: fast (1) codes each tensor in a fixed layout of its dtype
    /// without searching (faster than ZipNN both ways, at least as small); default (2)
    /// searches at budget 1 (the smallest archives at about zstd's speed); max (3)
    /// searches at budget 4 with a prior calibrated on the input (slower, a little smaller)
    #[arg(long, value_name = "LEVEL", value_parser = level_parser, default_value = "default")]
    pub level: Level,
    /// Search budget: partial programs expanded per region of up to 1 Mi words (0 stores
    /// literals) [default: the level's: 1 at default, 4 at max; not with --level fast]
    #[arg(long, value_name = "N")]
    pub budget: Option<u64>,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub prior: PriorArgs,
}

/// The program-shape limits of the search, shared by `compress` and `bench`.
#[derive(Args, Clone)]
pub struct LimitArgs {
    /// Deepest program the search builds (a single node has depth 1; 1 to 32, the
    /// archive format's limit)
    #[arg(long, value_name = "N", default_value_t = SearchOptions::default().max_depth,
          value_parser = clap::value_parser!(u32).range(1..=brevis::dsl::wire::MAX_DEPTH as i64))]
    pub max_depth: u32,
    /// Most nodes in one program (1 to 65,536, the archive format's limit)
    #[arg(long, value_name = "N", default_value_t = SearchOptions::default().max_nodes,
          value_parser = clap::value_parser!(u32).range(1..=brevis::dsl::wire::MAX_NODES as i64))]
    pub max_nodes: u32,
}

impl LimitArgs {
    /// Search options with these limits and `budget` expansions.
    pub fn options(&self, budget: u64) -> SearchOptions {
        SearchOptions {
            budget,
            max_depth: self.max_depth,
            max_nodes: self.max_nodes,
            ..SearchOptions::default()
        }
    }
}

#[derive(Args, Clone)]
pub struct PriorArgs {
    /// Order the search by this production prior (JSON from `brevis calibrate`)
    /// [default: calibrate on the input when the budget is at least 2; at budget 1 the
    /// search expands only the root, which no prior reorders]
    #[arg(long, value_name = "FILE", conflicts_with = "uniform")]
    pub prior: Option<PathBuf>,
    /// Order the search with uniform production costs (no calibration)
    #[arg(long)]
    pub uniform: bool,
}

impl PriorArgs {
    pub fn choice(&self) -> brevis::Result<PriorChoice> {
        if self.uniform {
            return Ok(PriorChoice::Uniform);
        }
        match &self.prior {
            None => Ok(PriorChoice::Auto),
            Some(path) => brevis::job::read_prior(path),
        }
    }
}

impl SearchArgs {
    pub fn options(&self) -> SearchOptions {
        SearchOptions {
            level: self.level,
            ..self
                .limits
                .options(self.budget.unwrap_or(self.level.budget()))
        }
    }

    /// Refuses a budget with `--level fast`, which does not search.
    pub fn check(&self) -> Result<(), String> {
        match (self.level, self.budget) {
            (Level::Fast, Some(b)) => Err(format!(
                "--budget {b} with --level fast: the fast level does not search (drop \
                 --budget, or use --level default with it)"
            )),
            _ => Ok(()),
        }
    }
}

#[derive(Args)]
pub struct CompressArgs {
    /// The .safetensors file to compress, or a checkpoint folder (or its
    /// model.safetensors.index.json): every shard compressed, every other file kept; `-`
    /// reads the file from standard input (whole, into memory; -o is then needed)
    pub input: PathBuf,
    /// The archive to write; an existing folder: the archive inside it under the default
    /// name; `-`: standard output; a character device (/dev/null): written directly
    /// [default: INPUT with .safetensors replaced by .brv]
    #[arg(short, long, value_name = "OUT", value_parser = output_path)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub search: SearchArgs,
    /// Worker threads (0 = all cores, at most 256) [default: all cores]
    #[arg(short, long, value_name = "N", value_parser = jobs_parser())]
    pub jobs: Option<usize>,
    /// Replace the output if it exists: a regular file, or for a folder a previous
    /// archive folder (never a link, a device, the input, a folder holding the input, or
    /// a folder of other files)
    #[arg(short, long)]
    pub force: bool,
    /// Do not check each program against its tensor before writing it (about 13% faster on
    /// a BF16 checkpoint; the check is exact, and a program that would not restore its
    /// tensor is stored as a literal instead, with a warning)
    #[arg(long)]
    pub no_verify: bool,
    /// Code the tensors against a base checkpoint (the model a fine-tune was made from):
    /// a .safetensors file, a checkpoint folder, or an archive or compressed folder of
    /// one. Each tensor with a counterpart there (same name, else same dtype and shape)
    /// is stored as the smaller of its own program and a program of its XOR or
    /// difference with it; the archive pins the base by its checksums, and decompress,
    /// verify and extract then need the same base
    #[arg(long, value_name = "BASE")]
    pub base: Option<PathBuf>,
    /// Print a JSON summary on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct DecompressArgs {
    /// The .brv archive to decompress, or a compressed checkpoint folder; `-` reads the
    /// archive from standard input (whole, into memory; -o is then needed)
    pub input: PathBuf,
    /// The file (or, for a compressed folder, the folder) to write; for an archive, an
    /// existing folder: the file inside it under the original name the archive records;
    /// `-`: standard output; a character device (/dev/null): written directly [default:
    /// INPUT with .brv replaced by .safetensors; for a folder X.brv, X]
    #[arg(short, long, value_name = "OUT", value_parser = output_path)]
    pub output: Option<PathBuf>,
    /// Replace the output if it exists: a regular file, or for a folder one holding only
    /// files the archive restores (never a link, a device, or a folder holding the input
    /// or other files)
    #[arg(short, long)]
    pub force: bool,
    /// Restore a damaged archive as far as it goes: every tensor that matches its
    /// checksum is written, a damaged one (it does not decode, or does not match) is
    /// zero-filled and named on stderr (and in --json's "damaged"); exit 3 if any was.
    /// Needs the header record intact, and in an archive of format 3 or earlier the
    /// index and trailer too (exit 1 otherwise)
    #[arg(long)]
    pub salvage: bool,
    /// The base checkpoint the archive was compressed against (compress --base): a
    /// .safetensors file, a checkpoint folder, or an archive or compressed folder of one;
    /// another than the one the archive pins is refused before anything is written
    #[arg(long, value_name = "BASE")]
    pub base: Option<PathBuf>,
    /// Worker threads (0 = all cores, at most 256) [default: all cores]
    #[arg(short, long, value_name = "N", value_parser = jobs_parser())]
    pub jobs: Option<usize>,
    /// Print a JSON summary on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ExtractArgs {
    /// The .brv archive (or compressed folder) to take the tensors from
    pub input: PathBuf,
    /// The tensors to extract: their exact names, or as `brevis ls` prints them
    #[arg(required = true, value_name = "TENSOR")]
    pub tensors: Vec<String>,
    /// The .safetensors file to write; `-`: standard output; a character device
    /// (/dev/null): written directly
    #[arg(short, long, value_name = "OUT", value_parser = output_path, required = true)]
    pub output: PathBuf,
    /// Replace the output if it exists (a regular file only)
    #[arg(short, long)]
    pub force: bool,
    /// The base checkpoint the archive was compressed against (compress --base): a
    /// .safetensors file, a checkpoint folder, or an archive or compressed folder of one;
    /// another than the one the archive pins is refused before anything is written
    #[arg(long, value_name = "BASE")]
    pub base: Option<PathBuf>,
    /// Print a JSON summary on stdout (not with -o -)
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args)]
pub struct VerifyArgs {
    /// The .brv archive, or compressed checkpoint folder, to check; `-` reads the
    /// archive from standard input (whole, into memory)
    pub input: PathBuf,
    /// Also compare the decoded file byte for byte with this file (for a compressed
    /// folder: every file with the original folder, or its model.safetensors.index.json)
    #[arg(long, value_name = "ORIGINAL")]
    pub against: Option<PathBuf>,
    /// The base checkpoint the archive was compressed against (compress --base): a
    /// .safetensors file, a checkpoint folder, or an archive or compressed folder of one;
    /// another than the one the archive pins is refused before anything is written
    #[arg(long, value_name = "BASE")]
    pub base: Option<PathBuf>,

    /// Worker threads (0 = all cores, at most 256) [default: all cores]
    #[arg(short, long, value_name = "N", value_parser = jobs_parser())]
    pub jobs: Option<usize>,
    /// Print a JSON report on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct LsArgs {
    /// The .brv archive to list; `-` reads it from standard input (whole, into memory)
    pub input: PathBuf,
    /// The base checkpoint the archive was compressed against (compress --base), to
    /// name the base tensor each reference record uses; another than the one the archive
    /// pins is refused
    #[arg(long, value_name = "BASE")]
    pub base: Option<PathBuf>,
    /// Print JSON on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ShowArgs {
    /// The .brv archive
    pub input: PathBuf,
    /// The tensor's exact name
    pub tensor: String,
    /// The base checkpoint the archive was compressed against (compress --base), to
    /// name the base tensor each reference record uses; another than the one the archive
    /// pins is refused
    #[arg(long, value_name = "BASE")]
    pub base: Option<PathBuf>,
    /// Print JSON on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct WhyArgs {
    /// The .brv archive
    pub input: PathBuf,
    /// A tensor's name, as `brevis ls` prints it: the Why view of that tensor
    pub tensor: Option<String>,
    /// The base checkpoint the archive was compressed against (compress --base), to
    /// decode the tensors coded against it
    #[arg(long, value_name = "BASE")]
    pub base: Option<PathBuf>,
    /// Print JSON on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct BenchArgs {
    /// The .safetensors files to measure; a checkpoint folder (or its
    /// model.safetensors.index.json) stands for every .safetensors file in it
    #[arg(required = true, value_name = "FILE|DIR")]
    pub files: Vec<PathBuf>,
    /// Worker threads for the parallel runs (0 = all cores, at most 256) [default: all
    /// cores]
    #[arg(short, long, value_name = "N", value_parser = jobs_parser())]
    pub jobs: Option<usize>,
    /// Compression level, as compress takes it: fast (1), default (2) or max (3)
    #[arg(long, value_name = "LEVEL", value_parser = level_parser, default_value = "default")]
    pub level: Level,
    /// Search budgets to measure, one run each: repeat the option or separate by commas
    /// (`--budget 0,1,32`) [default: the level's; not with --level fast]
    #[arg(long, value_name = "N", value_delimiter = ',')]
    pub budget: Vec<u64>,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub prior: PriorArgs,
    /// With --json (required): add a search report per tensor (program, bytes per node,
    /// expansions, candidates, budget exhausted, literal fallback, time)
    #[arg(long, requires = "json")]
    pub report: bool,
    /// Print the search ablation table (markdown): budgets 0, 1, 6, 32, 256 with uniform
    /// and calibrated priors, and depth first to the first complete program (sets its
    /// own budgets and priors, so it takes none of --budget, --prior, --uniform, --json)
    #[arg(long, conflicts_with_all = ["budget", "json", "report", "prior", "uniform"])]
    pub ablation: bool,
    /// Timed runs of each direction (after one untimed warm-up run that also gives the
    /// archive); the median is reported, so one run disturbed by the machine does not move
    /// the figure
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: u32,
    /// Print JSON on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct CalibrateArgs {
    /// The .safetensors file to calibrate on, or a checkpoint folder (or its
    /// model.safetensors.index.json), calibrated on its first .safetensors file in path
    /// order (the prior file may not be written inside the folder)
    pub input: PathBuf,
    /// Where to write the prior (JSON)
    #[arg(short, long, value_name = "OUT", value_parser = file_output_path)]
    pub output: PathBuf,
    /// Replace the output if it exists
    #[arg(short, long)]
    pub force: bool,
}

/// Parses `--jobs`: 0 (all cores) to [`archive::MAX_JOBS`]; anything larger is a usage
/// error naming the range rather than a silent clamp.
pub fn jobs_parser() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(0..=archive::MAX_JOBS as u64)
}

/// The path that stands for standard input or output (`-`; a file of that name is
/// `./-`).
pub const STDIO: &str = "-";

/// Parses an output path: `-` is standard output ([`STDIO`]); an empty path is a usage
/// error.
pub fn output_path(s: &str) -> std::result::Result<PathBuf, String> {
    if s.is_empty() {
        return Err("the output path is empty; name a file".into());
    }
    Ok(PathBuf::from(s))
}

/// Parses the output path of a command that writes files only: `-` (standard output)
/// is a usage error rather than a file named `-`.
pub fn file_output_path(s: &str) -> std::result::Result<PathBuf, String> {
    if s == STDIO {
        return Err("writing to standard output is not supported; name a file".into());
    }
    output_path(s)
}

/// `path` as a [`Destination`]: `-` is standard output.
pub fn destination(path: Option<&Path>) -> Destination<'_> {
    match path {
        None => Destination::Default,
        Some(p) if p == Path::new(STDIO) => Destination::Stdout,
        Some(p) => Destination::Path(p),
    }
}

/// The archive a reading command (`decompress`, `verify`, `ls`) takes: `-` is standard
/// input, read whole into memory as `compress -` reads a checkpoint.
///
/// # Errors
/// A usage failure when `-` is given and standard input is a terminal.
pub fn archive_input<'a>(path: &'a Path, command: &str) -> anyhow::Result<Input<'a>> {
    use std::io::IsTerminal;
    if !is_stdio(Some(path)) {
        return Ok(Input::Path(path));
    }
    if std::io::stdin().is_terminal() {
        return Err(crate::failure(
            "usage",
            format!(
                "standard input is a terminal: pipe a .brv archive into \
                 `brevis {command} -` (or name the file)"
            ),
        ));
    }
    Ok(Input::Stdin)
}

/// Whether `path` is `-` (standard input or output).
pub fn is_stdio(path: Option<&Path>) -> bool {
    path.is_some_and(|p| p == Path::new(STDIO))
}

impl CompressArgs {
    /// The library's options for these arguments (the prior file is read here).
    pub fn options(&self) -> brevis::Result<CompressOptions> {
        Ok(CompressOptions {
            search: self.search.options(),
            jobs: self.jobs,
            force: self.force,
            verify: !self.no_verify,
            prior: self.search.prior.choice()?,
            file_name: None,
            links: match &self.base {
                Some(b) => Some(std::sync::Arc::new(archive::writer::Links {
                    base: Some(brevis::job::open_base(b)?),
                    ..Default::default()
                })),
                None => None,
            },
        })
    }
}

impl Command {
    /// Whether the command writes an output file (so an interruption says whether one
    /// was written).
    pub fn writes(&self) -> bool {
        matches!(
            self,
            Command::Compress(_)
                | Command::Decompress(_)
                | Command::Extract(_)
                | Command::Calibrate(_)
        )
    }

    /// Whether the command was asked to print JSON on stdout (`--json`).
    pub fn json(&self) -> bool {
        match self {
            Command::Compress(a) => a.json,
            Command::Decompress(a) => a.json,
            Command::Extract(a) => a.json,
            Command::Verify(a) => a.json,
            Command::Ls(a) => a.json,
            Command::Show(a) => a.json,
            Command::Why(a) => a.json,
            Command::Bench(a) => a.json,
            Command::Calibrate(_) | Command::Completions(_) | Command::Man => false,
        }
    }

    /// Refuses what clap cannot say: standard input without `-o`, `--json` with `-o -`
    /// (both would use standard output).
    ///
    /// # Errors
    /// A usage error (exit 2), as clap's own.
    pub fn check(self) -> Result<Command, clap::Error> {
        use clap::error::ErrorKind;
        use clap::CommandFactory;
        let usage = |kind: ErrorKind, msg: &str| Cli::command().error(kind, msg);
        // A command that reads an archive by its path only (it opens the index and reads
        // just the records it needs), given `-`.
        let file_only = match &self {
            Command::Show(a) => Some(("show", a.input.as_path())),
            Command::Why(a) => Some(("why", a.input.as_path())),
            Command::Extract(a) => Some(("extract", a.input.as_path())),
            _ => None,
        };
        if let Some((command, _)) = file_only.filter(|(_, input)| is_stdio(Some(input))) {
            return Err(usage(
                ErrorKind::InvalidValue,
                &format!(
                    "`brevis {command}` reads an archive from a file, not from standard input \
                     (`-`): save the archive to a file and name it (decompress, verify and ls \
                     read `-`)"
                ),
            ));
        }
        if let Command::Verify(a) = &self {
            if is_stdio(a.against.as_deref()) {
                return Err(usage(
                    ErrorKind::InvalidValue,
                    "--against reads the original from a file or folder, not from standard \
                     input (`-`): name the original (`brevis verify - --against ORIGINAL` \
                     reads the archive from standard input)",
                ));
            }
        }
        let (output, json) = match &self {
            Command::Compress(a) => {
                if is_stdio(Some(&a.input)) && a.output.is_none() {
                    return Err(usage(
                        ErrorKind::MissingRequiredArgument,
                        "reading from standard input (`-`) needs -o OUT: the archive's \
                         file name (or -o - for standard output); standard input has no \
                         name to make one from",
                    ));
                }
                (a.output.as_deref(), a.json)
            }
            Command::Decompress(a) => {
                if is_stdio(Some(&a.input)) && a.output.is_none() {
                    return Err(usage(
                        ErrorKind::MissingRequiredArgument,
                        "reading the archive from standard input (`-`) needs -o OUT: the \
                         file to restore (or -o - for standard output); standard input has \
                         no name to make one from",
                    ));
                }
                (a.output.as_deref(), a.json)
            }
            Command::Extract(a) => (Some(a.output.as_path()), a.json),
            _ => (None, false),
        };
        if json && is_stdio(output) {
            return Err(usage(
                ErrorKind::ArgumentConflict,
                "--json prints on standard output, which -o - takes for the data; \
                 write the output to a file, or leave out --json (messages go to \
                 standard error)",
            ));
        }
        Ok(self)
    }
}
