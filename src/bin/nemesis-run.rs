//! `nemesis-run`: starts the ranks of a nemesis job (in progress).

fn main() {
    eprintln!("nemesis-run: not built yet");
    std::process::exit(2);
}
