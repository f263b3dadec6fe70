//! `brevis-tui`: look inside `.brv` archives (docs/design.md §9).

fn main() {
    std::process::exit(brevis::tui::main_entry());
}
