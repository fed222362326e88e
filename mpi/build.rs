//! Links `libmpi.so` with its SONAME and gives it its other names next to it.
//!
//! - SONAME `libmpi.so.0`: programs linked by `bin/mpicc` (`-lmpi`) record that name.
//! - `libmpi.so.0`, `libmpich.so.12` and `libmpi.so.12` beside `libmpi.so` in the profile's
//!   directory (symbolic links, made before the library is linked and valid once it is): the
//!   first for those programs; the others for programs built against MPICH, which this library
//!   runs unchanged (same handles, constants and status layout): Debian's `mpicc.mpich` links
//!   `libmpich.so.12`, while upstream MPICH, Intel MPI and Spack's MPICH install `libmpi.so.12`
//!   (the SONAME mpi4py's PyPI wheel needs).
//!
//! Cargo gives build scripts no hook after the link, so the links are made here, in the
//! directory three levels above `OUT_DIR` (`target/<profile>/build/<pkg>/out`), the one that
//! holds the library. Failing to make them is a warning: `bin/mpi-install` makes them too.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpi.so.0");
    println!("cargo:rerun-if-changed=build.rs");
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else { return };
    let Some(dir) = out.ancestors().nth(3) else { return };
    for name in ["libmpi.so.0", "libmpich.so.12", "libmpi.so.12"] {
        if let Err(e) = link(dir, name) {
            println!("cargo:warning=could not link {}/{name} to libmpi.so: {e}", dir.display());
        }
    }
}

fn link(dir: &Path, name: &str) -> std::io::Result<()> {
    let path = dir.join(name);
    match std::fs::read_link(&path) {
        Ok(t) if t == Path::new("libmpi.so") => return Ok(()),
        Ok(_) => std::fs::remove_file(&path)?,
        Err(_) if path.exists() => std::fs::remove_file(&path)?,
        Err(_) => {}
    }
    std::os::unix::fs::symlink("libmpi.so", path)
}
