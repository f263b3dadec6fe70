//! `brevis-tui`: look inside `.brv` archives (DESIGN §9).

fn main() {
    std::process::exit(brevis::tui::main_entry());
}
