//! The progress bar on stderr that the long commands draw, and lines printed above it.

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar of `total` steps on stderr (drawn only on a terminal).
pub fn progress(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:32}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// Prints `line` on stderr above the progress bar (or plainly, when the bar is not drawn).
pub fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() { eprintln!("{line}") } else { bar.println(line) }
}
