//! `brevis-tui`: look inside `.brv` archives (docs/design.md §9).

fn main() {
    brevis::keep_freed_memory();
    std::process::exit(brevis::tui::main_entry());
}
